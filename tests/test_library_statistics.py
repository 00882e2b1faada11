"""The paired statistics against the libraries that define them (scipy, statsmodels), on random inputs:
a replacement that moved a number would move a sealed bundle's verdict."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from harness.analysis.stats.paired_stats import (
    benjamini_hochberg,
    holm_adjust,
    mean_estimate,
    sign_flip_p_beyond,
    sign_flip_p_value,
    t_power,
    welch_difference,
)

RNG_SEEDS = range(40)


def _p_values(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 12))
    values = rng.uniform(0.0, 0.2, size=size) ** rng.uniform(0.5, 3.0)
    if size > 2:
        values[1] = values[0]  # a tie
    return [float(v) for v in values]


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_holm_is_statsmodels_holm(seed):
    ps = _p_values(seed)
    assert holm_adjust(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]), rel=1e-12)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_benjamini_hochberg_is_statsmodels_and_scipy(seed):
    ps = _p_values(seed)
    assert benjamini_hochberg(ps) == pytest.approx(list(multipletests(ps, method="fdr_bh")[1]), rel=1e-12)
    assert benjamini_hochberg(ps) == pytest.approx(list(scipy.stats.false_discovery_control(ps)), rel=1e-12)


def _differences(seed: int, n: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 13)) if n is None else n
    return rng.gamma(2.0, size=n) - 1.5 + rng.normal(0.0, 0.3)


def _exact_permutation(data: np.ndarray, alternative: str, statistic) -> float:
    return float(scipy.stats.permutation_test((data,), statistic, permutation_type="samples", vectorized=True,
                                              alternative=alternative, n_resamples=2**data.size).pvalue)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_sign_flip_p_values_are_scipy_permutation_tests(seed):
    data = _differences(seed)
    mean = lambda x, axis: np.mean(x, axis=axis)  # noqa: E731
    assert sign_flip_p_value(data) == pytest.approx(_exact_permutation(data, "two-sided", mean), rel=1e-12)
    bound = float(np.random.default_rng(seed).normal(0.0, 0.5))
    for side in (+1, -1):
        shifted = side * (data - bound)
        assert sign_flip_p_beyond(data, bound, side) == pytest.approx(
            _exact_permutation(shifted, "greater", mean), rel=1e-12)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_t_intervals_are_scipy_ttest_1samp(seed):
    data = _differences(seed)
    confidence = [0.95, 0.9, 0.99, 1 - 1e-6][seed % 4]
    estimate = mean_estimate(data, confidence)
    expected = scipy.stats.ttest_1samp(data, 0.0).confidence_interval(confidence)
    assert (estimate.interval.low, estimate.interval.high) == pytest.approx((expected.low, expected.high), rel=1e-12)
    level = [0.025, 0.001][seed % 2]
    one_sided = scipy.stats.ttest_1samp(data, 0.0).confidence_interval(1.0 - 2.0 * level)
    interval = estimate.interval_at(level)
    assert (interval.low, interval.high) == pytest.approx((one_sided.low, one_sided.high), rel=1e-9)


def test_an_interval_at_an_early_looks_level_keeps_the_digits_scipy_loses():
    """scipy inverts 1 - level, which at a sequential look's 1e-12 keeps four digits of the critical t."""
    data = _differences(0, 5)
    half = scipy.stats.t.isf(1e-12, 4) * np.std(data, ddof=1) / math.sqrt(5)
    interval = mean_estimate(data).interval_at(1e-12)
    assert (interval.low, interval.high) == pytest.approx((data.mean() - half, data.mean() + half), rel=1e-12)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_t_power_is_the_noncentral_t_beyond_the_critical_value(seed):
    rng = np.random.default_rng(seed)
    n, effect = int(rng.integers(2, 30)), float(rng.uniform(0.0, 3.0))
    alpha = float(rng.choice([0.05, 0.025, 0.001, 1e-9]))
    expected = scipy.stats.nct.sf(scipy.stats.t.isf(alpha, n - 1), n - 1, effect * math.sqrt(n))
    assert t_power(effect, n, alpha) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert t_power(effect, n, alpha) == pytest.approx(TTestPower().power(effect, n, alpha, alternative="larger"))


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_welch_intervals_are_the_welch_satterthwaite_t(seed):
    treated, controlled = _differences(seed), _differences(seed + 500) * 2.0
    var_t, var_c = treated.var(ddof=1) / treated.size, controlled.var(ddof=1) / controlled.size
    df = (var_t + var_c) ** 2 / (var_t**2 / (treated.size - 1) + var_c**2 / (controlled.size - 1))
    half = scipy.stats.t.ppf(0.975, df) * math.sqrt(var_t + var_c)
    found = welch_difference(treated, controlled)
    centre = treated.mean() - controlled.mean()
    assert found.df == pytest.approx(df, rel=1e-12)
    assert (found.interval.low, found.interval.high) == pytest.approx((centre - half, centre + half), rel=1e-12)
