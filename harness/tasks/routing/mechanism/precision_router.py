"""Precision-guided routing: the layer's precision head picks which query tokens drive retrieval.

Uncertain tokens (low precision Pi) need memory most, so the routing query pools the hidden
states with weights proportional to 1/Pi, projects the pooled state once and scores chunks by
cosine against the routing keys::

    h_pool = sum_i (1/Pi_i) h_i / sum_i (1/Pi_i),   score_j = cos(W_q h_pool, KR_j)

with Pi_i = tok_precision_i * mean_c(ch_precision_c). ``estimate_precision_gain`` ranks chunks
by sum_i (1/Pi_i) cos(W_q h_i, KR_j), a signal for deciding whether to retrieve at all. The
precision head is shared with the model; only ``q_proj`` and ``k_proj`` are new parameters.
``MeanPoolRouter`` is its ablation: the same router with uniform token weights (the seed's
``t=None`` fallback), so a contrast between the two isolates the precision weighting.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from harness.tasks.routing.mechanism.model import PCSHODLM, PrecisionHead, check_hidden
from harness.tasks.routing.mechanism.msa import MemoryBank, MSAConfig, MSALayer, check_routing_keys, msa_layer_indices


class PrecisionGuidedRouter(nn.Module):
    """Drop-in replacement for ``RouterProjector`` that pools the query by uncertainty."""

    def __init__(
        self, precision_head: PrecisionHead, d_model: int, router_dim: int, n_heads: int, eps: float = 1e-6
    ) -> None:
        super().__init__()
        self.precision_head = precision_head
        self.d_model = d_model
        self.router_dim = router_dim
        self.n_heads = n_heads
        self.eps = eps
        self.q_proj = nn.Linear(d_model, router_dim)
        self.k_proj = nn.Linear(d_model, router_dim)

    def uncertainty(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """(B, S, 1): 1 / (tok_precision * channel-mean precision)."""
        check_hidden(h, self.d_model, "query hidden states")
        tok_precision, ch_precision = self.precision_head(h, t)
        combined = tok_precision * ch_precision.mean(dim=-1, keepdim=True)
        return 1.0 / (combined + self.eps)

    def compute_precision_weights(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """(B, S, 1) non-negative token weights summing to 1, largest where precision is lowest."""
        uncertainty = self.uncertainty(h, t)
        return uncertainty / (uncertainty.sum(dim=1, keepdim=True) + self.eps)

    def precision_weighted_pool(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """(B, D): the uncertainty-weighted mean of the token states."""
        return (self.compute_precision_weights(h, t) * h).sum(dim=1)

    def project_query(self, h_q: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        """(B, router_dim): one pooled routing query (plain mean pooling when t is None)."""
        check_hidden(h_q, self.d_model, "query hidden states")
        pooled = h_q.mean(dim=1) if t is None else self.precision_weighted_pool(h_q, t)
        return self.q_proj(pooled)

    def project_key(self, h_doc: torch.Tensor) -> torch.Tensor:
        if h_doc.shape[-1] != self.d_model:
            raise ValueError(f"document hidden states must end in {self.d_model}, got {tuple(h_doc.shape)}")
        return self.k_proj(h_doc)

    def compute_routing_scores(
        self, h_query: torch.Tensor, memory_routing_keys: torch.Tensor, t: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, N) cosine between the pooled routing query and every chunk's routing key."""
        check_routing_keys(memory_routing_keys, self.router_dim)
        query = F.normalize(self.project_query(h_query, t=t), dim=-1)
        keys = F.normalize(memory_routing_keys.to(query.device), dim=-1)
        return query @ keys.T

    def estimate_precision_gain(
        self,
        h_query: torch.Tensor,
        t: torch.Tensor,
        memory_bank: MemoryBank,
        layer_idx: int,
        top_k: int = 16,
    ) -> tuple[torch.Tensor, list[str]]:
        """Top-k chunk gains sum_i (1/Pi_i) cos(W_q h_i, KR_j) per query, and the distinct doc
        ids behind the first query's top-k. An empty bank gives ``(zeros(B, 0), [])``."""
        check_hidden(h_query, self.d_model, "query hidden states")
        keys, chunk_doc_ids = memory_bank.get_routing_keys(layer_idx)
        if keys is None:
            return torch.zeros(h_query.shape[0], 0, device=h_query.device), []
        check_routing_keys(keys, self.router_dim)
        uncertainty = self.uncertainty(h_query, t)
        token_queries = F.normalize(self.q_proj(h_query), dim=-1)
        similarity = token_queries @ F.normalize(keys.to(h_query.device), dim=-1).T
        gains = (uncertainty * similarity).sum(dim=1)
        top_gains, top_chunks = gains.topk(min(top_k, keys.shape[0]), dim=-1)
        doc_ids: list[str] = []
        if h_query.shape[0]:
            for chunk in top_chunks[0].tolist():
                if chunk_doc_ids[chunk] not in doc_ids:
                    doc_ids.append(chunk_doc_ids[chunk])
        return top_gains, doc_ids


