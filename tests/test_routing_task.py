"""The routing task end to end with tiny params: metrics in range, reruns bit-identical; the
learned arms start from identical router weights."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from harness.execution.executor import run_single
from harness.services.seeding import torch_stream
from harness.tasks.routing.backbone import Backbone, build_model
from harness.tasks.routing.routers import install_router
from harness.tasks.routing.task import RoutingTask, backbone_spec, layout_of

TINY = {
    "bank_size": 16, "d_model": 16, "d_ff": 32, "n_heads": 2, "n_layers": 2, "msa_from_layer": 1,
    "router_training.dim": 8, "router_training.heads": 2, "top_k": 2, "backbone.steps": 6, "backbone.batch": 8,
    "backbone.docs": 32, "router_training.steps": 4, "router_training.batch": 8, "router_training.negatives": 8,
    "eval_queries": 16, "score_bank_chunks": [400], "n_entities": 8, "probe.queries": 32, "probe.steps": 5,
}


@pytest.mark.integration  # the real task end to end
@pytest.mark.parametrize(("router", "regime"), [("precision", "visible_entity"), ("oracle", "visible_entity"),
                                               ("oracle_tokens", "uncertain_key"), ("oracle_masked", "uncertain_key")])
def test_tiny_trial_reports_sane_metrics_and_reruns_identically(router: str, regime: str, tmp_path: Path) -> None:
    params = {**TINY, "router": router, "regime": regime}
    first = run_single(RoutingTask, params, seed=3, work_root=tmp_path / "a")
    assert first.status == "finished", first.error
    metrics = first.metrics
    for key in ("recall@1", "recall@2", "mrr", "hub_share", "acc_none", "acc_oracle", "acc_routed"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["recall@1"] <= metrics["recall@2"]
    assert 0 <= metrics["top1_entropy"] <= math.log2(16) + 1e-9
    for key in ("asked_slot_auroc", "layer_asked_slot_auroc@0", "layer_asked_slot_auroc@1", "probe_doc_acc",
                "at_bound/log_precision"):
        assert 0.0 <= metrics[key] <= 1.0, key
    # the routing layer of a 2-layer backbone is layer 1
    assert metrics["asked_slot_auroc"] == metrics["layer_asked_slot_auroc@1"]
    assert metrics["uncertainty_spearman"] == metrics["layer_uncertainty_spearman@1"]
    assert -1.0 <= metrics["uncertainty_spearman"] <= 1.0
    trained = router not in ("oracle", "random")
    assert metrics["budget/steps"] == (TINY["router_training.steps"] if trained else 0)
    assert metrics["budget/examples"] == metrics["budget/steps"] * TINY["router_training.batch"]
    if router == "oracle":
        assert metrics["recall@1"] == 1.0 and metrics["new_params"] == 0.0
    else:
        assert metrics["new_params"] == 2 * (16 * 8 + 8)
        chunks_per_doc = 5  # entity (2 tokens) + 4 facts of 2 tokens, in chunks of 2
        assert metrics["key_bytes_per_doc"] == chunks_per_doc * 8 * 4
        assert metrics["score_qps@400"] > 0 and metrics["score_bw_frac@400"] > 0
        assert 0.0 <= metrics["weight_on_asked"] <= 1.0
    if router == "oracle_tokens":  # it pools exactly the gold fact's entity tokens
        assert metrics["weight_on_route"] == pytest.approx(1.0) and metrics["weight_on_asked"] == 0.0
    if router == "oracle_masked":  # it pools exactly the asked slot
        assert metrics["weight_on_asked"] == pytest.approx(1.0) and metrics["weight_on_route"] == 0.0
    assert first.environment["device_name"] and first.details["cache"]["backbone"]["loaded"] is False
    again = run_single(RoutingTask, params, seed=3, work_root=tmp_path / "b")
    quality = [k for k in metrics if RoutingTask.metric_for(k).kind in ("quality", "info", "memory")]
    assert {k: again.metrics[k] for k in quality} == {k: metrics[k] for k in quality}


def test_both_learned_arms_start_from_the_same_similarity_search_router() -> None:
    params = RoutingTask.validate_params(TINY)
    layout = layout_of(params)
    spec = backbone_spec(params, layout)
    routers = {}
    for arm in ("router_projector", "precision"):
        backbone = Backbone(build_model(spec, torch_stream(5, "backbone-init"), torch.device("cpu")), spec.msa, 0.0)
        routers[arm] = install_router(arm, backbone)
    for router in routers.values():
        assert torch.equal(router.k_proj.weight, router.q_proj.weight)
    for name in ("q_proj", "k_proj"):
        a, b = getattr(routers["router_projector"], name), getattr(routers["precision"], name)
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
