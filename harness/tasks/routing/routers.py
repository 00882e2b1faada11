"""The routing arms and how the learned ones are trained.

``precision`` (mechanism) swaps in the PrecisionGuidedRouter fed by the routing layer's (frozen)
precision head; ``mean_pool`` (its ablation, the primary control) is the same router with
uniform token weights; ``router_projector`` (MSA's control) keeps MSA's RouterProjector. All
three start from the same router weights and are trained on the frozen backbone with the same
contrastive routing loss, batches and sampled negatives, on the training documents only.
``random`` (negative control) scores documents at random and ``oracle`` (positive control) puts
the gold document first and random documents after it. Token-weighting ablations of the
precision router (``harness.tasks.routing.pooling``): ``precision_inverse`` (confident tokens up),
``precision_sharp`` (the seed's weights at a temperature below 1) and ``oracle_tokens`` (only the
tokens that identify the gold document: the positive control for pooling) and ``oracle_masked``
(only the asked slots: the positive control of the seed's premise); ``mask_pool`` (weight 1 on every
masked input: the mask-indicator shortcut).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn

from harness.services.training_loop import optimizer_step
from harness.tasks.routing.mechanism.msa import RouterProjector, routing_contrastive_loss
from harness.tasks.routing.mechanism.precision_router import (
    MeanPoolRouter,
    PrecisionGuidedRouter,
    replace_router_in_msa_layer,
)
from harness.measure.timing import throughput
from harness.tasks.base import TrialContext
from harness.tasks.routing.backbone import Backbone
from harness.tasks.routing.pooling import (
    InversePrecisionRouter,
    MaskPoolRouter,
    OracleMaskedRouter,
    OracleTokenRouter,
    SharpPrecisionRouter,
    pool_tokens_of,
)
from harness.tasks.routing.workload import Layout, QueryBatch, make_queries

Arm = Literal[
    "router_projector", "precision", "mean_pool", "random", "oracle", "precision_inverse", "precision_sharp",
    "oracle_tokens", "oracle_masked", "mask_pool",
]
POOLED: dict[str, type[PrecisionGuidedRouter]] = {
    "precision": PrecisionGuidedRouter, "mean_pool": MeanPoolRouter, "precision_inverse": InversePrecisionRouter,
    "precision_sharp": SharpPrecisionRouter, "oracle_tokens": OracleTokenRouter,
    "oracle_masked": OracleMaskedRouter, "mask_pool": MaskPoolRouter,
}
LEARNED: tuple[str, ...] = ("router_projector", *POOLED)


@dataclass(frozen=True)
class RouterTraining:
    steps: int
    batch: int
    lr: float
    temperature: float
    negatives: int
    max_noise_step: int


def install_router(arm: Arm, backbone: Backbone, sharp_temperature: float = 0.25) -> nn.Module | None:
    """The arm's router on the routing layer (None for the fixed random/oracle arms).

    The learned arms start from the same weights (see ``start_as_similarity_search``): the
    pooled routers take over the RouterProjector's q_proj as well as its k_proj. The
    precision head stays frozen. ``precision_sharp`` pools by (1/Pi)^(1/sharp_temperature).
    """
    if arm not in LEARNED:
        return None
    layer = backbone.model.blocks[backbone.routing_layer]
    start_as_similarity_search(layer.router)
    if arm in POOLED:
        old = layer.router
        router = replace_router_in_msa_layer(layer, backbone.model.precision_up[backbone.routing_layer], POOLED[arm])
        with torch.no_grad():
            router.q_proj.weight.copy_(old.q_proj.weight)
            router.q_proj.bias.copy_(old.q_proj.bias)
        if isinstance(router, SharpPrecisionRouter):
            router.power = 1.0 / sharp_temperature
    for parameter in backbone.model.parameters():
        parameter.requires_grad_(False)
    for parameter in new_parameters(layer.router):
        parameter.requires_grad_(True)
    return layer.router


def start_as_similarity_search(router: nn.Module) -> None:
    """Set k_proj to q_proj, so an untrained router scores by cosine in one shared projection
    of query and document states (a nearest-neighbour search) instead of between two unrelated
    random projections; contrastive training then starts from a router that can already match
    a query's entity tokens to the same tokens in a document, and escapes the plateau where it
    only tells entity chunks from fact chunks."""
    with torch.no_grad():
        router.k_proj.weight.copy_(router.q_proj.weight)
        router.k_proj.bias.copy_(router.q_proj.bias)


def new_parameters(router: nn.Module) -> list[nn.Parameter]:
    """The router's own projections; a precision router's head is the model's, not new."""
    return [*router.q_proj.parameters(), *router.k_proj.parameters()]


