"""Nine realistic one-line breaks that once got past both the tests and the CI gate, each caught here (the
mutation list in tests/mutation_check.py holds them; the code hash's ``.c`` sources are caught in
tests/test_code_hash.py, the totals counting an undetermined suite as valid in tests/test_escaped_breaks.py):
the design lock without the claims, superseded trials matched by arm instead of arm label, a zero-spread
value gated with the suite's default tolerance, the mirror dropping zeros, export swapping arm and arm
label, history printing an interval's ends swapped, and recall@k counting ranks below k."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
import torch

import test_gating_baseline
from harness import api
from harness.analysis.present.claim_history import ClaimPoint, render_history
from harness.analysis.present.trial_table import export_frame
from harness.store import RunFolder
from harness.tasks.routing.evaluation import retrieval_metrics
from harness.tracking.trial_view import TrialView
from records import make_record
from test_design_lock import SUITE, run
from test_gating_baseline import invoke, make_run, shift


def test_a_rerun_with_changed_claims_is_refused_by_the_design_lock(tmp_path):
    original = tmp_path / "s.yaml"
    original.write_text(SUITE.replace("SEQUENTIAL", "").replace("PREMISES", "").replace("EFFECT", "3.0"))
    assert run(original, tmp_path / "r").exit_code == 0
    changed = tmp_path / "changed.yaml"
    changed.write_text(original.read_text().replace("test: superior}", "test: superior, margin: 0.5}"))
    with pytest.raises(api.UsageError, match="differs in claims"):
        run(changed, tmp_path / "r")


SWEPT = """\
suite: swept
task: calibration_task:CalibrationTask
seeds: [0, 1]
arms:
  a: {tag: a}
  b:
    tag: b
    sweep: {effect: [0.5, 1.0]}
contrasts:
  - {treatment: b, control: a}
"""


def test_a_rerun_keeps_every_variant_of_a_swept_arm(tmp_path):
    """Each variant of a swept arm is its own trial: matched by arm, one variant would supersede the
    other and every rerun would set half of them aside and run them again."""
    suite = tmp_path / "swept.yaml"
    suite.write_text(SWEPT)
    first = run(suite, tmp_path / "r")
    assert first.exit_code == 0 and first.suites[0].outcome.ran == 6
    trials = sorted(p.name for p in (tmp_path / "r" / "swept" / "default" / "trials").glob("*.json"))
    again = run(suite, tmp_path / "r")
    assert again.exit_code == 0 and again.suites[0].outcome.ran == 0
    assert sorted(p.name for p in (tmp_path / "r" / "swept" / "default" / "trials").glob("*.json")) == trials
    assert not (tmp_path / "r" / "swept" / "default" / "trials" / "superseded").exists()


def test_a_value_every_seed_agreed_on_is_gated_at_round_off_not_the_suites_tolerance(tmp_path, monkeypatch):
    """Zero spread is a measured spread: a move of 0.01 (within the default tolerance 0.05) is a regression."""
    monkeypatch.setattr(test_gating_baseline, "SEED_NOISE", {"treat": 0.0, "control": 0.0})
    assert invoke("baseline", "save", make_run(tmp_path / "reference"), "--out", tmp_path / "baselines").exit_code == 0
    moved = invoke("gate", make_run(tmp_path / "current", shift("treat", "err", 0.01)),
                   "--baselines-dir", tmp_path / "baselines")
    assert moved.exit_code == 1, moved.output
    assert any("REGRESSION quality" in line and " err:" in line for line in moved.output.splitlines())


def test_the_mirror_keeps_a_final_metric_of_zero():
    record = make_record("t1", metrics={"accuracy": 0.0, "loss": 0.0, "budget": 3.0})
    assert TrialView().shown_metrics(record) == {"accuracy": 0.0, "loss": 0.0, "budget": 3.0}


def test_export_puts_the_arm_and_its_label_in_their_own_columns(tmp_path):
    folder = RunFolder(tmp_path, "synth", "default")
    folder.save_suite({"schema": 1, "suite": "synth", "profile": "default", "task": "synth", "task_version": "1",
                       "seeds": [0], "sweep": {}, "contrasts": [], "claims": [], "metrics": {}})
    folder.save_trial(make_record("t1", "b", 0, arm_label="b[effect=0.5]", metrics={"score": 1.0}))
    [row] = export_frame([folder.path]).to_dict("records")
    assert (row["arm"], row["arm_label"]) == ("b", "b[effect=0.5]")


def test_history_prints_each_interval_low_end_first():
    point = ClaimPoint("b-vs-a/score", "0123456789abcdef", datetime(2026, 1, 2, tzinfo=timezone.utc), "f" * 40, False,
                       0.1, -0.2, 0.4, "INCONCLUSIVE", 3)
    assert "[-0.2, 0.4]" in render_history([point])


@pytest.mark.parametrize("k", [2, 5])
def test_recall_at_k_counts_the_gold_document_at_rank_k(k):
    """Query n's gold document is ranked n + 1: recall@k is the share ranked 1..k, k out of 6."""
    scores = torch.arange(6, 0, -1, dtype=torch.float64).repeat(6, 1)  # doc 0 scores highest in every row
    gold = torch.arange(6)
    metrics = retrieval_metrics(scores, gold, k)
    assert metrics["recall@1"] == pytest.approx(1 / 6)
    assert metrics[f"recall@{k}"] == pytest.approx(k / 6)
