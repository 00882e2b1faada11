"""Routing and end-to-end figures computed from scores, logits and precisions (no training)."""
from __future__ import annotations


import torch

from harness.measure import ranks
from harness.tasks.routing.mechanism.model import PCSHODLM
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
    """Spearman's rho (average ranks for ties); NaN where either side is constant."""
    return ranks.spearman(_numpy(a), _numpy(b))


def auroc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    return ranks.auroc(_numpy(scores), labels.detach().flatten().bool().cpu().numpy())


def token_uncertainty(tok_precision: torch.Tensor, ch_precision: torch.Tensor) -> torch.Tensor:
    """(B, S) 1/Pi with the channel precisions averaged, as the precision router weighs tokens."""
    return 1.0 / (tok_precision.squeeze(-1) * ch_precision.mean(dim=-1))


def precision_signal(
    tok_precision: torch.Tensor, ch_precision: torch.Tensor, queries: QueryBatch, token_loss: torch.Tensor
) -> dict[str, float]:
    """Does 1/Pi mark what the model does not know? AUROC of 1/Pi for the asked (masked value)
    slots against the visible tokens (other masked tokens left out), Spearman of 1/Pi with the
    per-token denoising loss over all positions and over the masked ones."""
    uncertainty = token_uncertainty(tok_precision, ch_precision).double()
    loss = token_loss.double()
    scored = queries.is_value | ~queries.masked
    return {
        "asked_slot_auroc": auroc(uncertainty[scored], queries.is_value[scored]),
        "uncertainty_spearman": spearman(uncertainty, loss),
        "uncertainty_spearman_masked": spearman(uncertainty[queries.masked], loss[queries.masked]),
    }