def routing_queries(router: nn.Module, hidden: torch.Tensor, t: torch.Tensor, pool_tokens: torch.Tensor) -> torch.Tensor:
    """(B, S', router_dim): per-token queries for RouterProjector, one pooled query otherwise
    (``pool_tokens`` (B, S): what an oracle router pools, see ``pool_tokens_of``)."""
    if isinstance(router, OracleTokenRouter):
        return router.project_query(hidden, pool_tokens=pool_tokens).unsqueeze(1)
    if isinstance(router, PrecisionGuidedRouter):
        return router.project_query(hidden, t=t).unsqueeze(1)
    if isinstance(router, RouterProjector):
        return router.project_query(hidden)
    raise TypeError(f"unsupported router {type(router).__name__}")


def chunk_scores(
    router: nn.Module, hidden: torch.Tensor, t: torch.Tensor, keys: torch.Tensor, pool_tokens: torch.Tensor
) -> torch.Tensor:
    """(B, n_chunks) with the router's own (reference) scoring."""
    if isinstance(router, OracleTokenRouter):
        return router.pooled_scores(hidden, keys, pool_tokens)
    if isinstance(router, PrecisionGuidedRouter):
        return router.compute_routing_scores(hidden, keys, t=t)
    return router.compute_routing_scores(hidden, keys)


def train_router(
    router: nn.Module,
    backbone: Backbone,
    pooled_states: torch.Tensor,
    documents: torch.Tensor,
    layout: Layout,
    config: RouterTraining,
    ctx: TrialContext,
) -> float:
    """Contrastive training over the gold documents plus sampled negatives; returns tokens/s.

    ``pooled_states`` (n_docs, chunks_per_doc, D) are the routing layer's chunk-pooled inputs:
    routing keys are affine in them, so ``project_key`` of the pooled states equals pooling the
    projected tokens, and documents need no re-encoding while k_proj learns.
    """
    n_docs = documents.shape[0]
    device = pooled_states.device
    data = ctx.stream("router-batches", n_docs)
    optimizer = torch.optim.Adam(new_parameters(router), lr=config.lr)

    def next_batch() -> tuple[QueryBatch, torch.Tensor]:
        gold = torch.randint(n_docs, (config.batch,), generator=data)
        queries = make_queries(layout, documents, gold, config.max_noise_step, backbone.model.config.n_diffusion_steps, data)
        candidates = torch.unique(torch.cat([gold, torch.randint(n_docs, (config.negatives,), generator=data)]))
        return queries.to(device), candidates.to(device)

    def loss_of(queries: QueryBatch, candidates: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            hidden = backbone.model.hidden_before(backbone.routing_layer, queries.noisy, queries.t)
        keys = router.project_key(pooled_states[candidates]).flatten(0, 1)
        positive = (candidates[None, :, None] == queries.gold[:, None, None]) & queries.positive_chunks[:, None, :]
        scores = chunk_scores(router, hidden, queries.t, keys, pool_tokens_of(router, queries))
        return routing_contrastive_loss(scores, positive.flatten(1), config.temperature)

    def step(_: int) -> float:
        loss = loss_of(*next_batch())
        optimizer_step(loss, optimizer)
        return float(loss.detach())

    ctx.fit(config.steps, step, name="router", log_every=20)
    fixed = next_batch()

    def forward_backward() -> None:
        loss_of(*fixed).backward()

    rate = throughput(forward_backward, config.batch * layout.query_len, min_run_time=0.1)
    optimizer.zero_grad(set_to_none=True)
    return rate


def fixed_document_scores(arm: Arm, gold: torch.Tensor, n_docs: int, generator: torch.Generator) -> torch.Tensor:
    """(B, n_docs) scores of the controls: uniform noise in [0, 1); the oracle adds 1 to the
    gold document's, so its top-k is the gold document and k - 1 random distractors."""
    noise = torch.rand(gold.shape[0], n_docs, generator=generator).to(gold.device)
    if arm == "random":
        return noise
    if arm == "oracle":
        return noise + torch.nn.functional.one_hot(gold, n_docs).to(noise.dtype)
    raise ValueError(f"arm {arm!r} has a learned router")

