"""The vocab task end to end through the spine's run_single, tiny sizes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from harness.cli import main
from harness.execution.executor import run_single
from harness.tasks.vocab.task import VocabTask

TINY = {"workload.n_concepts": 40, "workload.train_pairs": 300, "workload.test_pairs": 20, "steps": 6,
        "batch_size": 32, "dim": 8, "interference_steps": 2, "interference_batches": 3, "throughput.vocab": 300,
        "throughput.tokens": 64, "throughput.dim": 8, "throughput.min_time": 0.002}


@pytest.mark.integration  # the real task end to end
@pytest.mark.parametrize("arm", [{"index": "interference"}, {"index": "all", "mode": "fused"}])
def test_split_arm_runs_and_reruns_identically(tmp_path: Path, arm: dict) -> None:
    params = {**TINY, **arm}
    first = run_single(VocabTask, params, seed=1, work_root=tmp_path / "a")
    second = run_single(VocabTask, params, seed=1, work_root=tmp_path / "b")
    assert first.status == "finished", first.error
    metrics = first.metrics
    for key in ("acc1@both", "contested_acc1@both", "mrr", "gate_auroc", "extra_params", "embed_cost_ratio",
                "effective_vocabularies", "shared_drift", "interference_auroc", "alignment_auroc", "budget/steps",
                "budget/examples"):
        assert key in metrics
        assert VocabTask.metric_for(key) is not None
    assert metrics["budget/steps"] == TINY["steps"] and metrics["budget/examples"] == TINY["steps"] * TINY["batch_size"]
    per_row = TINY["dim"] + (arm.get("mode", "gated") == "gated")  # a gate only in gated mode
    assert metrics["split_rows"] > 0 and metrics["extra_params"] == metrics["split_rows"] * per_row
    assert metrics["extra_bytes"] == 4 * metrics["extra_params"] and 0 <= metrics["rows_in_use"] <= metrics["split_rows"]
    assert first.environment["device_name"] and first.curves["train/loss"]
    quality = [k for k in metrics if VocabTask.metric_for(k).kind != "speed"]
    assert {k: metrics[k] for k in quality} == {k: second.metrics[k] for k in quality}
    assert list((tmp_path / "a" / "cache").glob("vocab-interference-*.pt"))


@pytest.mark.integration  # the real task end to end
def test_control_and_oracle_share_the_interference_cache(tmp_path: Path) -> None:
    shared = run_single(VocabTask, {**TINY, "throughput.measure": False}, seed=0, work_root=tmp_path)
    oracle = run_single(VocabTask, {**TINY, "throughput.measure": False, "index": "oracle"}, seed=0,
                        work_root=tmp_path)
    assert shared.status == oracle.status == "finished", (shared.error, oracle.error)
    assert len(list((tmp_path / "cache").glob("vocab-interference-*.pt"))) == 1
    assert oracle.details["cache"]["interference"]["loaded"] is True
    assert shared.metrics["extra_params"] == 0 and shared.metrics["effective_vocabularies"] == 1.0
    # k contested pairs open (k below the contested count), every other pair shut: each open one beats
    # every negative and the rest tie with them
    k, contested = oracle.metrics["split_rows"], oracle.details["index"]["contested_candidates"]
    assert k < contested and oracle.metrics["gate_auroc"] == pytest.approx(0.5 + 0.5 * k / contested)
    assert shared.metrics["interference_auroc"] == oracle.metrics["interference_auroc"]


@pytest.mark.integration  # the real task end to end
def test_interference_finds_the_contested_pairs_and_the_index_takes_the_top_scores(tmp_path: Path) -> None:
    """Pins the mechanism's selection, not only its shapes: the measured conflict must rank the truly
    contested pairs high (a permuted or constant score reads ~0.5), and the split index must hold
    exactly the highest-scoring candidates. On the clean workload (whole false friends only, no
    synonyms, exact translations): graded contestedness blurs the truth for every index alike."""
    params = {"workload.n_concepts": 60, "workload.train_pairs": 2000, "workload.test_pairs": 20, "dim": 16,
              "steps": 1, "interference_steps": 20, "interference_batches": 32, "throughput.measure": False,
              "index": "interference", "workload.partial_false_friend_rate": 0.0, "workload.synonym_rate": 0.0,
              "workload.alignment_noise": 0.0}
    trial = run_single(VocabTask, params, seed=0, work_root=tmp_path)
    assert trial.status == "finished", trial.error
    assert trial.metrics["interference_auroc"] > 0.8
    (cache_file,) = (tmp_path / "cache").glob("vocab-interference-*.pt")
    scores = torch.load(cache_file)["score"].numpy()
    chosen = np.array(trial.details["gate_vs_interference"]["interference"])
    k = int(trial.metrics["split_rows"])
    assert len(chosen) == k and np.sort(chosen)[::-1].tolist() == np.sort(scores)[::-1][:k].tolist()


UNKNOWN_INDEX_SUITE = """suite: bad_vocab
task: vocab
seeds: [0]
arms:
  shared: {index: none}
  split: {index: conflict_top_k, mode: gated}
"""


def test_an_unknown_index_strategy_is_one_line_with_file_line_and_the_known_names(tmp_path: Path) -> None:
    suite = tmp_path / "bad.yaml"
    suite.write_text(UNKNOWN_INDEX_SUITE)
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {suite}:6:") and "param 'index'" in line and "conflict_top_k" in line
    for known in ("'none'", "'interference'", "'oracle'", "'random'", "'frequency'", "'language_count'", "'alignment'",
                  "'all'"):
        assert known in line, known
