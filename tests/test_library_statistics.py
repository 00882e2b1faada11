"""The paired statistics against the libraries that define them (scipy, statsmodels), on random inputs:
a replacement that moved a number would move a sealed bundle's verdict."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from harness.analysis.stats.paired_stats import (
    benjamini_hochberg,
    holm_adjust,
    mean_estimate,
    pair_values,
    paired_difference,
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


@pytest.mark.parametrize("seed", RNG_SEEDS[:10])
def test_t_p_values_are_scipy_ttest_1samp_two_sided_and_one_sided(seed):
    data = _differences(seed)
    estimate = mean_estimate(data)
    assert (estimate.n, estimate.mean, estimate.sd) == (data.size, pytest.approx(data.mean(), rel=1e-12),
                                                        pytest.approx(np.std(data, ddof=1), rel=1e-12))
    assert estimate.confidence == 0.95 and not estimate.insufficient
    assert estimate.p_value == pytest.approx(scipy.stats.ttest_1samp(data, 0.0).pvalue, rel=1e-12)
    bound = float(np.random.default_rng(seed).normal(0.0, 0.5))
    assert estimate.p_above(bound) == pytest.approx(
        scipy.stats.ttest_1samp(data, bound, alternative="greater").pvalue, rel=1e-9)
    assert estimate.p_below(bound) == pytest.approx(
        scipy.stats.ttest_1samp(data, bound, alternative="less").pvalue, rel=1e-9)


def test_the_mean_of_no_values_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^the mean of an empty sample$"):
        mean_estimate([])


def test_one_value_has_its_mean_and_confidence_but_no_spread_interval_or_p():
    estimate = mean_estimate([0.7], 0.9)
    assert (estimate.n, estimate.mean, estimate.sd, estimate.interval, estimate.p_value, estimate.confidence) == \
        (1, 0.7, None, None, None, 0.9)
    assert estimate.insufficient and estimate.p_above(0.0) is None and estimate.standard_error is None


@pytest.mark.parametrize(("value", "p_value"), [(0.0, 1.0), (0.25, 0.0), (-2.0, 0.0)])
def test_equal_values_are_a_deterministic_quantity_a_point_interval_and_a_sure_p(value, p_value):
    """scipy's t test divides by the zero spread (NaN); the harness reads the values as exact."""
    estimate = mean_estimate([value] * 4, 0.9)
    assert (estimate.n, estimate.mean, estimate.sd, estimate.p_value, estimate.confidence) == (4, value, 0.0, p_value, 0.9)
    assert estimate.interval is not None and (estimate.interval.low, estimate.interval.high) == (value, value)
    assert not estimate.insufficient
    assert estimate.p_above(value) == 0.0 and estimate.p_below(value) == 0.0  # the bound itself is met
    assert estimate.p_above(value + 0.5) == 1.0 and estimate.p_below(value - 0.5) == 1.0


def test_single_precision_values_are_computed_in_double_precision():
    """A float32 sample (a tensor's numpy()) gets the statistics of its values as doubles, not float32 ones."""
    values = np.array([0.1, 0.2, 0.35, 0.05, 0.4], dtype=np.float32)
    doubles = values.astype(np.float64)
    estimate = mean_estimate(values)
    expected = scipy.stats.ttest_1samp(doubles, 0.0)
    assert estimate.mean == pytest.approx(doubles.mean(), rel=1e-15)
    assert estimate.sd == pytest.approx(doubles.std(ddof=1), rel=1e-15)
    interval = expected.confidence_interval(0.95)
    assert (estimate.interval.low, estimate.interval.high) == pytest.approx((interval.low, interval.high), rel=1e-13)
    # two patterns whose means differ by 1e-7 relative: a tie in float32's tolerance, not in float64's
    tied = np.array([1.0, 1e-7, 0.5], dtype=np.float32)
    mean = lambda x, axis: np.mean(x, axis=axis)  # noqa: E731
    exact = _exact_permutation(tied.astype(np.float64), "greater", mean)
    assert exact == 0.125
    assert sign_flip_p_beyond(tied, 0.0, +1) == exact
    both_ways = lambda x, axis: np.abs(np.mean(x, axis=axis))  # noqa: E731
    assert sign_flip_p_value(tied) == _exact_permutation(tied.astype(np.float64), "greater", both_ways) == 0.25


def test_pairs_of_any_hashable_keys_line_up_and_name_what_was_dropped():
    """Pairing keys of mixed types (seeds, names, tuples) pair and sort alike; an expected or one-sided key,
    or a non-finite value, is dropped and named."""
    treatment = {"a": 1.0, 2: 3.0, (1, "x"): 2.5, "gone": 1.0, 3: float("nan")}
    control = {"a": 0.5, 2: 2.0, (1, "x"): 2.0, "b": 1.0, 3: 1.0}
    found = paired_difference(treatment, control, expected=[7])
    assert found.pair_keys == ("a", (1, "x"), 2)
    assert found.treatment == (1.0, 2.5, 3.0) and found.control == (0.5, 2.0, 2.0)
    assert found.differences == (0.5, 0.5, 1.0)
    assert found.dropped == ("b", "gone", 3, 7)
    keys, treated, controlled = pair_values(treatment, control)
    assert keys == found.pair_keys and treated.tolist() == [1.0, 2.5, 3.0] and controlled.tolist() == [0.5, 2.0, 2.0]


def test_nearly_equal_values_get_scipys_t_interval_without_its_cancellation_warning():
    """scipy warns that nearly identical values lose precision in its moments; the t test survives it, and
    the warning would only repeat at every look of every claim."""
    data = np.array([1.0, 1.0 + 2e-16, 1.0 + 4e-16, 1.0])
    with pytest.warns(RuntimeWarning, match="catastrophic cancellation"):
        expected = scipy.stats.ttest_1samp(data, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate = mean_estimate(data)
    assert estimate.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    interval = expected.confidence_interval(0.95)
    assert (estimate.interval.low, estimate.interval.high) == pytest.approx((interval.low, interval.high), rel=1e-12)
