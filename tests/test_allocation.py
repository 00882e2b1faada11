"""Arm-level allocation: a sequential suite's later looks run only the arms an open question reads, and
every claim, premise and validity check decides exactly as when every arm runs at every look.

The suites are the calibration task's (one draw of N(effect, 1) per trial, known truth): a treatment
decided at the first look, null ones that stay open, an arm only an exploratory contrast reads, and a
premise and validity controls that keep their arms running."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fault_injection import harness_here
from harness import api
from harness.analysis.present.run_costs import PHASES_FILE, stopped_arms
from harness.analysis.run_results import load_results


def suite_text(shift: int) -> str:
    """Arms: control a, b (a large effect: decided early), c and d (null and small: open for longer),
    e (read by an exploratory contrast only), v (the validity's positive control); ``shift`` moves
    every noise stream, a fresh replicate of the same design."""
    arm = "{{tag: {tag}, shared_sd: 0.1, effect: {effect}, replicate: {shift}}}"
    arms = {"a": 0.0, "b": 3.0, "c": 0.0, "d": 0.4, "e": 0.0, "v": 5.0}
    lines = "".join(f"  {name}: {arm.format(tag=name, effect=effect, shift=shift)}\n" for name, effect in arms.items())
    return (
        "suite: alloc\ntask: calibration_task:CalibrationTask\nseeds: [0, 1, 2]\nsequential: {max_seeds: 7}\n"
        f"arms:\n{lines}"
        "contrasts:\n" + "".join(f"  - {{treatment: {t}, control: a}}\n" for t in "bcdev")
        + "claims:\n" + "".join(f"  - {{contrast: {t}-vs-a, metric: score, test: superior}}\n" for t in "bcd")
        + "premises:\n  - {name: control_scores, arm: a, metric: score, at_least: -50}\n"
        + "validity: {control: a, positive: v, metric: score}\n"
    )


def run(tmp_path: Path, text: str, allocation: str) -> Path:
    suite = tmp_path / "alloc.yaml"
    suite.write_text(text)
    results = tmp_path / allocation
    outcome = api.run(suite, api.RunOptions(results=results, mlflow=False, executor="serial", allocation=allocation))
    assert outcome.exit_code == 0
    return results / "alloc" / "default"


def decisions(run_dir: Path) -> tuple:
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    claims = [(c["contrast"], c["result"], c["n"], c["look"], c["estimate"], c["ci_low"], c["ci_high"])
              for c in summary["claims"]]
    premises = [(p["name"], p["status"], p["n"]) for p in summary["premises"]]
    return claims, premises, summary["validity"]["status"], summary["seeds"]


@pytest.mark.parametrize("shift", [0, 1, 2])
def test_later_looks_run_only_open_arms_and_every_decision_is_the_same(tmp_path, shift):
    text = suite_text(shift)
    every = run(tmp_path, text, "all")
    open_only = run(tmp_path, text, "open")
    assert decisions(open_only) == decisions(every)
    full, allocated = load_results(every), load_results(open_only)
    seeds = len(full.seeds)
    assert seeds > 3, "the design never took a second look: nothing to allocate"
    assert stopped_arms(full) == {}
    # each claim's treatment stops at the seeds of the look that decided it, e (no claim) after the first
    # look, a and v (the premise's and the validity's arms) never
    expected = {"e": 3}
    for claim in json.loads((every / "report" / "summary.json").read_text())["claims"]:
        if claim["result"] in ("pass", "fail", "futile", "short of margin") and claim["n"] < seeds:
            expected[claim["contrast"].split("-vs-")[0]] = claim["n"]
    assert stopped_arms(allocated) == expected
    assert len(allocated.finished) == len(full.finished) - sum(seeds - n for n in expected.values())
    # every trial the allocated run ran is bit-identical to the full run's
    by_cell = {(r.arm_label, r.seed): r.metrics for r in full.finished}
    assert all(by_cell[(r.arm_label, r.seed)] == r.metrics for r in allocated.finished)
    text_report = (open_only / "report" / "verdicts.txt").read_text()
    assert "e at 3" in text_report and "where the time went" in text_report
    assert json.loads((open_only / PHASES_FILE).read_text())["slots"] == 1
    rebuilt = harness_here("report", str(tmp_path / "open"))
    rows = rebuilt.stdout.split("where the time went, per suite")[1].splitlines()
    assert rebuilt.returncode == 0 and rows[3].split()[:2] == ["alloc", str(len(allocated.finished))]


def test_an_unknown_allocation_is_a_usage_error(tmp_path):
    suite = tmp_path / "alloc.yaml"
    suite.write_text(suite_text(0))
    with pytest.raises(api.UsageError, match="unknown allocation 'some'"):
        api.run(suite, api.RunOptions(results=tmp_path / "r", mlflow=False, allocation="some"))


@pytest.mark.slow
def test_allocation_changes_no_decision_over_many_replicates(tmp_path):
    """The A/A arm (c) and the planted effects (b, d) over 30 fresh replicates: every claim, premise and
    validity decision the same under both allocations, so the sequential design's simulated error rates
    and power (tests/test_sequential_design.py) hold for the allocated run as they are."""
    saved = 0
    for shift in range(100, 130):
        folder = tmp_path / str(shift)
        folder.mkdir()
        every, open_only = run(folder, suite_text(shift), "all"), run(folder, suite_text(shift), "open")
        assert decisions(open_only) == decisions(every), shift
        saved += len(load_results(every).finished) - len(load_results(open_only).finished)
    assert saved > 0
