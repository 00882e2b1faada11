"""The calibrated critical values inside every shipped sequential schedule (slow tier): claims and premises
read at a declared skewness bound of 1.0 keep their one-sided error within 1.2x the level on a gamma of
that skewness skewed to the side they err on, within the level on normal data, and within 1.2x on t(5)
tails; t alone, on the same skewed paths, does not.

A lone claim at its level and a claim at a Holm level (alpha / 4) are read through the design's
levels as evaluate_claims reads them (a pass when the t statistic reaches the look's critical value at
some look; the sign-flip guard only ever removes passes, so it is left out). A premise is read as
premises.py reads it at each look (``bound_status`` at the look's spent level): checked against the
harness's own function on the first paths, then counted on all of them. Independent seeds from the
calibration's own; the slack is three Monte Carlo standard errors.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.decide.premises import HOLDS, bound_status
from harness.analysis.stats.paired_stats import critical_t, mean_estimate
from harness.analysis.stats.sequential_design import Schedule
from harness.analysis.stats.skew_calibration import INFLATION, bad_side_draws

pytestmark = pytest.mark.slow

ALPHA = 0.025
BOUND = 1.0
PATHS = 100_000
SCHEDULES = {  # the shipped suites' sequential designs (suites/*.yaml), and a long one
    "vocab": Schedule(3, 12, futility_from=0.5),
    "vocab_cldr": Schedule(4, 12, batch=2, futility_from=0.5),
    "routing": Schedule(3, 8, futility_from=0.5),
    "routing_needle": Schedule(3, 8, batch=2, futility_from=0.5),
    "er2_mqar": Schedule(3, 10, futility_from=0.5),
    "er2_passkey": Schedule(3, 5, batch=2, futility_from=0.5),
    "er2_passkey_noninferiority": Schedule(4, 16, batch=2, futility_from=0.5),
    "3..24": Schedule(3, 24),
}


def draws_of(kind: str, paths: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.standard_normal((paths, width))
    if kind == "gamma":
        return bad_side_draws(rng, (paths, width), BOUND)
    return rng.standard_t(5, size=(paths, width))


def t_statistics(draws: np.ndarray, looks: tuple[int, ...]) -> np.ndarray:
    sums, squares = np.cumsum(draws, axis=1), np.cumsum(draws * draws, axis=1)
    columns = []
    for n in looks:
        mean = sums[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
        columns.append(mean * math.sqrt(n) / sd)
    return np.stack(columns, axis=1)


def error_rate(design: Schedule, alpha: float, statistics: np.ndarray) -> float:
    """The share of paths that pass at some look of the design at one-sided ``alpha``."""
    critical = [critical_t(level, n) for n, level in zip(design.looks, design.levels(design.looks, alpha))]
    return float((statistics >= np.asarray(critical)).any(axis=1).mean())


def allowed(rate: float) -> float:
    return rate + 3.0 * math.sqrt(rate / PATHS)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_claims_keep_their_error_at_the_bound_inside_the_schedule(name):
    unbounded = SCHEDULES[name]
    design = Schedule(unbounded.first, unbounded.max_seeds, unbounded.batch, futility_from=unbounded.futility_from,
                    skew_bound=BOUND)
    for seed, kind in enumerate(("normal", "gamma", "t5")):
        statistics = t_statistics(draws_of(kind, PATHS, design.max_seeds, 7_000 + seed), design.looks)
        for alpha in (ALPHA, ALPHA / 4):
            limit = alpha if kind == "normal" else INFLATION * alpha
            assert error_rate(design, alpha, statistics) <= allowed(limit), (name, kind, alpha)
            if kind == "gamma":  # what the calibration is for: t alone errs far beyond it
                assert error_rate(unbounded, alpha, statistics) > 1.5 * alpha


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_premises_at_their_bound_hold_no_more_often_than_the_inflation_allows(name):
    """A premise exactly at its bound (at_least 0 on mean-0 values), read at every look's spent level."""
    unbounded = SCHEDULES[name]
    design = Schedule(unbounded.first, unbounded.max_seeds, unbounded.batch, skew_bound=BOUND)
    levels = design.levels(design.looks, ALPHA)
    for seed, kind in enumerate(("normal", "gamma", "t5")):
        draws = draws_of(kind, PATHS, design.max_seeds, 8_000 + seed)
        statistics = t_statistics(draws, design.looks)
        critical = np.asarray([critical_t(level, n) for n, level in zip(design.looks, levels)])
        holds = statistics >= critical
        for path in range(200):  # the rule counted is premises.py's own
            for k, (n, level) in enumerate(zip(design.looks, levels)):
                status, _, _ = bound_status(mean_estimate(draws[path, :n]), 0.0, None, level)
                assert (status == HOLDS) == bool(holds[path, k]), (name, kind, path, n)
        limit = ALPHA if kind == "normal" else INFLATION * ALPHA
        assert float(holds.any(axis=1).mean()) <= allowed(limit), (name, kind)
