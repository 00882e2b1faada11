"""Fair-arm facts: unequal training budgets within a seed are flagged in every report even where no
premise names them, fractions at a bound are shown in the arm table, and the toy task reports its
budget as every trained arm must."""
from __future__ import annotations

import json
from pathlib import Path

from records import make_record

from harness import api
from harness.analysis.decide.fairness import unequal_budgets
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.present.run_summary import SuiteSummary, render_summary
from harness.analysis.present.verdict_tables import render_arm_table, render_report
from harness.analysis.run_results import index_results
from harness.suite.stored import StoredSuite

METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
    "budget/steps": {"direction": "none", "unit": "steps", "kind": "info"},
    "at_bound/gain": {"direction": "none", "unit": "fraction", "kind": "info"},
}


def results(steps: dict[str, list[float]], at_bound: float = 0.0):
    trials = []
    for seed in range(3):
        for arm in ("raw", "compressed"):
            metrics = {"acc": 0.5 + 0.01 * seed + (0.02 if arm == "raw" else 0.0),
                       "budget/steps": steps[arm][seed], "at_bound/gain": at_bound if arm == "compressed" else 0.0}
            trials.append(make_record(f"{arm}-{seed}", arm, seed, metrics=metrics))
    meta = {"suite": "fair", "profile": "default", "seeds": [0, 1, 2], "sweep": {}, "metrics": METRICS,
            "arms": {"raw": {"labels": ["raw"]}, "compressed": {"labels": ["compressed"]}},
            "contrasts": [{"treatment": "compressed", "control": "raw"}], "claims": []}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_equal_budgets_raise_no_flag():
    assert unequal_budgets(results({"raw": [900.0] * 3, "compressed": [900.0] * 3})) == []


def test_an_untrained_arm_reporting_zero_steps_is_not_compared():
    assert unequal_budgets(results({"raw": [900.0] * 3, "compressed": [0.0] * 3})) == []
    (flag,) = unequal_budgets(results({"raw": [900.0] * 3, "compressed": [0.0, 700.0, 0.0]}))
    assert flag.seeds == (1,) and flag.of_seeds == 1


def test_unequal_budgets_within_a_seed_are_flagged_in_the_report_and_the_summary():
    run = results({"raw": [900.0] * 3, "compressed": [700.0, 900.0, 700.0]})
    (flag,) = unequal_budgets(run)
    assert flag.key == "budget/steps" and flag.seeds == (0, 2) and flag.of_seeds == 3
    assert dict(flag.example) == {"raw": 900.0, "compressed": 700.0}
    text = "unequal budget/steps within 2 of 3 seed(s) (seed 0: raw 900, compressed 700)"
    analysis = analyse(run)
    assert f"warning: {text}" in render_report(analysis)
    assert f"warning: {text}" in render_summary([SuiteSummary(analysis)])


def test_the_arm_table_shows_fractions_at_a_bound():
    table = render_arm_table(results({"raw": [900.0] * 3, "compressed": [900.0] * 3}, at_bound=0.97))
    header, _, *rows = table.splitlines()
    assert "at_bound/gain" in header
    assert any(row.startswith("compressed") and "0.97" in row for row in rows)


def test_the_toy_task_reports_its_budget_and_a_shorter_arm_is_flagged(tmp_path):
    suite = tmp_path / "fair.yaml"
    suite.write_text(
        "suite: fair\ntask: toy_task:ToyTask\nseeds: [0, 1]\nparams: {steps: 6, samples: 16}\n"
        "arms:\n  sgd: {}\n  short: {steps: 4}\ncontrasts:\n  - {treatment: short, control: sgd}\n"
    )
    assert api.run(suite, api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1)).exit_code == 0
    document = json.loads((tmp_path / "r" / "fair" / "default" / "report" / "summary.json").read_text())
    assert document["arms"]["sgd"][""]["budget/steps"]["mean"] == 6
    assert document["arms"]["short"][""]["budget/examples"]["mean"] == 4 * 32
    flagged = {(b["key"], tuple(b["seeds"])) for b in document["unequal_budgets"]}
    assert flagged == {("budget/steps", (0, 1)), ("budget/examples", (0, 1))}
