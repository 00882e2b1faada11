"""A declared skewness bound: critical values calibrated to it inside the design's own schedule, read by
claims, premises, validity and planning alike, and the pooled skewness a sealed run is checked against.

The fast tier runs the calibration with few paths; tests/test_skew_schedules.py (slow) simulates every
shipped schedule.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from test_spent_levels import run_of

from harness.analysis.claim_status import INCONCLUSIVE, PASS
from harness.analysis.decide.claims import evaluate_claims, last_look_premises
from harness.analysis.decide.looks import spent_level, stored_schedule
from harness.analysis.decide.premises import HOLDS, OPEN
from harness.analysis.decide.seed_planning import plan_suite
from harness.analysis.decide.verdicts import UNDETERMINED, VALID, evaluate_validity
from harness.analysis.stats import skew_calibration
from harness.analysis.stats.sequential_design import Schedule, fixed_level, fixed_seeds_for_power, nominal_levels, spent
from harness.analysis.stats.skew_calibration import (
    bad_side_draws,
    calibrated_critical_values,
    expected_abs_skewness,
    set_skewness,
    skew_check,
)
from harness.suite.schema import SEQUENTIAL, SequentialSpec

ALPHA = 0.025


def first_crossings(looks: tuple[int, ...], critical: tuple[float, ...], draws: np.ndarray) -> float:
    """The share of paths whose t statistic reaches its look's critical value at some look."""
    sums, squares = np.cumsum(draws, axis=1), np.cumsum(draws * draws, axis=1)
    crossed = np.zeros(draws.shape[0], dtype=bool)
    for n, c in zip(looks, critical):
        mean = sums[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
        crossed |= mean * math.sqrt(n) / sd >= c
    return float(crossed.mean())


def floors_of(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    return tuple(float(scipy.stats.t.isf(level, n - 1)) for n, level in zip(looks, nominal_levels(looks, alpha)))


@pytest.fixture
def few_paths(monkeypatch):
    """The calibration on 20,000 paths: seconds, not minutes (its cache emptied before and after)."""
    skew_calibration._bad_side_t.cache_clear()
    monkeypatch.setattr(skew_calibration, "CALIBRATION_PATHS", 20_000)
    yield
    skew_calibration._bad_side_t.cache_clear()


@pytest.mark.parametrize("looks", [(6,), (3, 4, 5, 6, 7, 8)])
def test_calibrated_values_hold_the_bad_side_within_the_inflation_and_never_fall_below_t(few_paths, looks):
    spent = tuple(_spent(n / looks[-1]) for n in looks)
    floors = floors_of(looks, ALPHA)
    critical = calibrated_critical_values(looks, spent, floors, 1.0)
    assert all(c >= f for c, f in zip(critical, floors))
    draws = bad_side_draws(np.random.default_rng(99), (20_000, looks[-1]), 1.0)
    slack = 3.0 * math.sqrt(1.2 * ALPHA / 20_000)  # three Monte Carlo standard errors
    assert first_crossings(looks, critical, draws) <= 1.2 * ALPHA + slack
    assert first_crossings(looks, floors, draws) > 1.6 * ALPHA  # what t alone errs there
    normal = np.random.default_rng(98).standard_normal((20_000, looks[-1]))
    assert first_crossings(looks, critical, normal) <= ALPHA


def test_a_bound_too_small_to_matter_keeps_the_t_boundary(few_paths):
    """At skewness 0.1 t errs well within 1.2x: the bad side's own quantile lies below t's, and t's stands."""
    looks = (3, 4, 5, 6)
    floors = floors_of(looks, ALPHA)
    assert calibrated_critical_values(looks, tuple(_spent(n / 6) for n in looks), floors, 0.1)[-1] == floors[-1]


def _spent(fraction: float) -> float:
    return spent(fraction, ALPHA, "obrien_fleming")


def test_an_early_look_too_small_to_resolve_is_beyond_every_path_not_at_the_normal_boundary(few_paths):
    """At 3 seeds O'Brien-Fleming spends 7e-6 of 3..12: the normal boundary (t = 260) is no bound for
    skewed samples, so the look is set beyond every simulated path instead."""
    looks = tuple(range(3, 13))
    floors = floors_of(looks, ALPHA)
    critical = calibrated_critical_values(looks, tuple(_spent(n / 12) for n in looks), floors, 1.0)
    statistics = skew_calibration._bad_side_t(looks, 1.0, range(len(looks)))
    assert critical[0] > statistics[:, 0].max() and critical[0] >= floors[0]
    assert critical[1] > statistics[statistics[:, 0] < critical[0], 1].max()


def test_the_single_look_values_are_the_reference_ones():
    """One look at 0.025, |skewness| <= 1.0 (the full 200,000 paths): t 4.33 / 3.33 / 2.97 / 2.64 / 2.34."""
    for n, reference in ((4, 4.33), (6, 3.33), (8, 2.97), (12, 2.64), (24, 2.34)):
        level = nominal_levels((n,), ALPHA, "obrien_fleming", 1.0)[0]
        assert float(scipy.stats.t.isf(level, n - 1)) == pytest.approx(reference, abs=0.06)


def test_without_a_bound_the_levels_are_the_normal_theory_ones():
    design = Schedule(3, 8)
    assert design.levels(design.looks, ALPHA) == nominal_levels(design.looks, ALPHA)
    assert design.levels((6,), ALPHA) == (ALPHA,)
    bounded = Schedule(3, 8, skew_bound=1.0)
    assert all(b < a for a, b in zip(design.levels(design.looks, ALPHA), bounded.levels(bounded.looks, ALPHA)))


def test_the_bound_is_part_of_the_stored_design_only_when_declared():
    assert "skew_bound" not in SequentialSpec(max_seeds=8).model_dump()  # the locked designs keep their hash
    assert SequentialSpec(max_seeds=8, skew_bound=1.0).model_dump()["skew_bound"] == 1.0
    design = stored_schedule(SEQUENTIAL.read({"first": 3, "max_seeds": 8, "skew_bound": 1.0}, "sequential"), 3)
    assert design.skew_bound == 1.0 and design.describe()["skew_bound"] == 1.0
    assert "skew_bound" not in stored_schedule(SEQUENTIAL.read({"first": 3, "max_seeds": 8}, "sequential"), 3).describe()
    for bad in (0, -1.0, 3.5, True, "1"):
        with pytest.raises(ValueError, match="skew_bound"):
            SEQUENTIAL.read({"first": 3, "max_seeds": 8, "skew_bound": bad}, "sequential")


# t = 3.0 at 6 seeds: past t's 2.57, short of the 3.35 calibrated to |skewness| <= 1.0; every difference positive,
# so the sign-flip guard (1/64 at 6 pairs) does not stand in the way
_Z = np.array([-1.0, -0.9, -0.5, 0.2, 0.7, 1.5])  # all above -1.22: every difference positive
_Z = (_Z - _Z.mean()) / _Z.std(ddof=1)
AT_T3 = [float(v) for v in 1.0 + 3.0 / math.sqrt(6) + _Z]
BOUNDED = {"first": 6, "max_seeds": 6, "skew_bound": 1.0}


def test_premises_claims_and_validity_cross_on_the_calibrated_values():
    arms = {"control": {"score": [0.0] * 6}, "treat": {"score": AT_T3}}
    premise = [{"name": "regime", "arm": "treat", "metric": "score", "at_least": 1.0}]
    unbounded, bounded = run_of(arms, premises=premise), run_of(arms, sequential=BOUNDED, premises=premise)
    assert spent_level(unbounded) == pytest.approx(ALPHA, rel=1e-12)
    assert spent_level(bounded) == pytest.approx(nominal_levels((6,), ALPHA, "obrien_fleming", 1.0)[0])
    assert [p.status for p in last_look_premises(unbounded)] == [HOLDS]
    assert [p.status for p in last_look_premises(bounded)] == [OPEN]
    shifted = {"control": {"score": [0.0] * 6}, "treat": {"score": [v - 1.0 for v in AT_T3]}}
    assert [c.status for c in evaluate_claims(run_of(shifted))] == [PASS]
    (claim,) = evaluate_claims(run_of(shifted, sequential=BOUNDED))
    assert claim.status == INCONCLUSIVE and claim.boundary_t == pytest.approx(3.35, abs=0.06)
    controls = {"control": {"score": [0.0] * 6}, "treat": {"score": [0.0] * 6}, "positive": shifted["treat"]}
    validity = {"control": "control", "positive": "positive", "metric": "score"}
    assert evaluate_validity(run_of(controls, validity=validity)).status == VALID
    assert evaluate_validity(run_of(controls, sequential=BOUNDED, validity=validity)).status == UNDETERMINED


def test_planning_uses_the_calibrated_values():
    assert fixed_seeds_for_power(1.0, ALPHA, 0.8, skew_bound=1.0) > fixed_seeds_for_power(1.0, ALPHA, 0.8)
    assert fixed_level(12, ALPHA) == ALPHA and fixed_level(12, ALPHA, 1.0) < ALPHA
    beyond = fixed_level(100, ALPHA, 1.0)  # past the simulated range: the 1 / sqrt(n) decay of the excess
    assert fixed_level(64, ALPHA, 1.0) < beyond < ALPHA
    plan = plan_suite("s", 0.95, {"quality": 1}, Schedule(3, 8, skew_bound=1.0), None)
    unbounded = plan_suite("s", 0.95, {"quality": 1}, Schedule(3, 8), None)
    assert "calibrated to |skewness| <= 1" in plan.render()
    assert all(a.sequential.power <= b.sequential.power for a, b in zip(plan.rows, unbounded.rows))
    assert plan.rows[1].sequential.power < unbounded.rows[1].sequential.power


def test_the_pooled_skewness_flags_data_beyond_the_bound():
    rng = np.random.default_rng(3)
    sizes = (3, 6, 12) * 20
    skewed = [list(-bad_side_draws(rng, (1, n), 2.0)[0] * scale) for n, scale in zip(sizes, (1.0, 100.0, 0.01) * 20)]
    normal = [list(rng.normal(size=n) * scale) for n, scale in zip(sizes, (1.0, 100.0, 0.01) * 20)]
    flagged = skew_check(skewed, 1.0)
    assert flagged.exceeds and flagged.sets == 60 and "exceeds" in flagged.text()
    within = skew_check(normal, 1.0)
    assert not within.exceeds and "within" in within.text()
    assert within.at_bound == flagged.at_bound > skew_check(normal, 0.5).at_bound  # the same sizes, the bound's
    mirrored = skew_check([[-v for v in group] for group in skewed], 1.0)
    assert mirrored.pooled == pytest.approx(flagged.pooled)  # either side's skewness counts
    group = list(rng.gamma(2.0, size=9))
    assert set_skewness(group) == pytest.approx(scipy.stats.skew(group, bias=False), rel=1e-12)
    assert set_skewness([1.0, 2.0]) is None and set_skewness([3.0, 3.0, 3.0]) is None
    assert set_skewness([1.0, 2.0, math.nan, 4.0]) == pytest.approx(scipy.stats.skew([1.0, 2.0, 4.0], bias=False))
    empty = skew_check([[1.0, 2.0], [3.0, 3.0, 3.0]], 1.0)
    assert empty.pooled is None and not empty.exceeds and "not measurable" in empty.text()
    with pytest.raises(ValueError, match="skew_bound"):
        skew_check(normal, 0.0)


def test_the_skewness_a_bound_gives_is_what_g1_averages_at_that_size():
    """|G1| of a few values is mostly noise: 6 values of skewness 1.0 average 0.77, normal ones 0.67."""
    assert expected_abs_skewness(6, 1.0) == pytest.approx(0.77, abs=0.02)
    assert expected_abs_skewness(6, 0.01) == pytest.approx(0.67, abs=0.02)
    assert expected_abs_skewness(6, 0.5) < expected_abs_skewness(6, 1.0) < expected_abs_skewness(6, 1.8)
