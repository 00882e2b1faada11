"""Routing and end-to-end figures computed from scores, logits and precisions (no training)."""
from __future__ import annotations

import math

import torch

from harness.measure import ranks
from harness.mechanisms.routing.model import PCSHODLM
from harness.tasks.routing.workload import QueryBatch


def gold_ranks(doc_scores: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """1-based rank of the gold document; ties count against it (no credit for a flat router)."""
    gold_score = doc_scores.gather(1, gold[:, None])
    ahead = (doc_scores > gold_score).sum(dim=1) + (doc_scores == gold_score).sum(dim=1) - 1
    return ahead + 1


def retrieval_metrics(doc_scores: torch.Tensor, gold: torch.Tensor, k: int) -> dict[str, float]:
    """recall@1, recall@k, MRR and hubness of the top-1 choices."""
    ranks = gold_ranks(doc_scores, gold).double()
    top1 = doc_scores.argmax(dim=1)
    counts = torch.bincount(top1, minlength=doc_scores.shape[1]).double()
    share = counts / counts.sum()
    nonzero = share[share > 0]
    return {
        "recall@1": float((ranks <= 1).double().mean()),
        f"recall@{k}": float((ranks <= k).double().mean()),
        "mrr": float((1.0 / ranks).mean()),
        "hub_share": float(share.max()),
        "top1_entropy": float(-(nonzero * nonzero.log2()).sum()),
    }


@torch.no_grad()
def value_predictions(
    model: PCSHODLM, hidden: torch.Tensor, queries: QueryBatch, start: int, memory
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query: fraction of value tokens predicted right, mean log-probability of the values.

    ``hidden`` is the state entering layer ``start`` (memory only enters from there on).
    """
    logits = model.readout(model.run_layers(hidden, queries.t, start, model.config.n_layers, memory))
    log_probs = logits.log_softmax(dim=-1).gather(-1, queries.clean.unsqueeze(-1)).squeeze(-1)
    correct = (logits.argmax(dim=-1) == queries.clean) & queries.is_value
    n_values = queries.is_value.sum(dim=1).double()
    accuracy = correct.sum(dim=1).double() / n_values
    mean_log_prob = (log_probs.double() * queries.is_value).sum(dim=1) / n_values
    return accuracy, mean_log_prob


def _numpy(x: torch.Tensor):
    return x.detach().flatten().double().cpu().numpy()


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    return ranks.spearman(_numpy(a), _numpy(b))


def auroc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    return ranks.auroc(_numpy(scores), labels.detach().flatten().bool().cpu().numpy())


def precision_sanity(tok_precision: torch.Tensor, masked: torch.Tensor, token_loss: torch.Tensor) -> dict[str, float]:
    """Does token precision mean something? Masked vs visible means and rank correlations."""
    precision = tok_precision.squeeze(-1).double()
    masked_mean = float(precision[masked].mean())
    unmasked_mean = float(precision[~masked].mean()) if bool((~masked).any()) else math.nan
    return {
        "prec_masked": masked_mean,
        "prec_unmasked": unmasked_mean,
        "prec_ratio": masked_mean / unmasked_mean,
        "prec_spearman": spearman(precision, token_loss.double()),
        "prec_spearman_masked": spearman(precision[masked], token_loss.double()[masked]),
    }
