"""The routing task end to end with tiny params: metrics in range, reruns bit-identical."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.execution.executor import run_single
from harness.tasks.routing.task import RoutingTask

TINY = {
    "bank_size": 16, "d_model": 16, "d_ff": 32, "n_heads": 2, "n_layers": 2, "msa_from_layer": 1,
    "router_dim": 8, "n_router_heads": 2, "top_k": 2, "backbone_steps": 6, "backbone_batch": 8,
    "backbone_docs": 32, "router_steps": 4, "router_batch": 8, "router_negatives": 8, "eval_queries": 16,
    "score_bank_chunks": [400], "n_keys": 16,
}


@pytest.mark.parametrize("router", ["precision", "oracle"])
def test_tiny_trial_reports_sane_metrics_and_reruns_identically(router: str, tmp_path: Path) -> None:
    params = {**TINY, "router": router}
    first = run_single(RoutingTask, params, seed=3, work_root=tmp_path / "a")
    assert first["status"] == "finished", first["error"]
    metrics = first["metrics"]
    for key in ("recall@1", "recall@2", "mrr", "hub_share", "acc_none", "acc_oracle", "acc_routed"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["recall@1"] <= metrics["recall@2"]
    assert 0 <= metrics["top1_entropy"] <= math.log2(16) + 1e-9
    assert metrics["prec_masked"] > 0 and metrics["prec_unmasked"] > 0
    if router == "oracle":
        assert metrics["recall@1"] == 1.0 and metrics["new_params"] == 0.0
    else:
        assert metrics["new_params"] == 2 * (16 * 8 + 8)
        assert metrics["key_bytes_per_doc"] == 4 * 8 * 4
        assert metrics["score_qps@400"] > 0 and metrics["score_bw_frac@400"] > 0
    assert first["details"]["device"]
    again = run_single(RoutingTask, params, seed=3, work_root=tmp_path / "b")
    quality = [k for k in metrics if RoutingTask.metric_for(k).kind in ("quality", "info", "memory")]
    assert {k: again["metrics"][k] for k in quality} == {k: metrics[k] for k in quality}
