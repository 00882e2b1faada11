"""The routing suites tune a nested param by its dotted key (``router_training.lr``): the grid's points
are read from the validated nested params, and each tuning trial, which records its params nested, is
scored at its own point; every tuned arm of both suites gets a grid of the same size."""
from __future__ import annotations

from pathlib import Path

import pytest
from records import make_record

from harness.analysis.decide.tune_grid import score_grid
from harness.suite.loader import load_suites
from harness.suite.tuning_plan import at_dotted, grid_points, tune_plan

SUITES = Path(__file__).resolve().parents[1] / "suites"


def test_at_dotted_reads_a_nested_value_and_none_where_absent() -> None:
    params = {"router_training": {"lr": 0.01, "steps": 150}, "router": "precision"}
    assert at_dotted(params, "router_training.lr") == 0.01 and at_dotted(params, "router") == "precision"
    assert at_dotted(params, "router_training.temperature") is None and at_dotted(params, "router.lr") is None


@pytest.mark.parametrize("suite_file", ["routing.yaml", "routing_needle.yaml"])
def test_a_dotted_tune_key_makes_grid_points_and_scores_nested_trial_params(suite_file: str) -> None:
    (suite,) = load_suites(SUITES / suite_file, apply_locks=False)
    plan = tune_plan(suite.tune, suite.arms)
    sizes = {name: len(grid_points(suite, name, tuning)) for name, tuning in plan.items()}
    lrs = suite.tune.space["router_training.lr"]
    assert set(sizes.values()) == {len(lrs)} and len(lrs) >= 3 and "random" not in sizes
    points = grid_points(suite, "precision", plan["precision"])
    assert points == [{"router_training.lr": lr} for lr in lrs]
    scores = [0.1 * (i + 1) for i in range(len(lrs))]
    scores[1] = 0.9  # the second point is best
    records = [make_record(f"p{i}-{seed}", "precision", seed, params={"router_training": {"lr": lr}},
                           metrics={"recall@1": value})
               for i, (lr, value) in enumerate(zip(lrs, scores)) for seed in suite.tune.seeds]
    grid = score_grid("precision", points, records, "recall@1", "higher", list(suite.tune.seeds))
    assert [point.mean for point in grid.points] == pytest.approx(scores)
    assert grid.chosen.params == {"router_training.lr": lrs[1]}