class MeanPoolRouter(PrecisionGuidedRouter):
    """The precision router with every query token equally uncertain: pooling is a plain mean
    whatever the precision head says, and the retrieval gain an unweighted sum of similarities."""

    def uncertainty(self, h: torch.Tensor, t: torch.Tensor | None) -> torch.Tensor:
        check_hidden(h, self.d_model, "query hidden states")
        return torch.ones(*h.shape[:2], 1, dtype=h.dtype, device=h.device)


def replace_router_in_msa_layer(
    msa_layer: MSALayer, precision_head: PrecisionHead, router_class: type[PrecisionGuidedRouter] = PrecisionGuidedRouter
) -> PrecisionGuidedRouter:
    """Install a PrecisionGuidedRouter (or ``router_class``) on the layer; its key projection
    starts as the old one's, so routing keys already in a bank stay valid."""
    old = msa_layer.router
    router = router_class(
        precision_head=precision_head,
        d_model=msa_layer.d_model,
        router_dim=old.q_proj.out_features,
        n_heads=old.n_heads,
    )
    with torch.no_grad():
        router.k_proj.weight.copy_(old.k_proj.weight)
        router.k_proj.bias.copy_(old.k_proj.bias)
    msa_layer.router = router
    return router


def equip_model_with_precision_routing(
    model: PCSHODLM, msa_layers: nn.ModuleList, msa_config: MSAConfig
) -> list[PrecisionGuidedRouter]:
    """Give every MSA layer a precision router fed by the precision head of its model layer."""
    layer_indices = msa_layer_indices(model.config, msa_config)
    routers = []
    for position, msa_layer in enumerate(msa_layers):
        model_layer = layer_indices.start + position
        head = model.precision_up[min(model_layer, len(model.precision_up) - 1)]
        routers.append(replace_router_in_msa_layer(msa_layer, head))
    return routers


def rowwise_spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman rank correlation of each row of a with the same row of b (ties broken by order)."""
    if a.shape[-1] < 2:
        return torch.ones(a.shape[0], device=a.device)
    rank_a = a.argsort(dim=-1).argsort(dim=-1).float()
    rank_b = b.argsort(dim=-1).argsort(dim=-1).float()
    rank_a = rank_a - rank_a.mean(dim=-1, keepdim=True)
    rank_b = rank_b - rank_b.mean(dim=-1, keepdim=True)
    return (rank_a * rank_b).sum(-1) / (rank_a.norm(dim=-1) * rank_b.norm(dim=-1) + 1e-8)


def _layer_at(msa_layers: nn.ModuleList, layer_idx: int) -> MSALayer:
    """The MSA layer serving model layer ``layer_idx`` (nearest one when none matches exactly)."""
    for msa_layer in msa_layers:
        if msa_layer.layer_idx == layer_idx:
            return msa_layer
    return min(msa_layers, key=lambda layer: abs(layer.layer_idx - layer_idx))


def compare_routing_strategies(
    model: PCSHODLM,
    msa_layers_standard: nn.ModuleList,
    msa_layers_precision: nn.ModuleList,
    memory_bank: MemoryBank,
    h_query: torch.Tensor,
    t: torch.Tensor,
    layer_idx: int,
) -> dict[str, torch.Tensor]:
    """Both routers on the same query: chunk scores, their rank correlation, top-k overlap,
    the precision weights and the total uncertainty."""
    batch, seq = h_query.shape[:2]
    keys, _ = memory_bank.get_routing_keys(layer_idx)
    if keys is None:
        return {
            "scores_standard": torch.zeros(batch, 0),
            "scores_precision": torch.zeros(batch, 0),
            "rank_correlation": torch.zeros(batch),
            "precision_weights": torch.zeros(batch, seq, 1),
            "total_uncertainty": torch.zeros(batch),
            "top_k_overlap": torch.tensor(0.0),
        }
    keys = keys.to(h_query.device)
    standard = _layer_at(msa_layers_standard, layer_idx)
    precision_router = _layer_at(msa_layers_precision, layer_idx).router
    if not isinstance(precision_router, PrecisionGuidedRouter):
        raise TypeError("msa_layers_precision must carry PrecisionGuidedRouter routers")
    scores_standard = standard.compute_routing_scores(h_query, keys)
    scores_precision = precision_router.compute_routing_scores(h_query, keys, t=t)
    k = min(16, keys.shape[0])
    top_standard = scores_standard.topk(k, dim=-1).indices
    top_precision = scores_precision.topk(k, dim=-1).indices
    shared = (top_standard.unsqueeze(-1) == top_precision.unsqueeze(-2)).any(dim=-1).sum()
    return {
        "scores_standard": scores_standard,
        "scores_precision": scores_precision,
        "rank_correlation": rowwise_spearman(scores_standard, scores_precision),
        "precision_weights": precision_router.compute_precision_weights(h_query, t),
        "total_uncertainty": precision_router.uncertainty(h_query, t).sum(dim=(1, 2)),
        "top_k_overlap": shared.float() / max(batch * k, 1),
    }
