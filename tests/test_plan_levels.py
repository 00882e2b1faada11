"""`harness plan` plans each claim at the level the run's first Holm step tests it (a timing claim is
in a family of its own, so it does not halve a quality claim's level) and explains its '-'."""
from __future__ import annotations

from harness import api
from harness.analysis.claim_tests.contract import QUALITY_FAMILY, TIMING_FAMILY
from harness.analysis.decide.seed_planning import ClaimPlan, SeedPlan
from harness.analysis.stats.sequential_design import Schedule, fixed_seeds_for_power

SUITE = ("suite: plan\ntask: toy_task:ToyTask\nseeds: [0, 1, 2]\narms:\n  sgd: {}\n  momentum: {momentum: 0.9}\n"
         "contrasts:\n  - {treatment: momentum, control: sgd}\nclaims:\n"
         "  - {contrast: momentum-vs-sgd, metric: accuracy, test: superior}\n"
         "  - {contrast: momentum-vs-sgd, metric: samples_per_s, test: superior}\n")


def test_a_timing_claim_does_not_halve_the_quality_claims_planning_level(tmp_path):
    suite = tmp_path / "plan.yaml"
    suite.write_text(SUITE)
    (plan,) = api.plan_seeds(suite)
    assert plan.family_sizes == {QUALITY_FAMILY: 1, TIMING_FAMILY: 1}
    text = plan.render()
    assert "quality 1 at one-sided 0.025" in text and "timing 1 at one-sided 0.025" in text and "0.0125" not in text
    ladder = {row.effect_in_sd: row.fixed_seeds for row in plan.rows}
    assert ladder[0.8] == fixed_seeds_for_power(0.8, 0.025, 0.8)
    suite.write_text(SUITE + "  - {contrast: momentum-vs-sgd, metric: loss, test: superior}\n")
    (two,) = api.plan_seeds(suite)
    assert "quality 2 at one-sided 0.0125" in two.render()


def test_a_dash_is_explained():
    plan = SeedPlan("s", {QUALITY_FAMILY: 1}, 0.025, Schedule(3, 3), "from the pilot run",
                    (ClaimPlan("a-vs-b acc superior", -0.2, None, None),))
    lines = plan.render().splitlines()
    assert lines[-2].split()[-4:] == ["-0.2", "-", "-", "-"]
    assert lines[-1].startswith("-: the pilot's estimate is not on the claim's pass side")
    assert ">1000" not in plan.render()
