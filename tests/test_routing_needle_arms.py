"""The premise regime's new arms: ``mask_pool`` pools exactly the masked inputs (weight 1 each, the
diffusion noise's masks included), and MSA's ``router_projector`` trains under the same contrastive
routing loss and budget as precision yet routes differently (per-token queries, max over tokens)."""
from __future__ import annotations

from pathlib import Path

import torch

from harness.execution.executor import TrialRecorder
from harness.services.seeding import torch_stream
from harness.tasks.base import TrialContext
from harness.tasks.routing.backbone import Backbone, build_model, encode_bank
from harness.tasks.routing.mechanism.msa import RouterProjector
from harness.tasks.routing.mechanism.precision_router import PrecisionGuidedRouter
from harness.tasks.routing.pooling import MaskPoolRouter, OracleMaskedRouter, pool_tokens_of, pooling_weights
from harness.tasks.routing.routers import RouterTraining, chunk_scores, install_router, new_parameters, train_router
from harness.tasks.routing.task import RoutingTask, backbone_spec, layout_of
from harness.tasks.routing.workload import make_documents, make_queries

TINY = {
    "regime": "uncertain_key", "bank_size": 16, "d_model": 16, "d_ff": 32, "n_heads": 2, "n_layers": 2,
    "msa_from_layer": 1, "router_training.dim": 8, "router_training.heads": 2, "top_k": 2, "backbone.batch": 8,
    "backbone.docs": 32, "n_entities": 8,
}


def _setup(arm: str):
    params = RoutingTask.validate_params(TINY)
    layout = layout_of(params)
    spec = backbone_spec(params, layout)
    backbone = Backbone(build_model(spec, torch_stream(5, "backbone-init"), torch.device("cpu")), spec.msa, 0.0)
    router = install_router(arm, backbone)
    generator = torch.Generator().manual_seed(2)
    documents = make_documents(layout, 32, generator)
    # noise up to half the diffusion steps: many masked inputs besides the asked value
    queries = make_queries(layout, documents, torch.arange(12), 50, 100, generator)
    return backbone, router, layout, documents, queries


def test_mask_pool_weights_are_exactly_the_mask_indicator() -> None:
    backbone, router, _, _, queries = _setup("mask_pool")
    assert isinstance(router, MaskPoolRouter)
    hidden = backbone.model.hidden_before(backbone.routing_layer, queries.noisy, queries.t)
    weights = pooling_weights(router, hidden, queries.t, pool_tokens_of(router, queries))
    indicator = queries.masked.to(weights.dtype)
    assert torch.equal(weights, indicator / indicator.sum(dim=1, keepdim=True))
    # more than the asked slot: the noise's masks count too, so it is not oracle_masked's pooling
    assert bool((queries.masked & ~queries.is_value).any())
    oracle = OracleMaskedRouter(router.precision_head, 16, 8, 1)
    assert not torch.equal(weights, pooling_weights(oracle, hidden, queries.t, pool_tokens_of(oracle, queries)))
    # the projected query is q_proj of the masked inputs' mean state, whatever the precision head says
    expected = router.q_proj((indicator.unsqueeze(-1) * hidden).sum(dim=1) / indicator.sum(dim=1, keepdim=True))
    assert torch.allclose(router.project_query(hidden, pool_tokens=queries.masked), expected, atol=1e-6)


def _trained(arm: str, tmp_path: Path):
    backbone, router, layout, documents, queries = _setup(arm)
    ctx = TrialContext(seed=1, device=torch.device("cpu"), logger=TrialRecorder(), cache_dir=tmp_path / "cache",
                       work_dir=tmp_path / arm, task="routing", task_version="test")
    _, pooled = encode_bank(backbone.model, backbone.msa, documents)
    start = [p.detach().clone() for p in new_parameters(router)]
    training = RouterTraining(steps=8, batch=8, lr=1e-2, temperature=0.05, negatives=8, max_noise_step=10)
    train_router(router, backbone, pooled, documents, layout, training, ctx)
    hidden = backbone.model.hidden_before(backbone.routing_layer, queries.noisy, queries.t)
    keys = router.project_key(pooled).flatten(0, 1)
    with torch.no_grad():
        scores = chunk_scores(router, hidden, queries.t, keys, pool_tokens_of(router, queries))
    return router, start, scores


def test_router_projector_trains_and_routes_unlike_precision(tmp_path: Path) -> None:
    projector, projector_start, projector_scores = _trained("router_projector", tmp_path)
    precision, precision_start, precision_scores = _trained("precision", tmp_path)
    assert type(projector) is RouterProjector and isinstance(precision, PrecisionGuidedRouter)
    # both start from the same router weights and train the same parameter count
    for a, b in zip(projector_start, precision_start):
        assert torch.equal(a, b)
    assert [p.shape for p in new_parameters(projector)] == [p.shape for p in new_parameters(precision)]
    # training moved every projection of the RouterProjector
    for before, after in zip(projector_start, new_parameters(projector)):
        assert not torch.allclose(before, after)
    # and it is another router: per-token queries give other chunk scores than precision's pooled query
    assert projector_scores.shape == precision_scores.shape
    assert not torch.allclose(projector_scores, precision_scores, atol=1e-3)
