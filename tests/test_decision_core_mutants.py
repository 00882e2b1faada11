"""Behaviour of the decision core (statistics, decision rules, claim tests, the gate) that mutation testing
(`tox -e mutation`, docs/mutation-testing.md) found no other fast test held: each test names what a user
reads (an interval, a p-value, a verdict, a gate decision) and checks it against its definition or a
library (scipy, statsmodels) where a statistic is involved."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.power import TTestPower

from harness.analysis.stats import paired_stats, sequential_design, skew_calibration
from harness.analysis.stats.number_format import fmt
from harness.analysis.stats.paired_stats import (
    benjamini_hochberg,
    critical_t,
    holm_adjust,
    mean_estimate,
    minimum_detectable_effect,
    pair_values,
    paired_difference,
    sign_flip_p_beyond,
    sign_flip_p_value,
    smallest_one_sided_sign_flip_p,
    smallest_sign_flip_p,
    summarize,
    t_sf,
    welch_difference,
)

NEARLY_EQUAL = [1.0, 1.0 + 1e-15, 1.0, 1.0 + 2e-15]  # scipy warns of catastrophic cancellation on these


def no_warnings():
    """A context in which any warning is an error: what the statistics promise to keep quiet about."""
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("error")
    return context


# -- numbers in reports ------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "signed", "text"), [
    (3.0, False, "3"), (3.0, True, "+3"), (1.0, True, "+1"), (0.5, True, "+0.5"), (-3.0, True, "-3"), (0.0, True, "0"), (4096, False, "4096"),
    (2.5, False, "2.5"), (2.5, True, "+2.5"), (-2.5, True, "-2.5"), (0.123456, False, "0.1235"),
    (1e12, False, "1e+12"), (-1e12, True, "-1e+12"), (999_999_999_999.0, False, "999999999999"),
])
def test_numbers_print_integers_exactly_and_the_rest_to_four_digits(value, signed, text):
    assert fmt(value, signed) == text


# -- the t test of one sample ------------------------------------------------------------------------

def test_a_mean_estimate_is_scipys_one_sample_t_test_at_its_confidence():
    data = [0.3, -0.1, 0.8, 0.45, 0.2, 0.05]
    for confidence in (0.95, 0.8):
        estimate = mean_estimate(data, confidence)
        test = scipy.stats.ttest_1samp(data, 0.0)
        interval = test.confidence_interval(confidence)
        assert estimate.n == 6 and estimate.confidence == confidence
        assert estimate.mean == pytest.approx(np.mean(data), rel=1e-15)
        assert estimate.sd == pytest.approx(np.std(data, ddof=1), rel=1e-15)
        assert (estimate.interval.low, estimate.interval.high) == pytest.approx((interval.low, interval.high), rel=1e-12)
        assert estimate.p_value == pytest.approx(test.pvalue, rel=1e-12)
        assert estimate.standard_error == pytest.approx(np.std(data, ddof=1) / math.sqrt(6), rel=1e-15)
        assert not estimate.insufficient


def test_one_value_has_no_interval_and_no_sample_has_no_mean():
    one = mean_estimate([2.5])
    assert (one.n, one.mean, one.sd, one.interval, one.p_value) == (1, 2.5, None, None, None)
    assert one.insufficient and one.standard_error is None
    assert one.p_above(0.0) is None and one.p_below(0.0) is None
    with pytest.raises(ValueError):
        mean_estimate([])


def test_a_deterministic_quantity_is_a_point_with_p_zero_unless_it_is_zero():
    constant = mean_estimate([2.0, 2.0, 2.0])
    assert constant.sd == 0.0 and (constant.interval.low, constant.interval.high) == (2.0, 2.0)
    assert constant.p_value == 0.0
    zero = mean_estimate([0.0, 0.0])
    assert zero.p_value == 1.0 and (zero.interval.low, zero.interval.high) == (0.0, 0.0)
    # one-sided tests of a deterministic quantity: its bound is met or not, boundaries inclusive
    assert constant.p_above(2.0) == 0.0 and constant.p_above(2.5) == 1.0 and constant.p_above(1.0) == 0.0
    assert constant.p_below(2.0) == 0.0 and constant.p_below(1.5) == 1.0 and constant.p_below(3.0) == 0.0
    assert constant.interval_at(1e-9) == paired_stats.Interval(2.0, 2.0)


def test_nearly_equal_values_are_tested_without_a_warning():
    context = no_warnings()
    try:
        estimate = mean_estimate(NEARLY_EQUAL)
        welch = welch_difference(NEARLY_EQUAL, [0.0, 0.5, 1.0])
    finally:
        context.__exit__(None, None, None)
    assert estimate.p_value < 1e-10 and welch.p_value is not None


@pytest.mark.parametrize("bound", [-0.2, 0.1, 0.6])
def test_one_sided_p_values_are_scipys_t_test_against_the_bound(bound):
    data = [0.3, -0.1, 0.8, 0.45, 0.2]
    estimate = mean_estimate(data)
    greater = scipy.stats.ttest_1samp(data, bound, alternative="greater").pvalue
    less = scipy.stats.ttest_1samp(data, bound, alternative="less").pvalue
    assert estimate.p_above(bound) == pytest.approx(greater, rel=1e-10)
    assert estimate.p_below(bound) == pytest.approx(less, rel=1e-10)


def test_the_interval_at_a_level_puts_that_level_in_each_tail():
    data = [1.0, 2.0, 4.0, 3.5]
    estimate = mean_estimate(data)
    interval = estimate.interval_at(0.05)
    expected = scipy.stats.ttest_1samp(data, 0.0).confidence_interval(0.90)
    assert (interval.low, interval.high) == pytest.approx((expected.low, expected.high), rel=1e-12)
    assert critical_t(0.05, 4) == pytest.approx(scipy.stats.t.ppf(0.95, 3), rel=1e-12)
    assert t_sf(2.0, 3) == pytest.approx(scipy.stats.t.sf(2.0, 3), rel=1e-15)


# -- power -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("sd", "n", "alpha"), [(1.0, 6, 0.025), (0.3, 12, 0.05), (2.0, 3, 0.001)])
def test_the_minimum_detectable_effect_is_where_statsmodels_gives_80_percent_power(sd, n, alpha):
    mde = minimum_detectable_effect(sd, n, alpha)
    expected = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=0.8, alternative="larger")
    assert mde == pytest.approx(expected * sd, rel=1e-6)
    assert TTestPower().power(mde / sd, n, alpha, alternative="larger") == pytest.approx(0.8, abs=1e-9)
    assert minimum_detectable_effect(sd, n, alpha, power=0.5) < mde


def test_no_detectable_effect_without_pairs_or_a_finite_spread_and_zero_without_spread():
    assert minimum_detectable_effect(1.0, 1, 0.025) is None
    assert minimum_detectable_effect(math.inf, 5, 0.025) is None
    assert minimum_detectable_effect(math.nan, 5, 0.025) is None
    assert minimum_detectable_effect(0.0, 2, 0.025) == 0.0
    assert minimum_detectable_effect(1.0, 2, 0.025) > 0


def test_a_large_effect_is_found_when_the_first_bracket_is_too_small():
    """At 2 pairs and a tiny level the effect lies far beyond 1 sd: the search widens its bracket."""
    effect = paired_stats.detectable_effect(2, 1e-4, 0.8)
    assert effect > 2.0
    assert paired_stats.t_power(effect, 2, 1e-4) == pytest.approx(0.8, abs=1e-9)


# -- the sign-flip test ------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 8])
def test_the_smallest_sign_flip_p_is_what_every_pair_on_one_side_gives(n):
    assert smallest_sign_flip_p(n) == pytest.approx(sign_flip_p_value([1.0] * n), rel=1e-12)
    assert smallest_one_sided_sign_flip_p(n) == pytest.approx(sign_flip_p_beyond([1.0] * n, 0.0, +1), rel=1e-12)
    assert smallest_one_sided_sign_flip_p(n) == pytest.approx(sign_flip_p_beyond([-1.0] * n, 0.0, -1), rel=1e-12)


@pytest.mark.parametrize("n", [16, 17])
def test_the_smallest_one_sided_sign_flip_p_follows_the_exact_limit(n):
    """Every pattern up to 16 pairs; beyond, a sample whose resolution is 1 / (samples + 1). (The two-sided
    bound stays the exact test's 2 / 2**n beyond the limit, below what the sample can give.)"""
    assert smallest_one_sided_sign_flip_p(n) == pytest.approx(sign_flip_p_beyond([1.0] * n, 0.0, +1), rel=1e-12)


def test_no_pairs_reach_no_level_and_give_no_sign_flip_p():
    assert smallest_sign_flip_p(0) == 1.0 and smallest_one_sided_sign_flip_p(0) == 1.0
    assert sign_flip_p_value([]) is None and sign_flip_p_beyond([], 0.0, +1) is None
    assert smallest_sign_flip_p(6) == pytest.approx(1 / 32) and smallest_one_sided_sign_flip_p(6) == pytest.approx(1 / 64)
    assert smallest_one_sided_sign_flip_p(16) == 2.0**-16
    assert smallest_one_sided_sign_flip_p(40) == 1 / (paired_stats.PERMUTATION_SAMPLES + 1)


def test_one_pair_flips_against_its_own_negative():
    assert sign_flip_p_value([0.7]) == 1.0
    assert sign_flip_p_beyond([0.7], 0.0, +1) == 0.5
    assert sign_flip_p_beyond([0.7], 1.0, +1) == 1.0  # below the bound: both patterns reach it


def test_beyond_the_exact_limit_the_sign_flip_p_is_a_seeded_sample():
    data = np.random.default_rng(3).normal(0.2, 1.0, size=20)
    first, again = sign_flip_p_value(data), sign_flip_p_value(data)
    expected = scipy.stats.permutation_test(
        (data,), lambda x, axis: np.abs(np.mean(x, axis=axis)), permutation_type="samples", vectorized=True,
        alternative="greater", n_resamples=paired_stats.PERMUTATION_SAMPLES,
        rng=np.random.default_rng(paired_stats.PERMUTATION_SEED)).pvalue
    assert first == again == pytest.approx(expected, rel=1e-12)


# -- paired differences ------------------------------------------------------------------------------

def test_pairs_are_the_finite_values_on_both_sides_in_key_order():
    keys, treated, controlled = pair_values({2: 1.0, 1: 3.0, 3: math.nan, 4: True, 5: 2.0},
                                            {1: 1.0, 2: 0.5, 3: 1.0, 4: 1.0, 6: 1.0, 5: math.inf})
    assert keys == (1, 2)
    assert list(treated) == [3.0, 1.0] and list(controlled) == [1.0, 0.5]
    assert treated.dtype == np.float64


def test_a_paired_difference_reads_per_pair_differences_and_names_the_dropped_pairs():
    treatment = {0: 2.0, 1: 3.0, 2: 5.0, 3: math.nan}
    control = {0: 1.0, 1: 1.5, 2: 2.0, 3: 1.0, 4: 1.0}
    found = paired_difference(treatment, control, confidence=0.9, expected=(0, 1, 2, 3, 4, 5))
    assert found.pair_keys == (0, 1, 2) and found.differences == (1.0, 1.5, 3.0)
    assert found.treatment == (2.0, 3.0, 5.0) and found.control == (1.0, 1.5, 2.0)
    assert found.dropped == (3, 4, 5)
    assert found.n == 3 and found.mean_difference == pytest.approx(11 / 6)
    assert found.estimate.confidence == 0.9
    expected = scipy.stats.ttest_1samp([1.0, 1.5, 3.0], 0.0).confidence_interval(0.9)
    assert (found.interval.low, found.interval.high) == pytest.approx((expected.low, expected.high), rel=1e-12)
    assert found.relative_change == pytest.approx((11 / 6) / (4.5 / 3))
    assert found.treatment_mean == pytest.approx(10 / 3) and found.control_mean == pytest.approx(1.5)
    assert found.sign_flip_p == pytest.approx(sign_flip_p_value([1.0, 1.5, 3.0]))
    assert not found.insufficient
    # a key either side reported that made no pair is dropped, expected or not
    assert paired_difference({0: 1.0, 1: 2.0, 7: 3.0}, {0: 0.0, 1: 0.5, 8: 1.0}, expected=(0, 1)).dropped == (7, 8)


def test_a_relative_change_divides_by_the_size_of_the_control_and_is_none_at_zero():
    negative = paired_difference({0: -1.0, 1: -3.0}, {0: -2.0, 1: -2.0})
    assert negative.relative_change == pytest.approx(0.0)
    shifted = paired_difference({0: -1.0, 1: -1.0}, {0: -2.0, 1: -2.0})
    assert shifted.relative_change == pytest.approx(0.5)  # better by half the control's size, not -0.5
    assert paired_difference({0: 1.0, 1: 2.0}, {0: 1.0, 1: -1.0}).relative_change is None
    assert paired_difference({0: 1.0}, {1: 1.0}) is None
    single = paired_difference({0: 1.0}, {0: 0.5})
    assert single.insufficient and single.interval is None and single.n == 1


def test_t_only_flags_a_t_verdict_the_sign_flip_test_could_reach_but_does_not():
    heavy = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, -1.2]  # t rejects 0 (p 0.034), sign flips do not (0.070)
    found = paired_difference(dict(enumerate(heavy)), dict.fromkeys(range(8), 0.0))
    assert found.estimate.p_value <= 0.05 < found.sign_flip_p
    assert smallest_sign_flip_p(8) <= 0.05
    assert found.t_only
    clean = paired_difference(dict(enumerate([1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98])), dict.fromkeys(range(7), 0.0))
    assert not clean.t_only  # both tests reject
    few = paired_difference(dict(enumerate([1.0, 1.1, 0.9, 1.05, 0.95])), dict.fromkeys(range(5), 0.0))
    assert few.estimate.p_value <= 0.05 and smallest_sign_flip_p(5) > 0.05
    assert not few.t_only  # five pairs cannot reach 5% by sign flips: nothing to disagree with
    noisy = paired_difference(dict(enumerate([1.0, -1.1, 0.9, -1.05, 0.95, 0.2, -0.3])), dict.fromkeys(range(7), 0.0))
    assert noisy.estimate.p_value > 0.05 and not noisy.t_only
    assert not paired_difference({0: 1.0}, {0: 0.0}).t_only


def test_t_only_reads_the_estimates_own_confidence():
    heavy = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, -1.2]
    loose = paired_difference(dict(enumerate(heavy)), dict.fromkeys(range(8), 0.0), confidence=0.9)
    assert loose.estimate.p_value <= 0.1 and loose.sign_flip_p <= 0.1 and not loose.t_only


def test_a_summary_is_the_finite_values_mean_sd_and_t_interval():
    summary = summarize([1.0, math.nan, 3.0, True, 2.0, math.inf], confidence=0.9)
    assert summary.values == (1.0, 3.0, 2.0) and summary.n == 3
    assert summary.mean == pytest.approx(2.0) and summary.sd == pytest.approx(1.0)
    expected = scipy.stats.ttest_1samp([1.0, 3.0, 2.0], 0.0).confidence_interval(0.9)
    assert (summary.interval.low, summary.interval.high) == pytest.approx((expected.low, expected.high), rel=1e-12)
    one = summarize([4.0, math.nan])
    assert one.sd is None and (one.interval.low, one.interval.high) == (4.0, 4.0)
    assert summarize([math.nan, math.inf]) is None and summarize([]) is None


# -- multiplicity ------------------------------------------------------------------------------------

def test_an_empty_family_adjusts_to_nothing_and_one_p_value_stays_itself():
    assert holm_adjust([]) == [] and benjamini_hochberg([]) == []
    assert holm_adjust([0.03]) == [0.03] and benjamini_hochberg([0.03]) == [0.03]
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])


def test_holm_leaves_the_garbage_collector_as_it_found_it():
    import gc
    collect = gc.collect
    holm_adjust([0.01, 0.2])
    assert gc.collect is collect


# -- unpaired samples --------------------------------------------------------------------------------

def test_welch_difference_is_scipys_welch_test_at_its_confidence():
    treated, controlled = [1.0, 2.5, 3.0, 2.0, math.nan], [0.5, 0.7, 0.6, math.inf, 1.4, True]
    found = welch_difference(treated, controlled, confidence=0.9)
    test = scipy.stats.ttest_ind([1.0, 2.5, 3.0, 2.0], [0.5, 0.7, 0.6, 1.4], equal_var=False)
    interval = test.confidence_interval(0.9)
    assert found.treatment == (1.0, 2.5, 3.0, 2.0) and found.control == (0.5, 0.7, 0.6, 1.4)
    assert found.mean_difference == pytest.approx(2.125 - 0.8)
    assert (found.interval.low, found.interval.high) == pytest.approx((interval.low, interval.high), rel=1e-12)
    assert found.p_value == pytest.approx(test.pvalue, rel=1e-12)
    assert found.df == pytest.approx(test.df, rel=1e-12) and found.confidence == 0.9


def test_welch_difference_needs_a_value_on_each_side_and_two_for_an_interval():
    assert welch_difference([], [1.0, 2.0]) is None
    assert welch_difference([1.0, 2.0], [math.nan]) is None
    short = welch_difference([1.0, 2.0, 3.0], [1.0], confidence=0.9)
    assert short.mean_difference == pytest.approx(1.0)
    assert (short.interval, short.p_value, short.df, short.confidence) == (None, None, None, 0.9)
    one_each = welch_difference([2.0], [1.0])
    assert one_each.mean_difference == pytest.approx(1.0) and one_each.interval is None


def test_welch_difference_of_two_constant_samples_is_exact():
    found = welch_difference([3.0, 3.0, 3.0], [1.0, 1.0], confidence=0.9)
    assert found.mean_difference == 2.0 and (found.interval.low, found.interval.high) == (2.0, 2.0)
    assert found.p_value == 0.0 and found.df == 3.0 and found.confidence == 0.9
    same = welch_difference([1.0, 1.0], [1.0, 1.0])
    assert same.p_value == 1.0 and same.mean_difference == 0.0
    # one constant sample is not exact: the other's spread remains
    one_constant = welch_difference([3.0, 3.0, 3.0], [1.0, 2.0, 1.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        test = scipy.stats.ttest_ind([3.0, 3.0, 3.0], [1.0, 2.0, 1.5], equal_var=False)
    assert one_constant.p_value == pytest.approx(test.pvalue, rel=1e-12)
    assert one_constant.interval.low < one_constant.interval.high
    other_constant = welch_difference([1.0, 2.0, 1.5], [3.0, 3.0, 3.0])
    assert other_constant.interval.low < other_constant.interval.high
    assert other_constant.df == pytest.approx(2.0)


# -- sequential designs ------------------------------------------------------------------------------

from harness.analysis.stats.sequential_design import (  # noqa: E402
    Schedule,
    conditional_power,
    fixed_level,
    fixed_seeds_for_power,
    nominal_levels,
    operating_characteristics,
    spent,
)
from harness.analysis.stats.skew_calibration import (  # noqa: E402
    SkewCheck,
    bad_side_draws,
    check_skew_bound,
    set_skewness,
    skew_check,
)

ALPHA = 0.025


@pytest.mark.parametrize("bad", [
    dict(first=0, max_seeds=4), dict(first=3, max_seeds=6, futility_from=1.0),
    dict(first=3, max_seeds=6, futility_from=-0.1), dict(first=3, max_seeds=6, futility_from=True),
    dict(first=3, max_seeds=6, futility_from="0.5"), dict(first=3, max_seeds=6, skew_bound=0.0),
    dict(first=3, max_seeds=6, skew_bound=3.5),
])
def test_a_schedule_refuses_what_it_cannot_run(bad):
    with pytest.raises(ValueError):
        Schedule(**bad)


def test_a_schedule_accepts_its_edges():
    assert Schedule(1, 1).looks == (1,) and not Schedule(1, 1).sequential
    assert Schedule(4, 4).looks == (4,) and Schedule(3, 4).sequential
    assert Schedule(3, 6, batch=1, futility_from=0.0, skew_bound=3.0).looks == (3, 4, 5, 6)
    assert Schedule(3, 6, futility_from=0.99).futility_from == 0.99


def test_futility_may_stop_only_before_the_last_look_and_from_its_share_of_the_seeds():
    schedule = Schedule(3, 12, futility=0.1, futility_from=0.5)
    assert [schedule.may_stop_futile(n) for n in (3, 5, 6, 11, 12)] == [False, False, True, True, False]
    assert not Schedule(3, 12, futility=None).may_stop_futile(6)
    assert Schedule(3, 12).may_stop_futile(3)


def test_a_schedule_says_how_it_stops_for_futility_and_stores_what_it_declares():
    assert Schedule(3, 12, futility=None).futility_phrase() == ""
    assert Schedule(3, 12, futility=0.1).futility_phrase() == "futility below 0.1 conditional power"
    assert Schedule(3, 10, futility=0.2, futility_from=0.25).futility_phrase() == \
        "futility below 0.2 conditional power from 3 seeds"
    assert Schedule(3, 12).describe() == {"first": 3, "max_seeds": 12, "batch": 1, "spending": "obrien_fleming",
                                          "futility": 0.1}
    assert Schedule(2, 9, 3, "pocock", None, 0.5, 1.0).describe() == {
        "first": 2, "max_seeds": 9, "batch": 3, "spending": "pocock", "futility": None, "futility_from": 0.5,
        "skew_bound": 1.0}


def test_a_schedule_is_built_from_the_suites_spec():
    from harness.suite.schema import SequentialSpec
    spec = SequentialSpec(max_seeds=9, batch=2, spending="pocock", futility=0.2, futility_from=0.25, skew_bound=1.5)
    assert Schedule.of(spec, 3) == Schedule(3, 9, 2, "pocock", 0.2, 0.25, 1.5)


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.8])
def test_spending_follows_lan_demets(fraction):
    assert spent(fraction, ALPHA, "pocock") == pytest.approx(ALPHA * math.log(1 + (math.e - 1) * fraction), rel=1e-12)
    obf = 2 * scipy.stats.norm.sf(scipy.stats.norm.isf(ALPHA / 2) / math.sqrt(fraction))
    assert spent(fraction, ALPHA, "obrien_fleming") == pytest.approx(obf, rel=1e-12)
    assert spent(-0.1, ALPHA, "pocock") == 0.0 and spent(1.5, ALPHA, "obrien_fleming") == ALPHA


def test_a_schedules_levels_are_its_spendings_and_bounds():
    schedule = Schedule(3, 6, spending="pocock")
    assert schedule.levels(schedule.looks, ALPHA) == nominal_levels(schedule.looks, ALPHA, "pocock")
    assert Schedule(3, 6).levels((6,), 0.05) == (0.05,)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_under_the_null_the_looks_cross_first_at_the_spent_increments(spending):
    """The nominal levels, read on fresh null paths: the chance of a first crossing by each look is what the
    spending allows by then (within simulation error), and the first look spends its increment exactly."""
    looks = (3, 4, 5, 6)
    levels = nominal_levels(looks, ALPHA, spending)
    assert levels[0] == pytest.approx(spent(3 / 6, ALPHA, spending), rel=1e-12)
    paths = np.random.default_rng(11).standard_normal((200_000, 6))
    crossed = np.zeros(len(paths), dtype=bool)
    for n, level in zip(looks, levels):
        sample = paths[:, :n]
        t = sample.mean(1) / (sample.std(1, ddof=1) / math.sqrt(n))
        crossed |= scipy.stats.t.sf(t, n - 1) <= level
        allowed = spent(n / 6, ALPHA, spending)
        assert crossed.mean() == pytest.approx(allowed, abs=4 * math.sqrt(allowed / len(paths)))


def test_a_look_too_small_to_resolve_uses_its_increment():
    """O'Brien–Fleming leaves almost nothing to the early looks of a long schedule: fewer simulated crossings
    than can be resolved, so those looks test at the increment itself (Bonferroni over looks)."""
    looks = (3, 4, 5, 20)
    levels = nominal_levels(looks, ALPHA)
    previous = 0.0
    for n, level in zip(looks[:3], levels[:3]):
        now = spent(n / 20, ALPHA, "obrien_fleming")
        assert now - previous < sequential_design.MIN_RESOLVED_CROSSINGS / sequential_design.NULL_PATHS
        assert level == pytest.approx(now - previous, rel=1e-12)
        previous = now
    assert levels[3] > levels[2]


def test_conditional_power_is_the_b_value_projection():
    p_now, fraction, final = 0.04, 0.5, 0.02
    z = scipy.stats.norm.isf(p_now)
    drift = z / math.sqrt(fraction)
    expected = scipy.stats.norm.sf((scipy.stats.norm.isf(final) - z * math.sqrt(fraction) - drift * (1 - fraction))
                                   / math.sqrt(1 - fraction))
    assert conditional_power(p_now, fraction, final) == pytest.approx(expected, rel=1e-12)
    assert isinstance(conditional_power(p_now, fraction, final), float)
    many = conditional_power(np.array([0.04, 0.5]), fraction, final)
    assert many.shape == (2,) and many[0] == pytest.approx(expected, rel=1e-12) and many[1] < many[0]
    # at the last look it is whether the level is reached
    assert conditional_power(0.02, 1.0, final) == 1.0 and conditional_power(0.021, 1.0, final) == 0.0
    assert isinstance(conditional_power(0.02, 1.0, final), float)
    assert list(conditional_power(np.array([0.01, 0.5]), 1.2, final)) == [1.0, 0.0]
    # p-values of exactly 0 and 1 stay finite
    assert conditional_power(0.0, 0.5, final) == pytest.approx(1.0)
    assert conditional_power(1.0, 0.5, final) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("effect", [0.5, 1.0, 1.7])
def test_the_seeds_for_power_are_the_fewest_the_t_test_needs(effect):
    seeds = fixed_seeds_for_power(effect, ALPHA, 0.8)
    power = TTestPower()
    assert power.power(effect, seeds, ALPHA, alternative="larger") >= 0.8
    assert seeds == 2 or power.power(effect, seeds - 1, ALPHA, alternative="larger") < 0.8
    assert fixed_seeds_for_power(effect, ALPHA, 0.8, limit=seeds) == seeds
    assert fixed_seeds_for_power(effect, ALPHA, 0.8, limit=seeds - 1) is None
    assert fixed_seeds_for_power(effect, ALPHA, 0.95) > seeds


def test_no_seed_count_finds_no_effect():
    assert fixed_seeds_for_power(0.0, ALPHA) is None and fixed_seeds_for_power(-1.0, ALPHA) is None
    assert fixed_seeds_for_power(0.0, ALPHA, power=0.01) is None  # not even at a power below the level
    assert fixed_seeds_for_power(0.01, ALPHA) is None  # beyond the 1000 seeds a suite may declare
    assert fixed_seeds_for_power(0.0887, ALPHA) == 1000 and fixed_seeds_for_power(0.08865, ALPHA) is None  # 1001


def test_the_planning_power_is_80_percent_and_two_seeds_are_the_fewest():
    assert fixed_seeds_for_power(1.0, ALPHA) == fixed_seeds_for_power(1.0, ALPHA, 0.8) == 10
    assert fixed_seeds_for_power(20.0, ALPHA) == 2  # an effect two seeds find
    assert fixed_level(10, ALPHA) == ALPHA


def test_every_effect_a_few_seeds_find_gets_its_seed_count():
    assert fixed_seeds_for_power(1.22, ALPHA, 0.8) == fixed_seeds_for_power(1.2, ALPHA, 0.8, limit=100)


def test_a_fixed_designs_simulated_power_is_the_t_tests():
    found = operating_characteristics(Schedule(8, 8), 1.0, ALPHA, paths=20_000)
    assert found.effect_in_sd == 1.0 and found.expected_seeds == 8.0
    expected = TTestPower().power(1.0, 8, ALPHA, alternative="larger")
    assert found.power == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / 20_000))
    null = operating_characteristics(Schedule(8, 8), 0.0, ALPHA, paths=20_000)
    assert null.power == pytest.approx(ALPHA, abs=4 * math.sqrt(ALPHA / 20_000))


def test_a_sequential_design_stops_a_clear_effect_early_and_a_null_one_at_futility():
    clear = operating_characteristics(Schedule(3, 12), 2.0, ALPHA, paths=4_000)
    assert clear.power > 0.9 and clear.expected_seeds < 8
    never_futile = operating_characteristics(Schedule(3, 12, futility=None), 0.0, ALPHA, paths=4_000)
    futile = operating_characteristics(Schedule(3, 12), 0.0, ALPHA, paths=4_000)
    assert futile.expected_seeds < never_futile.expected_seeds - 1
    late = operating_characteristics(Schedule(3, 12, futility_from=0.75), 0.0, ALPHA, paths=4_000)
    assert futile.expected_seeds < late.expected_seeds < never_futile.expected_seeds
    # a look at one seed has no t test: the schedule waits for the second
    from_one = operating_characteristics(Schedule(1, 4, futility=None), 3.0, ALPHA, paths=2_000)
    assert from_one.expected_seeds >= 2 and from_one.power > 0.9
    two = operating_characteristics(Schedule(2, 2), 10.0, ALPHA, paths=2_000)  # two seeds have one
    assert two.power == pytest.approx(TTestPower().power(10.0, 2, ALPHA, alternative="larger"), abs=0.04)


def test_a_sequential_design_stops_a_clearly_worse_arm_for_failing():
    worse = operating_characteristics(Schedule(3, 12, futility=None), -2.0, ALPHA, paths=2_000)
    assert worse.power == 0.0 and worse.expected_seeds < 8
    # futility reads both ways: a claim likely to fail is not stopped as hopeless before it does
    failing = operating_characteristics(Schedule(3, 12), -0.7, ALPHA, paths=4_000)
    assert failing.expected_seeds > 5


@pytest.mark.parametrize("effect", [0.0, 0.8, -0.5])
def test_the_simulated_paths_follow_the_rule_the_claims_are_decided_by(effect):
    """Each path is one claim tested alone: at each look from two seeds on, PASS at the look's level, FAIL when
    the opposite test reaches it, FUTILE where the design may stop and neither side's conditional power (to the
    last look's level) reaches the threshold; a path that never stops uses every seed."""
    design = Schedule(3, 8, futility=0.2, futility_from=0.4)
    found = operating_characteristics(design, effect, ALPHA, paths=3_000, seed=5)
    looks, levels = design.looks, nominal_levels(design.looks, ALPHA)
    draws = np.random.default_rng(5).standard_normal((3_000, 8)) + effect
    open_, passed, used = np.ones(3_000, dtype=bool), np.zeros(3_000, dtype=bool), np.full(3_000, 8)
    for k, (n, level) in enumerate(zip(looks, levels)):
        sample = draws[:, :n]
        p = scipy.stats.t.sf(sample.mean(1) / (sample.std(1, ddof=1) / math.sqrt(n)), n - 1)
        decided = (p <= level) | (1 - p <= level)
        hopeless = np.maximum(conditional_power(p, n / 8, levels[-1]), conditional_power(1 - p, n / 8, levels[-1])) < 0.2
        stop = open_ & (decided | (hopeless & (k < len(looks) - 1) & (n >= 0.4 * 8)))
        passed |= open_ & (p <= level)
        used[stop] = n
        open_ &= ~stop
    passed, used = int(passed.sum()), int(used.sum())
    assert found.power == pytest.approx(passed / 3_000, abs=1 / 3_000)  # a path on a boundary's last digit
    assert found.expected_seeds == pytest.approx(used / 3_000, abs=8 / 3_000)


def test_futility_may_stop_a_claim_at_the_look_before_the_last():
    only_look_4 = operating_characteristics(Schedule(3, 5, futility=0.3, futility_from=0.8), 0.0, ALPHA, paths=4_000)
    never = operating_characteristics(Schedule(3, 5, futility=None), 0.0, ALPHA, paths=4_000)
    assert only_look_4.expected_seeds < never.expected_seeds - 0.5


# -- skewness ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bound", [True, "1.0", None, 0, -1.0, 3.01, math.nan])
def test_a_skew_bound_is_a_number_in_its_range(bound):
    with pytest.raises(ValueError):
        check_skew_bound(bound)


def test_a_skew_bound_in_range_reads_as_a_float():
    assert check_skew_bound(3) == 3.0 and isinstance(check_skew_bound(1), float)
    assert check_skew_bound(0.01) == 0.01


@pytest.mark.parametrize("skew", [0.5, 1.0, 2.0])
def test_bad_side_draws_are_standardized_with_the_skewness_on_the_errors_side(skew):
    draws = bad_side_draws(np.random.default_rng(5), (400_000, 1), skew).ravel()
    assert draws.mean() == pytest.approx(0.0, abs=0.01)
    assert draws.std() == pytest.approx(1.0, abs=0.01)
    assert scipy.stats.skew(draws) == pytest.approx(-skew, rel=0.1)
    assert bad_side_draws(np.random.default_rng(5), (3, 4), skew).shape == (3, 4)


def test_a_sets_skewness_is_scipys_bias_corrected_g1_of_its_finite_values():
    values = [0.1, 0.4, 2.5, 0.3, math.nan, 0.2]
    assert set_skewness(values) == pytest.approx(scipy.stats.skew([0.1, 0.4, 2.5, 0.3, 0.2], bias=False), rel=1e-12)
    assert set_skewness([1.0, 2.0, math.inf]) is None  # two finite values
    assert set_skewness([1.0, 2.0, 4.0]) == pytest.approx(scipy.stats.skew([1.0, 2.0, 4.0], bias=False))
    assert set_skewness([2.0, 2.0, 2.0, 2.0]) is None


def test_the_pooled_skewness_is_the_mean_abs_g1_against_the_same_sizes_at_the_bound():
    sets = [[0.1, 0.4, 2.5, 0.3, 0.2], [1.0, -3.0, 1.2, 0.9], [1.0, 1.0, 1.0], [2.0, 3.0]]
    check = skew_check(sets, 1.0)
    g = [scipy.stats.skew(s, bias=False) for s in sets[:2]]
    assert check.sets == 2 and check.bound == 1.0
    assert check.pooled == pytest.approx(np.mean(np.abs(g)), rel=1e-12)
    expected = np.mean([skew_calibration.expected_abs_skewness(5, 1.0), skew_calibration.expected_abs_skewness(4, 1.0)])
    assert check.at_bound == pytest.approx(expected, rel=1e-12)
    assert check.exceeds == (check.pooled > check.at_bound)
    with pytest.raises(ValueError):
        skew_check(sets, 4.0)
    assert skew_check([[1.0, 1.0, 1.0]], 1.0) == SkewCheck(None, None, 1.0, 0)


def test_a_skew_check_reads_as_a_sentence():
    within = SkewCheck(0.5, 0.77, 1.0, 3)
    assert not within.exceeds
    assert within.text() == ("pooled skewness: mean |G1| 0.500 over 3 sets of per-seed differences (0.770 at "
                             "skewness 1): within the declared bound")
    beyond = SkewCheck(0.9, 0.77, 1.5, 2)
    assert beyond.exceeds and beyond.text().endswith("(0.770 at skewness 1.5): exceeds the declared bound")
    assert not SkewCheck(0.77, 0.77, 1.0, 1).exceeds
    assert SkewCheck(None, None, 1.0, 0).text() == \
        "pooled skewness not measurable (no set of 3 differences with a spread)"
    assert not SkewCheck(None, None, 1.0, 0).exceeds and not SkewCheck(0.9, None, 1.0, 1).exceeds


# -- claim tests -------------------------------------------------------------------------------------

from harness.analysis.claim_status import FAIL, INCONCLUSIVE, PASS, SHORT  # noqa: E402
from harness.analysis.claim_tests import claim_test  # noqa: E402
from harness.analysis.claim_tests.contract import register  # noqa: E402
from harness.analysis.claim_tests.bounds import either_side, p_better, p_strict, p_worse  # noqa: E402
from harness.core.metrics import Metric  # noqa: E402
from harness.suite.schema import ClaimSpec  # noqa: E402

DIFFS = [0.30, 0.12, 0.45, 0.26, 0.18, 0.38]  # six per-seed differences, mean 0.2817


def spec(test: str, **fields) -> ClaimSpec:
    return ClaimSpec(contrast="treat-vs-control", metric="acc", test=test, **fields)


def t_greater(values, bound):
    return scipy.stats.ttest_1samp(values, bound, alternative="greater").pvalue


def t_less(values, bound):
    return scipy.stats.ttest_1samp(values, bound, alternative="less").pvalue


@pytest.mark.parametrize("sign", [+1, -1])
@pytest.mark.parametrize("margin", [0.0, 0.1, 0.5])
def test_superiority_is_the_one_sided_t_test_beyond_the_margin_on_the_better_side(sign, margin):
    values = [sign * d for d in DIFFS]  # lower is better when sign is -1: the gain is a fall
    outcome = claim_test("superior").decide(spec("superior", margin=margin), mean_estimate(values), values, sign, margin)
    assert outcome.status == INCONCLUSIVE
    assert outcome.detail == f"one-sided t vs {margin:.4g} (better side)"
    better, worse = (t_greater, t_less) if sign > 0 else (t_less, t_greater)
    assert outcome.p_value == pytest.approx(better(values, sign * margin), rel=1e-10)
    assert outcome.p_fail == pytest.approx(worse(values, sign * margin), rel=1e-10)
    assert outcome.p_flip == pytest.approx(sign_flip_p_beyond(values, sign * margin, sign), rel=1e-12)
    assert outcome.p_flip_fail == pytest.approx(sign_flip_p_beyond(values, sign * margin, -sign), rel=1e-12)


@pytest.mark.parametrize("sign", [+1, -1])
def test_non_inferiority_is_the_one_sided_t_test_beyond_the_margin_on_the_worse_side(sign):
    values = [sign * (d - 0.35) for d in DIFFS]  # a little worse than the control, within 0.2
    outcome = claim_test("non_inferior").decide(spec("non_inferior", margin=0.2, reference="r"),
                                                mean_estimate(values), values, sign, 0.2)
    assert outcome.status == INCONCLUSIVE and outcome.detail == "one-sided t vs -0.2 (worse side)"
    better, worse = (t_greater, t_less) if sign > 0 else (t_less, t_greater)
    assert outcome.p_value == pytest.approx(better(values, -sign * 0.2), rel=1e-10)
    assert outcome.p_fail == pytest.approx(worse(values, -sign * 0.2), rel=1e-10)
    assert outcome.p_flip == pytest.approx(sign_flip_p_beyond(values, -sign * 0.2, sign), rel=1e-12)


@pytest.mark.parametrize("sign", [+1, -1])
def test_a_deterministic_tie_at_the_bound_fails_superiority_and_passes_non_inferiority(sign):
    at_margin = [sign * 0.5] * 4
    superior = claim_test("superior").decide(spec("superior", margin=0.5), mean_estimate(at_margin), at_margin,
                                             sign, 0.5)
    assert (superior.p_value, superior.p_fail) == (1.0, 0.0)  # strict: a tie is not beyond, so it fails
    at_worse = [-sign * 0.5] * 4
    non_inferior = claim_test("non_inferior").decide(spec("non_inferior", margin=0.5, reference="r"),
                                                     mean_estimate(at_worse), at_worse, sign, 0.5)
    assert (non_inferior.p_value, non_inferior.p_fail) == (0.0, 1.0)  # inclusive: a tie is within, it passes
    beyond = [sign * 0.6] * 4
    clear = claim_test("superior").decide(spec("superior", margin=0.5), mean_estimate(beyond), beyond, sign, 0.5)
    assert (clear.p_value, clear.p_fail) == (0.0, 1.0)


def test_the_bounds_read_a_deterministic_tie_the_way_the_claims_boundary_does():
    tie = mean_estimate([0.5, 0.5, 0.5])
    assert p_better(tie, +1, 0.5) == 0.0 and p_better(tie, +1, 0.5, inclusive=False) == 1.0
    assert p_better(tie, -1, -0.5) == 0.0 and p_better(tie, -1, -0.5, inclusive=False) == 1.0
    assert p_worse(tie, +1, 0.5) == 1.0 and p_worse(tie, +1, 0.5, inclusive=True) == 0.0
    assert p_worse(tie, -1, -0.5) == 1.0 and p_worse(tie, -1, -0.5, inclusive=True) == 0.0
    assert p_strict(tie, 0.4, +1) == 0.0 and p_strict(tie, 0.6, +1) == 1.0
    assert p_strict(tie, 0.6, -1) == 0.0 and p_strict(tie, 0.4, -1) == 1.0
    spread = mean_estimate(DIFFS)
    assert p_strict(spread, 0.2, +1) == pytest.approx(t_greater(DIFFS, 0.2), rel=1e-10)
    assert p_strict(spread, 0.2, -1) == pytest.approx(t_less(DIFFS, 0.2), rel=1e-10)
    assert p_worse(spread, -1, 0.2, inclusive=True) == pytest.approx(t_greater(DIFFS, -0.2), rel=1e-10)
    assert either_side(0.2, 0.01) == 0.02 and either_side(0.01, 0.3) == 0.02 and either_side(0.7, 0.6) == 1.0


def test_equivalence_is_two_one_sided_tests_within_the_margin():
    values = [0.02, -0.03, 0.01, 0.04, -0.01, 0.0]
    outcome = claim_test("equivalent").decide(spec("equivalent", margin=0.1, reference="r"),
                                              mean_estimate(values), values, 1, 0.1)
    assert outcome.status == INCONCLUSIVE and outcome.detail == "two one-sided t tests vs +-0.1"
    assert outcome.p_value == pytest.approx(max(t_greater(values, -0.1), t_less(values, 0.1)), rel=1e-10)
    assert outcome.p_fail == pytest.approx(min(1.0, 2 * min(t_greater(values, 0.1), t_less(values, -0.1))), rel=1e-10)
    outside = [v + 0.5 for v in values]
    far = claim_test("equivalent").decide(spec("equivalent", margin=0.1, reference="r"),
                                          mean_estimate(outside), outside, 1, 0.1)
    assert far.p_value > 0.5 and far.p_fail == pytest.approx(2 * t_greater(outside, 0.1), rel=1e-10)
    below = [v - 0.5 for v in values]
    low = claim_test("equivalent").decide(spec("equivalent", margin=0.1, reference="r"),
                                          mean_estimate(below), below, 1, 0.1)
    assert low.p_fail == pytest.approx(2 * t_less(below, -0.1), rel=1e-10)


def test_a_ratio_claim_tests_the_mean_ratio_against_each_declared_bound():
    ratios = [0.97, 1.01, 0.99, 1.02, 0.98]
    both = claim_test("ratio").decide(spec("ratio", min=0.9, max=1.1), mean_estimate(ratios), ratios, 0, 0.0)
    assert both.status == INCONCLUSIVE and both.detail == "one-sided t of the mean treatment/control ratio vs its bounds"
    assert both.p_value == pytest.approx(max(t_greater(ratios, 0.9), t_less(ratios, 1.1)), rel=1e-10)
    assert both.p_fail == pytest.approx(min(1.0, 2 * min(t_greater(ratios, 1.1), t_less(ratios, 0.9))), rel=1e-10)
    floor = claim_test("ratio").decide(spec("ratio", min=0.995), mean_estimate(ratios), ratios, 0, 0.0)
    assert floor.p_value == pytest.approx(t_greater(ratios, 0.995), rel=1e-10)
    assert floor.p_fail == pytest.approx(t_less(ratios, 0.995), rel=1e-10)  # one bound: no Bonferroni
    ceiling = claim_test("ratio").decide(spec("ratio", max=0.995), mean_estimate(ratios), ratios, 0, 0.0)
    assert ceiling.p_value == pytest.approx(t_less(ratios, 0.995), rel=1e-10)
    assert ceiling.p_fail == pytest.approx(t_greater(ratios, 0.995), rel=1e-10)


def test_equal_passes_only_when_every_pair_is_identical():
    equal = claim_test("equal")
    estimate = mean_estimate([0.0, 0.0])
    same = equal.decide(spec("equal"), estimate, [0.0, 0.0, 0.0], 0, 0.0)
    assert (same.status, same.detail) == (PASS, "every paired difference is 0")
    differ = equal.decide(spec("equal"), estimate, [0.0, 1e-12, 0.0], 0, 0.0)
    assert (differ.status, differ.detail) == (FAIL, "paired differences are not all 0")
    assert equal.decide(spec("equal"), estimate, [0.0, -2.0], 0, 0.0).status == FAIL
    assert not equal.favours_an_arm() and claim_test("superior").favours_an_arm()


def test_each_claim_reads_as_its_test_and_margin():
    assert claim_test("superior").statement(spec("superior")) == "superior"
    assert claim_test("superior").statement(spec("superior", margin=0.5)) == "superior (by more than 0.5)"
    assert claim_test("non_inferior").statement(spec("non_inferior", margin=0.01, reference="r")) == \
        "non_inferior (margin 0.01)"
    assert claim_test("non_inferior").statement(spec("non_inferior", relative_margin=0.5, reference="base")) == \
        "non_inferior (margin 0.5 x base)"
    assert claim_test("equivalent").statement(spec("equivalent", margin=2.0, reference="r")) == "equivalent (margin 2)"
    assert claim_test("ratio").statement(spec("ratio", min=0.9)) == "ratio in [0.9, -]"
    assert claim_test("ratio").statement(spec("ratio", max=1.25)) == "ratio in [-, 1.25]"
    assert claim_test("equal").statement(spec("equal")) == "equal"


def test_which_way_names_where_a_decided_interval_lies():
    superior, non_inferior = claim_test("superior"), claim_test("non_inferior")
    with_margin = spec("superior", margin=0.5)
    assert superior.which_way(with_margin, FAIL, 0.1, 0.4) == (SHORT, "better, by less than 0.5")
    assert superior.which_way(with_margin, FAIL, -0.2, 0.0) == (FAIL, "not better")
    assert superior.which_way(with_margin, FAIL, 0.0, 0.3) == (FAIL, "short of 0.5, not shown better than 0")
    assert superior.which_way(with_margin, FAIL, -0.1, 0.3) == (FAIL, "short of 0.5, not shown better than 0")
    assert superior.which_way(spec("superior"), FAIL, 0.1, 0.4) == (FAIL, "short of 0, not shown better than 0")
    assert superior.which_way(with_margin, PASS, 0.6, 0.9) == (PASS, "")
    ni = spec("non_inferior", margin=0.2, reference="r")
    assert non_inferior.which_way(ni, PASS, 0.01, 0.3) == (PASS, "superior too")
    assert non_inferior.which_way(ni, PASS, 0.0, 0.3) == (PASS, "")
    assert non_inferior.which_way(ni, FAIL, -0.5, -0.3) == (FAIL, "worse by more than the margin")
    assert non_inferior.which_way(ni, INCONCLUSIVE, 0.1, 0.3) == (INCONCLUSIVE, "")
    assert claim_test("equivalent").which_way(spec("equivalent", margin=1.0, reference="r"), PASS, 0.1, 0.2) == (PASS, "")


def test_each_claim_marks_its_bounds_in_the_estimates_units():
    assert claim_test("superior").plot_marks(spec("superior", margin=0.5), -1, 0.5) == (-0.5,)
    assert claim_test("superior").plot_marks(spec("superior"), 1, None) == ()
    assert claim_test("superior").decision_bounds(spec("superior", margin=0.5), -1, 0.5) == (-0.5, 0.0)
    assert claim_test("superior").decision_bounds(spec("superior"), 1, 0.0) == (0.0,)
    ni = spec("non_inferior", margin=0.2, reference="r")
    assert claim_test("non_inferior").plot_marks(ni, 1, 0.2) == (-0.2,)
    assert claim_test("non_inferior").plot_marks(ni, -1, 0.2) == (0.2,)
    assert claim_test("non_inferior").plot_marks(ni, 1, None) == ()
    assert claim_test("non_inferior").decision_bounds(ni, -1, 0.2) == (0.2, 0.0)
    assert claim_test("non_inferior").decision_bounds(ni, 1, 0.0) == (-0.0,)
    eq = spec("equivalent", margin=0.3, reference="r")
    assert claim_test("equivalent").plot_marks(eq, 1, 0.3) == (-0.3, 0.3)
    assert claim_test("equivalent").plot_marks(eq, 1, None) == ()
    assert claim_test("equivalent").decision_bounds(eq, 1, 0.3) == (-0.3, 0.3)
    assert claim_test("ratio").plot_marks(spec("ratio", min=0.9, max=1.1), 1, None) == (0.9, 1.1)
    assert claim_test("ratio").decision_bounds(spec("ratio", max=1.1), 1, 0.0) == (1.1,)
    assert claim_test("equal").plot_marks(spec("equal"), 1, None) == ()
    assert claim_test("equal").decision_bounds(spec("equal"), 1, 0.0) == ()


def test_claims_fall_into_families_by_kind_and_direction():
    def metric(direction, kind):
        return Metric(name="m", direction=direction, unit="", kind=kind)
    superior, ratio, equal = claim_test("superior"), claim_test("ratio"), claim_test("equal")
    assert superior.in_holm_family(metric("higher", "quality")) and superior.in_holm_family(metric("lower", "speed"))
    assert not superior.in_holm_family(metric("none", "quality"))  # no direction: it cannot be tested
    assert ratio.in_holm_family(metric("none", "memory"))  # a test that needs no direction
    assert not equal.in_holm_family(metric("higher", "memory"))  # exact: no sampling error
    assert superior.family(metric("lower", "speed")) == "timing"
    assert superior.family(metric("higher", "quality")) == superior.family(metric("lower", "memory")) == "quality"


def test_what_a_claim_could_have_found_and_the_effect_a_pilot_shows():
    estimate = mean_estimate(DIFFS)
    base = minimum_detectable_effect(estimate.sd, 6, 0.025)
    assert claim_test("non_inferior").mde(spec("non_inferior", margin=0.2, reference="r"), estimate, 0.025) == \
        pytest.approx(base, rel=1e-12)
    assert claim_test("superior").mde(spec("superior", margin=0.1), estimate, 0.025) == pytest.approx(0.1 + base)
    assert claim_test("superior").mde(spec("superior"), estimate, 0.025) == pytest.approx(base)
    assert claim_test("superior").mde(spec("superior"), mean_estimate([1.0, 1.0]), 0.025) == 0.0
    test = claim_test("superior")
    assert test.effect_in_sd(0.01, 6) == pytest.approx(scipy.stats.t.isf(0.01, 5) / math.sqrt(6), rel=1e-12)
    assert test.effect_in_sd(None, 6) is None and test.effect_in_sd(0.01, 1) is None
    assert test.effect_in_sd(0.5, 2) == pytest.approx(0.0, abs=1e-12)
    assert test.effect_in_sd(1e-12, 4) > 100 and test.effect_in_sd(1e-12, 4) > test.effect_in_sd(1e-6, 4)
    assert math.isfinite(test.effect_in_sd(1.0, 4)) and test.effect_in_sd(1.0, 4) < -10


def test_a_pilot_that_surely_passes_shows_a_large_effect():
    effect = claim_test("superior").effect_in_sd(0.0, 4)
    assert math.isfinite(effect) and effect > 10


def test_a_claim_test_registers_once_and_only_with_a_row_in_the_needs_table():
    class Unknown:
        name = "no_such_test"

    with pytest.raises(TypeError, match="no row"):
        register(Unknown)

    class Again:
        name = "superior"

    with pytest.raises(TypeError, match="defined twice"):
        register(Again)
    assert claim_test("superior").name == "superior"


def test_registering_a_test_makes_its_name_stand_for_one_instance_of_it(monkeypatch):
    from harness.analysis.claim_tests import contract
    equal_class = type(claim_test("equal"))
    monkeypatch.delitem(contract.REGISTERED, "equal")
    assert register(equal_class) is equal_class
    assert type(claim_test("equal")) is equal_class and claim_test("equal") is claim_test("equal")


# -- the looks a run takes, fairness and what a sequential design saved ------------------------------

from pathlib import Path  # noqa: E402

from records import make_record  # noqa: E402

from harness.analysis.decide.design_cost import DesignCost, design_cost  # noqa: E402
from harness.analysis.decide.fairness import UnequalBudget, unequal_budgets  # noqa: E402
from harness.analysis.decide.looks import (  # noqa: E402
    Futility,
    claim_alpha,
    looks_taken,
    power_by_last_look,
    run_design,
    spent_level,
    stored_schedule,
)
from harness.analysis.run_results import index_results  # noqa: E402
from harness.suite.schema import SEQUENTIAL  # noqa: E402
from harness.suite.stored import StoredSuite, StoredSuiteError  # noqa: E402

RUN_METRICS = {"score": {"direction": "higher", "unit": "", "kind": "quality"},
               "budget/steps": {"direction": "none", "unit": "steps", "kind": "info"},
               "budget/tokens": {"direction": "none", "unit": "tokens", "kind": "info"}}


def run_of(treat: list[float], control: list[float] | None = None, sequential: dict | None = None,
           confidence: float | None = None, wall_seconds: float = 2.0, extra: dict | None = None):
    """A two-arm run of len(treat) seeds, its claim a superiority on ``score``."""
    control = control or [0.0] * len(treat)
    seeds = list(range(len(treat)))
    trials = [make_record(f"{arm}-{s}", arm, s, wall_seconds=wall_seconds,
                          metrics={"score": values[s], **((extra or {}).get(arm, {}).get(s, {}))})
              for arm, values in (("treat", treat), ("control", control)) for s in seeds]
    meta = {"suite": "core", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": RUN_METRICS,
            "arms": {"treat": {"labels": ["treat"]}, "control": {"labels": ["control"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [{"contrast": "treat-vs-control", "metric": "score", "test": "superior"}],
            "sequential": sequential, "premises": []}
    if confidence is not None:
        meta["confidence"] = confidence
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_a_claim_is_read_at_half_the_two_sided_tail():
    assert claim_alpha(0.95) == pytest.approx(0.025) and claim_alpha(0.9) == pytest.approx(0.05)


def test_a_stored_schedule_is_read_by_the_suites_reader_or_fixed_at_the_seeds():
    assert stored_schedule(None, 5) == Schedule(5, 5) and stored_schedule(None, 0) == Schedule(1, 1)
    stored = {"first": 3, "max_seeds": 9, "batch": 2, "spending": "pocock", "futility": 0.2, "futility_from": 0.25}
    assert stored_schedule(SEQUENTIAL.read(stored, "sequential"), 5) == Schedule(3, 9, 2, "pocock", 0.2, 0.25)
    with pytest.raises(ValueError, match="sequential: not a sequential design harness writes"):
        SEQUENTIAL.read({"first": 12, "max_seeds": 9}, "sequential")


def test_a_run_whose_design_is_unreadable_is_refused_where_its_suite_is_read():
    with pytest.raises(StoredSuiteError, match="^sequential: not a sequential design harness writes"):
        run_of([1.0, 2.0, 3.0], sequential={"first": "three", "max_seeds": 9})  # a received suite.json's


def test_the_looks_taken_are_the_schedules_looks_the_seeds_reach():
    sequential = {"first": 3, "max_seeds": 9, "batch": 2, "spending": "obrien_fleming", "futility": 0.1}
    five = run_of([1.0] * 5, sequential=sequential)
    assert run_design(five) == Schedule(3, 9, 2) and looks_taken(five, run_design(five)) == (3, 5)
    two = run_of([1.0] * 2, sequential=sequential)
    assert looks_taken(two, run_design(two)) == (2,)  # short of the first look: the seeds it has
    fixed = run_of([1.0] * 4)
    assert run_design(fixed) == Schedule(4, 4) and looks_taken(fixed, run_design(fixed)) == (4,)


def test_the_level_of_the_latest_look_is_its_spent_level():
    fixed = run_of([1.0, 2.0, 1.5, 1.8], confidence=0.9)
    assert spent_level(fixed) == pytest.approx(0.05)
    sequential = {"first": 3, "max_seeds": 6, "batch": 1, "spending": "pocock", "futility": 0.1}
    looks = (3, 4, 5, 6)
    for seeds in (3, 4, 6):
        run = run_of([1.0] * seeds, sequential=sequential)
        assert spent_level(run) == nominal_levels(looks, claim_alpha(0.95), "pocock")[looks.index(seeds)]


def test_futility_is_the_conditional_power_to_reach_the_last_looks_level():
    sequential = {"first": 3, "max_seeds": 6, "batch": 1, "spending": "pocock", "futility": 0.2,
                  "futility_from": 0.5}
    run = run_of([1.0] * 4, sequential=sequential)
    found = power_by_last_look(run, 0.3)
    final = nominal_levels((3, 4, 5, 6), claim_alpha(0.95), "pocock")[-1]
    assert found == Futility(pytest.approx(conditional_power(0.3, 4 / 6, final)), 0.2, 6)
    assert found.futile == (found.power < 0.2)
    assert Futility(0.1, 0.2, 6).futile and not Futility(0.2, 0.2, 6).futile
    assert power_by_last_look(run_of([1.0] * 2, sequential=sequential), 0.3) is None  # before futility_from
    assert power_by_last_look(run_of([1.0] * 6, sequential=sequential), 0.3) is None  # the last look
    assert power_by_last_look(run_of([1.0] * 4), 0.3) is None  # a fixed design
    never = dict(sequential, futility=None)
    assert power_by_last_look(run_of([1.0] * 4, sequential=never), 0.3) is None
    zero = power_by_last_look(run_of([1.0] * 4, sequential=dict(sequential, futility=0.0)), 0.9)
    assert zero.threshold == 0.0 and not zero.futile  # a threshold of 0 never stops a claim


def budgets(treat: list[float], control: list[float], key: str = "budget/steps"):
    extra = {arm: {s: {key: values[s]} for s in range(len(values))} for arm, values in
             (("treat", treat), ("control", control))}
    return run_of([1.0] * len(treat), extra=extra)


def test_unequal_budgets_name_the_seeds_whose_arms_differ():
    (flag,) = unequal_budgets(budgets([900.0, 700.0, 800.0, 0.0], [900.0, 900.0, 800.0, 900.0], "budget/tokens"))
    assert flag.key == "budget/tokens" and flag.point == ""
    assert flag.seeds == (1,) and flag.of_seeds == 3  # seed 3's untrained arm (0) is not compared
    assert dict(flag.example) == {"treat": 700.0, "control": 900.0}
    assert flag.text() == "unequal budget/tokens within 1 of 3 seed(s) (seed 1: treat 700, control 900)"
    assert unequal_budgets(budgets([900.0, 900.0], [900.0, 900.0])) == []
    at_point = UnequalBudget("budget/steps", "n=4", (2, 5), 6, {"a": 1.5, "b": 2.0})
    assert at_point.text() == "unequal budget/steps at n=4 within 2 of 6 seed(s) (seed 2: a 1.5, b 2)"


def test_a_fixed_design_saves_nothing_and_a_sequential_one_counts_its_seeds_and_time():
    from harness.analysis.decide.claims import evaluate_claims
    fixed = run_of([1.0, 1.2, 0.9])
    assert design_cost(fixed, evaluate_claims(fixed)) is None
    sequential = {"first": 3, "max_seeds": 12, "batch": 3, "spending": "obrien_fleming", "futility": 0.1}
    run = run_of([0.5, 1.9, -0.2, 1.4, 0.1, 1.6], sequential=sequential, wall_seconds=2.5)
    claims = evaluate_claims(run)
    cost = design_cost(run, claims)
    assert (cost.design, cost.seeds_used, cost.looks, cost.trial_seconds) == (Schedule(3, 12, 3), 6, 2, 30.0)
    # the fixed design with the power the sequential one has at the observed effect (|mean| / sd)
    effect = abs(claims[0].mean_estimate.mean) / claims[0].mean_estimate.sd
    power = operating_characteristics(Schedule(3, 12, 3), effect, claim_alpha(0.95), paths=4000).power
    assert cost.fixed_seeds == fixed_seeds_for_power(effect, claim_alpha(0.95), power) == 10
    lower = run_of([-v for v in [0.5, 1.9, -0.2, 1.4, 0.1, 1.6]], sequential=sequential)
    assert design_cost(lower, evaluate_claims(lower)).fixed_seeds == 10  # the size of the effect, either way
    constant = run_of([1.0] * 6, sequential=sequential)
    assert design_cost(constant, evaluate_claims(constant)).fixed_seeds is None  # no spread: no power to match
    unpaired = run_of([math.nan] * 3, sequential=sequential)
    assert design_cost(unpaired, evaluate_claims(unpaired)).fixed_seeds is None  # no pairs: no effect


def test_the_fixed_design_matches_the_power_at_the_effect_in_units_of_its_spread():
    sequential = {"first": 3, "max_seeds": 12, "batch": 3, "spending": "obrien_fleming", "futility": 0.1}
    values = [0.2, 1.5, -0.4, 1.1, 0.0, 1.3]  # effect 0.79 sd: the design's power there is about 0.6
    run = run_of(values, sequential=sequential)
    claim = evaluate_claims_of(run)[0]
    effect = abs(claim.mean_estimate.mean) / claim.mean_estimate.sd
    power = operating_characteristics(Schedule(3, 12, 3), effect, claim.level, paths=4000).power
    assert 0.5 < power < 0.7
    assert design_cost(run, [claim]).fixed_seeds == fixed_seeds_for_power(effect, claim.level, power) == 10
    scaled = run_of([10 * v for v in values], sequential=sequential)  # the same effect in other units
    assert design_cost(scaled, evaluate_claims_of(scaled)).fixed_seeds == 10


def test_the_fixed_design_of_a_skew_bounded_run_is_calibrated_too(few_calibration_paths):
    sequential = {"first": 3, "max_seeds": 6, "batch": 3, "spending": "obrien_fleming", "futility": 0.1,
                  "skew_bound": 1.0}
    run = run_of([0.2, 1.5, -0.4, 1.1, 0.0, 1.3], sequential=sequential)
    claim = evaluate_claims_of(run)[0]
    effect = abs(claim.mean_estimate.mean) / claim.mean_estimate.sd
    design = Schedule(3, 6, 3, skew_bound=1.0)
    power = operating_characteristics(design, effect, claim.level, paths=4000).power
    calibrated = fixed_seeds_for_power(effect, claim.level, power, skew_bound=1.0)
    assert calibrated > fixed_seeds_for_power(effect, claim.level, power)
    assert design_cost(run, [claim]).fixed_seeds == calibrated


def evaluate_claims_of(run):
    from harness.analysis.decide.claims import evaluate_claims
    return evaluate_claims(run)
    assert cost.fixed_trial_seconds == pytest.approx(30.0 / 6 * cost.fixed_seeds)


def test_a_design_cost_reads_as_one_line():
    design = Schedule(3, 12, 3, "pocock", 0.1, 0.5)
    saved = DesignCost(design, 6, 2, 10, 30.0)
    assert saved.fixed_trial_seconds == pytest.approx(50.0)
    assert saved.line() == ("group-sequential design (pocock spending, looks at 3, 6, 9, 12 seeds, futility below 0.1 "
                            "conditional power from 6 seeds): used 6 of 12 seeds in 2 look(s), 30 s of trials; the "
                            "fixed design with the same power at the observed effects needs 10 seeds (~50 s)")
    unknown = DesignCost(Schedule(3, 6, futility=None), 3, 1, None, 12.4)
    assert unknown.fixed_trial_seconds is None
    assert unknown.line() == ("group-sequential design (obrien_fleming spending, looks at 3, 4, 5, 6 seeds): used 3 of 6 "
                              "seeds in 1 look(s), 12 s of trials")
    assert DesignCost(design, 0, 0, 10, 0.0).fixed_trial_seconds is None


# -- the skewness calibration, on its own paths ------------------------------------------------------

CALIBRATION_PATHS = 20_000


@pytest.fixture
def few_calibration_paths(monkeypatch):
    """The calibration on 20,000 paths (seconds, not minutes); the caches that hold its results are emptied
    before and after, so no other test reads levels calibrated on fewer paths."""
    skew_calibration._bad_side_t.cache_clear()
    nominal_levels.cache_clear()
    monkeypatch.setattr(skew_calibration, "CALIBRATION_PATHS", CALIBRATION_PATHS)
    yield
    skew_calibration._bad_side_t.cache_clear()
    nominal_levels.cache_clear()


def bad_side_t(width: int, skew: float) -> dict[int, np.ndarray]:
    """The t statistic of every seeded bad-side path at each seed count, drawn in one call (the calibration
    draws the same numbers in blocks) and computed from running sums as the calibration computes it."""
    draws = bad_side_draws(np.random.default_rng(skew_calibration.CALIBRATION_SEED), (CALIBRATION_PATHS, width), skew)
    sums, squares = np.cumsum(draws, axis=1), np.cumsum(draws * draws, axis=1)
    out = {}
    for n in range(2, width + 1):
        mean = sums[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            out[n] = np.where(sd > 0, mean * math.sqrt(n) / sd, -np.inf)
    return out


@pytest.mark.parametrize(("looks", "spending"), [((3, 4, 5, 6), "pocock"), ((3, 4, 5, 6), "obrien_fleming"),
                                                  ((2, 3, 4), "obrien_fleming")])
def test_calibrated_values_let_exactly_the_inflated_spending_of_bad_side_paths_cross(few_calibration_paths, looks,
                                                                                      spending):
    """By each look, exactly floor(INFLATION x spent x paths) of the bad-side paths have crossed where that
    many can be resolved; a look with fewer to spend than that lets none cross (beyond every path)."""
    normal = nominal_levels(looks, ALPHA, spending)
    floors = tuple(float(scipy.stats.t.isf(level, n - 1)) for n, level in zip(looks, normal))
    spent_by = tuple(spent(n / looks[-1], ALPHA, spending) for n in looks)
    critical = skew_calibration.calibrated_critical_values(looks, spent_by, floors, 1.0)
    statistics = bad_side_t(looks[-1], 1.0)
    alive, crossed = np.ones(CALIBRATION_PATHS, dtype=bool), 0
    for k, n in enumerate(looks):
        assert critical[k] >= floors[k]
        allowed = math.floor(skew_calibration.INFLATION * spent_by[k] * CALIBRATION_PATHS)
        crossing = alive & (statistics[n] >= critical[k])
        if allowed - crossed >= skew_calibration.MIN_RESOLVED_CROSSINGS:
            assert crossed + int(crossing.sum()) == allowed
        else:
            assert not crossing.any()
        crossed += int(crossing.sum())
        alive &= ~crossing


def test_a_look_with_exactly_the_resolvable_crossings_to_spend_is_resolved(few_calibration_paths):
    alpha = 50.5 / (skew_calibration.INFLATION * CALIBRATION_PATHS)  # 50 crossings allowed, no more
    floor = float(scipy.stats.t.isf(alpha, 5))
    (critical,) = skew_calibration.calibrated_critical_values((6,), (alpha,), (floor,), 1.0)
    assert int((bad_side_t(6, 1.0)[6] >= critical).sum()) == skew_calibration.MIN_RESOLVED_CROSSINGS


def test_the_calibration_gives_the_same_values_in_any_blocking(few_calibration_paths, monkeypatch):
    looks = (3, 4, 5, 6, 8)
    floors = tuple(float(scipy.stats.t.isf(level, n - 1)) for n, level in zip(looks, nominal_levels(looks, ALPHA)))
    spent_by = tuple(spent(n / 8, ALPHA, "obrien_fleming") for n in looks)
    whole = skew_calibration.calibrated_critical_values(looks, spent_by, floors, 1.5)
    skew_calibration._bad_side_t.cache_clear()
    monkeypatch.setattr(skew_calibration, "CALIBRATION_BYTES", 2 * 8 * CALIBRATION_PATHS)  # two looks at a time
    assert skew_calibration.calibrated_critical_values(looks, spent_by, floors, 1.5) == whole
    skew_calibration._bad_side_t.cache_clear()
    monkeypatch.setattr(skew_calibration, "CALIBRATION_BYTES", 3 * 8 * 8 * 1000)  # 1000 paths per block of draws
    assert skew_calibration.calibrated_critical_values(looks, spent_by, floors, 1.5) == whole


def test_calibrated_levels_are_stricter_than_normal_theory_from_two_seeds_on(few_calibration_paths):
    (fixed,) = nominal_levels((2,), ALPHA, "obrien_fleming", 1.0)
    assert fixed < ALPHA  # two seeds have a t test to calibrate
    levels = nominal_levels((2, 3, 4), ALPHA, "obrien_fleming", 1.0)
    normal = nominal_levels((2, 3, 4), ALPHA, "obrien_fleming")
    assert all(0 < level < plain for level, plain in zip(levels, normal))
    # a look at one seed has no t test: it keeps its normal-theory level
    assert nominal_levels((1, 2, 3, 4), ALPHA, "obrien_fleming", 1.0)[0] == nominal_levels((1, 2, 3, 4), ALPHA)[0]
    assert nominal_levels((1,), ALPHA, "pocock", 1.0) == (ALPHA,)


def test_a_bound_too_small_to_matter_keeps_the_schedules_own_levels(few_calibration_paths):
    looks = (3, 4, 5, 6)
    assert nominal_levels(looks, ALPHA, "pocock", 0.01) == nominal_levels(looks, ALPHA, "pocock")
    assert Schedule(3, 6, spending="pocock", skew_bound=0.01).levels(looks, ALPHA) == nominal_levels(looks, ALPHA,
                                                                                                     "pocock")


# -- the gate's report for CI ------------------------------------------------------------------------

from xml.etree import ElementTree  # noqa: E402

from harness.gating import gate_report  # noqa: E402
from harness.gating.gate import GateCheck, GateResult  # noqa: E402


def check(check: str = "quality", current: float = 0.8, passed: bool = True, near: bool = False, point: str = "",
          baseline: float = 0.8, subject: str = "treat", metric: str = "acc") -> GateCheck:
    return GateCheck(check, subject, point, metric, baseline, current, passed, f"rule of {subject}", near)


def gated(*checks: GateCheck, **problems) -> GateResult:
    fields = dict(missing_in_run=(), missing_in_baseline=(), failed_trials=())
    fields.update(problems)
    return GateResult("synth", "smoke", "cpu", Path("baselines/synth.json"), tuple(checks), **fields)


def test_a_check_is_a_row_when_it_failed_warns_or_moved_beyond_rounding():
    assert gate_report.moved(check(passed=False))
    assert gate_report.moved(check("claim", near=True))
    assert gate_report.moved(check(current=0.8 + 1e-6))
    assert not gate_report.moved(check(current=0.8 + 1e-12))  # the same trials summed in another order
    assert not gate_report.moved(check(baseline=0.0, current=1e-9))  # exactly the rounding allowance
    assert not gate_report.moved(check(baseline=1e6, current=1e6 + 1e-4))  # rounding grows with the value
    assert gate_report.moved(check(baseline=1e6, current=1e6 + 1e-2))


def test_the_problems_of_a_gate_are_listed_with_their_kind():
    assert gate_report.problems(gated(check())) == []
    assert gate_report.problems(gated()) == [("no checks", "nothing in this run could be compared with the baseline")]
    found = gate_report.problems(gated(check(), incomplete="ended early", failed_trials=("t1",), missing_trials=("t2",),
                                       missing_in_run=("acc",), dropped_seeds=("seed 3",)))
    assert found == [("incomplete run", "ended early"), ("failed trial", "t1"), ("missing trial", "t2"),
                     ("missing value", "acc"), ("dropped seed", "seed 3")]


def test_the_markdown_gives_a_verdict_per_run_and_a_row_per_moved_check_failures_first():
    passing = gated(check(), check("claim", subject="treat-vs-control", near=True, current=1.0, baseline=0.0))
    failing = gated(check(current=0.75, passed=False, point="n=4"), check(current=0.81), check("memory", metric="bytes"))
    text = gate_report.render_markdown([passing, failing])
    lines = text.splitlines()
    assert lines[0] == "## harness gate: FAIL (1 of 2 run(s) pass)"
    assert lines[1] == "" and lines[4] == ""  # Markdown needs the blank lines around the list and the table
    assert lines[2] == ("- synth/smoke/cpu vs `baselines/synth.json`: **PASS** (2 of 2 checks within tolerance, "
                        "1 near the boundary)")
    assert lines[3] == "- synth/smoke/cpu vs `baselines/synth.json`: **FAIL** (2 of 3 checks within tolerance)"
    assert lines[5].startswith("| run ") and set(lines[6]) <= set("|- ")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[7:]]
    assert [row[1] for row in rows] == ["claim", "quality", "quality"]  # the unmoved checks have no row
    assert rows[0][8] == "WARN" and rows[1][8] == "FAIL" and rows[2][8] == "PASS"
    assert rows[1][3:8] == ["n=4", "acc", "0.8", "0.75", "-0.05"] and rows[1][9] == "rule of treat"
    assert {row[0] for row in rows} == {"synth/smoke/cpu"}
    assert rows[2][3] == "-"
    assert gate_report.render_markdown([gated(check())]).splitlines()[0] == "## harness gate: PASS (1 of 1 run(s) pass)"
    assert gate_report.render_markdown([gated(check())]).endswith(
        "Nothing moved: every gated value equals its baseline.\n")
    problem_rows = gate_report.render_markdown([gated(check(), failed_trials=("t1",))]).splitlines()[-1]
    assert [cell.strip() for cell in problem_rows.strip("|").split("|")] == \
        ["synth/smoke/cpu", "failed trial", "t1", "", "", "", "", "", "FAIL", ""]


def test_the_markdown_keeps_a_baseline_path_inside_its_code_span():
    odd = GateResult("synth", "smoke", "cpu", Path("base`lines/x.json"), (check(),), (), (), ())
    assert "vs `base'lines/x.json`" in gate_report.render_markdown([odd])


def test_junit_has_a_case_per_check_and_per_problem_and_counts_the_failures():
    runs = [gated(check(), check(current=0.7, passed=False, point="n=2"), check("claim", near=True, subject="c")),
            gated(failed_trials=("t1",))]
    root = ElementTree.fromstring(gate_report.junit_xml(runs).split("\n", 1)[1])
    assert (root.get("name"), root.get("tests"), root.get("failures")) == ("harness gate", "5", "3")
    first, second = root.findall("testsuite")
    assert (first.get("name"), first.get("tests"), first.get("failures")) == ("synth/smoke/cpu", "3", "1")
    assert (second.get("tests"), second.get("failures")) == ("2", "2")  # no checks, and the failed trial
    cases = first.findall("testcase")
    assert [c.get("name") for c in cases] == ["quality treat acc", "quality treat @ n=2 acc", "claim c acc"]
    assert all(c.get("classname") == "harness.gate.synth.smoke" for c in cases)
    assert cases[0].find("failure") is None and cases[0].find("system-out") is None
    failure = cases[1].find("failure")
    assert (failure.get("message"), failure.get("type")) == ("rule of treat", "regression")
    assert failure.text == check(current=0.7, passed=False, point="n=2").describe()
    assert cases[2].find("system-out").text.startswith("warning: claim")
    problems = second.findall("testcase")
    assert [c.get("name") for c in problems] == ["no checks: nothing in this run could be compared with the baseline",
                                                 "failed trial: t1"]
    assert problems[1].find("failure").get("type") == "failed_trial" and problems[1].find("failure").text == "t1"
    assert problems[1].find("failure").get("message") == "failed trial"
    assert all(c.get("classname") == "harness.gate.synth.smoke" for c in problems)
    assert gate_report.junit_xml(runs).startswith('<?xml version="1.0" encoding="utf-8"?>\n<testsuites')


# -- numeric modes -----------------------------------------------------------------------------------

from harness.gating.numeric_modes import refuse_baseline_mode, refuse_other_mode  # noqa: E402
from harness.gating.values import BaselineEnvironment, GateError  # noqa: E402


def run_in_modes(*modes: str | None):
    trials = [make_record(f"control-{seed}", "control", seed, metrics={"score": 1.0},
                          environment={} if mode is None else {"numeric_mode": mode})
              for seed, mode in enumerate(modes)]
    meta = {"suite": "modes", "profile": "default", "seeds": list(range(len(modes))), "sweep": {},
            "metrics": RUN_METRICS, "arms": {"control": {"labels": ["control"]}}, "contrasts": [], "claims": []}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_the_gate_refuses_a_baseline_of_the_other_numeric_mode_only():
    fast = run_in_modes("fast", "fast")
    with pytest.raises(GateError, match="saved from a run in the deterministic numeric mode, these results ran in the "
                                        "fast mode.*--numeric deterministic"):
        refuse_other_mode(BaselineEnvironment(numeric_mode="deterministic"), fast, Path("b.json"))
    refuse_other_mode(BaselineEnvironment(numeric_mode="fast"), fast, Path("b.json"))  # the same mode
    refuse_other_mode(BaselineEnvironment(), fast, Path("b.json"))  # a baseline from before modes were recorded
    refuse_other_mode(BaselineEnvironment(numeric_mode="deterministic"), run_in_modes(None, None),
                      Path("b.json"))  # an old run


def test_a_baseline_comes_from_one_mode_the_deterministic_one_unless_asked():
    refuse_baseline_mode(run_in_modes("deterministic", "deterministic"))
    refuse_baseline_mode(run_in_modes(None, None))  # a run from before modes were recorded
    refuse_baseline_mode(run_in_modes("fast", "fast"), allowed="fast")
    refuse_baseline_mode(run_in_modes("deterministic"), allowed="fast")
    with pytest.raises(GateError, match=r"ran in the fast numeric mode; a baseline is saved from a deterministic run "
                                        r"\(rerun without --numeric fast\)"):
        refuse_baseline_mode(run_in_modes("fast", "fast"))
    with pytest.raises(GateError, match=r"different numeric modes \(deterministic, fast\); a baseline must come "
                                        r"from one \(rerun the suite with --no-resume\)"):
        refuse_baseline_mode(run_in_modes("deterministic", "fast"), allowed="fast")
    with pytest.raises(GateError, match="different numeric modes"):
        refuse_baseline_mode(run_in_modes("fast", None, "deterministic"))


def test_beyond_the_calibrated_seed_counts_the_excess_critical_value_decays_as_one_over_root_n(few_calibration_paths):
    at = sequential_design.CALIBRATED_SEEDS
    (level_at,) = nominal_levels((at,), ALPHA, "obrien_fleming", 1.0)
    assert fixed_level(at, ALPHA, 1.0) == level_at < ALPHA
    excess = scipy.stats.t.isf(level_at, at - 1) - scipy.stats.t.isf(ALPHA, at - 1)
    for n in (at + 1, 100, 400):
        expected = scipy.stats.t.sf(scipy.stats.t.isf(ALPHA, n - 1) + excess * math.sqrt(at / n), n - 1)
        assert fixed_level(n, ALPHA, 1.0) == pytest.approx(expected, rel=1e-12)
    assert level_at < fixed_level(100, ALPHA, 1.0) < fixed_level(400, ALPHA, 1.0) < ALPHA
    assert fixed_level(100, ALPHA) == ALPHA


# -- the tuning grid (analysis/decide/tune_grid) -----------------------------------------------------

from harness.analysis.decide.tune_grid import score_grid  # noqa: E402
from harness.core.record import Status  # noqa: E402


def grid_record(arm: str, lr: float, seed: int, accuracy: float | None, status: Status = Status.FINISHED):
    return make_record(f"{arm}-{lr}-{seed}-{accuracy}-{status}", arm, seed, params={"lr": lr}, status=status,
                       metrics={"accuracy": accuracy})


def test_a_grid_counts_every_failed_trial_of_its_arm_and_points_in_any_order():
    """Another arm's trials, a trial off the grid and a failed one come first; every later trial still counts,
    a failed trial counts as failed even where it left a finite value, and a point that failed one of its
    trials (here one of two variants on a seed) is not chosen though every seed has a value."""
    points = [{"lr": 0.1}, {"lr": 1.0}, {"lr": 0.01}]
    records = [grid_record("momentum", 0.1, 1, 1.0),
               grid_record("sgd", 0.5, 1, 0.99),  # off the grid
               grid_record("sgd", 1.0, 1, 0.99, Status.FAILED),  # failed after it reported a value
               grid_record("sgd", 1.0, 2, None, Status.FAILED),
               grid_record("sgd", 0.1, 1, 0.6), grid_record("sgd", 0.1, 2, 0.7),
               grid_record("sgd", 0.01, 1, 0.9), grid_record("sgd", 0.01, 1, None, Status.FAILED),
               grid_record("sgd", 0.01, 2, 0.9)]
    grid = score_grid("sgd", points, records, "accuracy", "higher", [1, 2])
    assert grid.arm == "sgd"
    assert [p.failed for p in grid.points] == [0, 2, 1]
    assert [p.values for p in grid.points] == [{1: 0.6, 2: 0.7}, {}, {1: 0.9, 2: 0.9}]
    assert grid.points[0].mean == pytest.approx(0.65) and grid.points[1].mean is None and grid.points[2].mean is None
    assert grid.chosen is grid.points[0]


# -- claims: ratio claims and claims that could not be tested (analysis/decide/claims) ---------------

from harness.analysis.claim_status import INSUFFICIENT  # noqa: E402
from harness.analysis.claim_tests.contract import QUALITY_FAMILY, TIMING_FAMILY  # noqa: E402
from harness.analysis.decide.claims import ClaimResult, evaluate_claims  # noqa: E402

CLAIM_METRICS = {"score": {"direction": "higher", "unit": "", "kind": "quality"},
                 "loss": {"direction": "lower", "unit": "", "kind": "quality"},
                 "tokens": {"direction": "none", "unit": "", "kind": "info"},
                 "seconds": {"direction": "lower", "unit": "s", "kind": "speed"},
                 "bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"}}


def claims_run(treat: dict[str, list], control: dict[str, list], claims: list[dict], confidence: float | None = None):
    """A two-arm run, treat-vs-control, of one trial per seed and arm; a value None is not reported finite."""
    seeds = list(range(max(len(v) for v in (*treat.values(), *control.values()))))
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={key: v[s] for key, v in values.items()})
              for arm, values in (("treat", treat), ("control", control)) for s in seeds]
    meta = {"suite": "core", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": CLAIM_METRICS,
            "arms": {"treat": {"labels": ["treat"]}, "control": {"labels": ["control"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": claims, "sequential": None, "premises": []}
    if confidence is not None:
        meta["confidence"] = confidence
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def ratio_claim(metric: str, **bounds) -> dict:
    return {"contrast": "treat-vs-control", "metric": metric, "test": "ratio", **bounds}


def test_a_ratio_claim_carries_its_contrast_point_key_pairs_interval_estimate_and_dropped_pairs():
    """Seed 1's control is 0 and seed 5's treatment reported nothing: both are dropped, the rest are
    read as per-pair ratios at the run's confidence."""
    run = claims_run({"score": [2.0, 3.0, 1.0, 4.0, 2.5, None]}, {"score": [1.0, 0.0, 1.0, 2.0, 1.0, 1.0]},
                     [ratio_claim("score", min=0.5)], confidence=0.9)
    (result,) = evaluate_claims(run)
    ratios = [2.0, 1.0, 2.0, 2.5]
    interval = scipy.stats.ttest_1samp(ratios, 0.0).confidence_interval(0.9)
    assert (result.contrast, result.point, result.key, result.n, result.dropped) == ("treat-vs-control", "", "score", 4, 2)
    assert result.estimate == pytest.approx(np.mean(ratios), rel=1e-15)
    assert (result.interval.low, result.interval.high) == pytest.approx((interval.low, interval.high), rel=1e-12)
    assert result.mean_estimate is not None
    assert (result.mean_estimate.n, result.mean_estimate.confidence) == (4, 0.9)
    assert result.mean_estimate.mean == result.estimate
    assert result.detail.endswith("2 pair(s) dropped (missing or non-finite): a pass needs every pair")


def test_a_ratio_claim_with_one_non_zero_control_is_insufficient_and_says_why():
    run = claims_run({"loss": [1.0, 2.0, 3.0]}, {"loss": [0.0, 4.0, 0.0]}, [ratio_claim("loss", max=1.0)])
    (result,) = evaluate_claims(run)
    assert (result.status, result.n, result.dropped, result.estimate) == (INSUFFICIENT, 1, 2, 0.5)
    assert (result.contrast, result.point, result.key) == ("treat-vs-control", "", "loss")
    assert result.detail.startswith("1 pair(s): a t interval needs at least 2;")
    assert result.mean_estimate.n == 1 and result.interval is None


def test_a_claim_that_could_not_be_tested_names_where_and_why_at_no_pairs_in_its_family():
    """Undecided claims: a ratio with no pair at all (the treatment reported nothing finite), a ratio whose
    control is 0 on every seed, and a timing claim on a contrast the run lacks (in the timing family)."""
    claims = [ratio_claim("tokens", min=1.0), ratio_claim("loss", min=1.0),
              {"contrast": "other-vs-control", "metric": "seconds", "test": "superior"}]
    run = claims_run({"tokens": [None, None, None], "loss": [1.0, 2.0, 3.0], "seconds": [1.0, 1.0, 1.0]},
                     {"tokens": [1.0, 2.0, 3.0], "loss": [0.0, 0.0, 0.0], "seconds": [2.0, 2.0, 2.0]}, claims)
    by_key = {result.key: result for result in evaluate_claims(run)}
    no_pair, zero_control, no_contrast = by_key["tokens"], by_key["loss"], by_key["seconds"]
    for result in (no_pair, zero_control):
        assert (result.contrast, result.point, result.status, result.n) == ("treat-vs-control", "", INCONCLUSIVE, 0)
        assert result.detail == "no pair with a non-zero control value" and result.family == QUALITY_FAMILY
    assert (no_contrast.contrast, no_contrast.point, no_contrast.status, no_contrast.n) == \
        ("other-vs-control", "", INCONCLUSIVE, 0)
    assert no_contrast.detail == "no such contrast in this run" and no_contrast.family == TIMING_FAMILY
    assert no_contrast.in_family and no_contrast.estimate is None and no_contrast.interval is None


# -- seed planning (analysis/decide/seed_planning) ---------------------------------------------------

from harness.analysis.decide.seed_planning import family_sizes, plan_suite  # noqa: E402


def test_a_claim_on_an_undeclared_metric_counts_in_its_family_as_a_metric_without_direction():
    """An undeclared metric has no direction: a test that needs one leaves the family, one that does not stays."""
    claims = [{"metric": "unknown", "test": "equivalent"}, {"metric": "unknown", "test": "superior"},
              {"metric": "seconds", "test": "superior"}]
    metrics = {"seconds": Metric(name="seconds", direction="lower", unit="s", kind="speed")}
    assert family_sizes(claims, metrics) == {QUALITY_FAMILY: 1, TIMING_FAMILY: 1}


def test_a_pilots_plan_names_each_claim_by_contrast_key_point_and_statement():
    def pilot(point: str) -> ClaimResult:  # p = 0.7: an effect on the wrong side, so no power is simulated
        return ClaimResult(spec("superior"), "treat-vs-control", point, "acc", INCONCLUSIVE, 6, -0.1, None, "",
                           p_value=0.7, in_family=True)
    plan = plan_suite("s", 0.95, {QUALITY_FAMILY: 2}, Schedule(6, 6), [pilot("lr=0.1"), pilot("")])
    assert [row.label for row in plan.rows] == ["treat-vs-control acc @ lr=0.1 superior",
                                                "treat-vs-control acc superior"]


# -- the gate's own report, and what it refuses (gating/gate) ----------------------------------------

from types import SimpleNamespace  # noqa: E402

from harness.gating import gate as gate_module  # noqa: E402

POSSIBLE_CAUSE = ("float results can change with the CPU's vector ISA, the thread count or the torch build. Rerun "
                  "with the baseline's thread count (--threads) or save a baseline on this machine kind before "
                  "suspecting the code")


def test_a_check_reads_as_its_kind_subject_point_metric_and_values():
    assert check(point="n=2", current=0.7).describe() == "quality     treat @ n=2  acc: 0.8 -> 0.7  (rule of treat)"
    assert check().describe() == "quality     treat  acc: 0.8 -> 0.8  (rule of treat)"
    assert check("claim", subject="c", point="n=2").describe() == "claim       c @ n=2  acc: rule of c"


def test_the_gates_text_gives_its_verdict_counts_notes_and_problems_line_by_line():
    failing = gated(check(), check(current=0.7, passed=False, point="n=2"), check("claim", near=True, subject="t-vs-c"),
                    environment_differences=("torch_threads '4' vs '8'", "torch '2.1' vs '2.2'"),
                    stale_note="2 stored trial(s) set aside", incomplete="the run ended early")
    assert failing.render().splitlines() == [
        "gate synth/smoke/cpu vs baselines/synth.json: FAIL (2 of 3 checks within tolerance, 1 near the boundary)",
        "  2 stored trial(s) set aside",
        "  the run ended early",
        "  REGRESSION quality     treat @ n=2  acc: 0.8 -> 0.7  (rule of treat)",
        "  NEAR THE BOUNDARY (warning, not a regression) claim       t-vs-c  acc: rule of t-vs-c",
        "  POSSIBLE CAUSE: the baseline was saved on another machine (torch_threads '4' vs '8'; torch '2.1' vs '2.2'); "
        + POSSIBLE_CAUSE]
    assert gated(check(), check(point="n=2")).render() == \
        "gate synth/smoke/cpu vs baselines/synth.json: PASS (2 of 2 checks within tolerance)"
    assert gated(environment_differences=("torch '2.1' vs '2.2'",)).render().splitlines() == [
        "gate synth/smoke/cpu vs baselines/synth.json: FAIL (0 of 0 checks within tolerance)",
        "  NO CHECKS: nothing in this run could be compared with the baseline; a gate that compares nothing fails",
        "  note: baseline from another machine (torch '2.1' vs '2.2'); its values held here"]


def executor_run(*executors: str):
    """A run whose trials ran under these executors, one seed each."""
    trials = [make_record(f"treat-{s}", "treat", s, metrics={"score": 1.0}, environment={"executor": name})
              for s, name in enumerate(executors)]
    meta = {"suite": "core", "profile": "default", "seeds": list(range(len(executors))), "sweep": {},
            "metrics": CLAIM_METRICS, "arms": {"treat": {"labels": ["treat"]}}, "contrasts": [], "claims": [],
            "sequential": None, "premises": []}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_the_gate_refuses_only_a_foreign_executor_its_baseline_did_not_use():
    used_two = SimpleNamespace(environment=BaselineEnvironment(executor=("pkg.a", "pkg.b")))
    gate_module._refuse_other_executor(used_two, executor_run("pkg.a", "serial", "pkg.b"), Path("b.json"))
    with pytest.raises(GateError) as refused:
        gate_module._refuse_other_executor(used_two, executor_run("pkg.a", "pkg.d", "pkg.c"), Path("b.json"))
    assert str(refused.value) == (
        "refusing to gate: trials of these results ran under executor 'pkg.c', 'pkg.d', another package's, which "
        "baseline b.json did not use (it used pkg.a, pkg.b); rerun the suite with a built-in --executor, or save a "
        "baseline of this executor")
    with pytest.raises(GateError) as refused:  # a baseline saved before executors were recorded
        gate_module._refuse_other_executor(SimpleNamespace(environment=BaselineEnvironment()), executor_run("pkg.a"), Path("b.json"))
    assert "(it used the built-in ones)" in str(refused.value)
    gate_module._refuse_other_executor(SimpleNamespace(environment=BaselineEnvironment()), executor_run("serial", "ray"), Path("b.json"))


# -- what the gate compares and how it judges it (gating/values) -------------------------------------

from harness.analysis.compare.claim_moves import ClaimEvidence  # noqa: E402
from harness.gating.values import CHECK_KINDS, GatedRun, GatedValue, Measured, check_name, trial_name  # noqa: E402
from harness.suite.schema import GateSpec  # noqa: E402

TOLERANCES = GateSpec(default_tolerance=0.5, speed_tolerance=0.25)
SUITES_TOLERANCE = "the suite's tolerance (one seed: no spread)"


def entry(check: str, value: float, direction: str = "higher", spread: float | None = None, metric: str = "score",
          subject: str = "treat", seeds: tuple[int, ...] | None = None, claim: ClaimEvidence | None = None):
    return GatedValue(check, subject, "", metric, direction, value, seeds, spread, claim)


def judged(check: str, reference: GatedValue, current: float, spread: float | None = None,
           claim: ClaimEvidence | None = None):
    outcome = CHECK_KINDS[check].judge(reference, Measured(("treat",), (0,), current, spread, claim), TOLERANCES)
    return outcome.passed, outcome.rule


def test_values_and_trials_are_named_with_their_point():
    assert check_name(("quality", "treat", "n=4", "acc")) == "quality treat @ n=4 acc"
    assert check_name(("quality", "treat", "", "acc")) == "quality treat acc"
    assert trial_name(("treat", "n=4", 3)) == "treat seed=3 @ n=4"
    assert trial_name(("treat", "", 3)) == "treat seed=3"


def test_a_mean_may_worsen_by_its_noise_boundary_included_and_says_by_what():
    for baseline_spread in (None, 0.1):  # either run without a spread: the suite's tolerance
        assert judged("quality", entry("quality", 2.0, spread=baseline_spread), 1.5) == \
            (True, f"mean, higher is better, may worsen by 0.5 = {SUITES_TOLERANCE}")
    assert judged("quality", entry("quality", 2.0, spread=0.1), 1.49)[0] is False
    assert judged("quality", entry("quality", 2.0, spread=0.3), 0.5, spread=0.4) == \
        (True, "mean, higher is better, may worsen by 1.5 = 3 standard errors over seeds")
    assert judged("quality", entry("quality", 2.0, "lower"), 2.5)[0] is True
    assert judged("memory", entry("memory", 10.0), 10.0) == (True, "must be equal")
    assert judged("memory", entry("memory", 10.0), 9.0) == (False, "must be equal")


def test_a_contrast_keeps_its_sign_only_where_the_baseline_is_sure_of_it():
    unsure = "difference to control, higher is better, may worsen by"
    sure = "difference to control, baseline sure of its sign: must keep it and move by at most"
    assert judged("contrast", entry("contrast", 2.0), 1.5) == (True, f"{unsure} 0.5 = {SUITES_TOLERANCE}")
    # 3 standard errors exactly is not sure; the boundary of the move is inclusive
    assert judged("contrast", entry("contrast", 1.5, spread=0.5), 2.0, spread=0.0)[1].startswith(unsure)
    assert judged("contrast", entry("contrast", 2.0, spread=0.1), 1.5) == (True, f"{sure} 0.5 either way = {SUITES_TOLERANCE}")
    assert judged("contrast", entry("contrast", 2.0, spread=0.1), 2.51)[0] is False  # either way
    # a sure baseline of 1 whose difference is now 0: within the (large) noise, but the sign is lost
    assert judged("contrast", entry("contrast", 1.0, spread=0.1), 0.0, spread=1.0) == \
        (False, f"{sure} 3.01 either way = 3 standard errors over seeds")


def test_a_tiny_sure_difference_that_stays_the_same_keeps_its_sign():
    assert judged("contrast", entry("contrast", 1e-170, spread=1e-172), 1e-170, spread=1e-172)[0] is True


def test_a_speed_ratio_may_worsen_by_the_speed_tolerance_boundary_included():
    assert judged("speed_ratio", entry("speed_ratio", 2.0, metric="seconds"), 1.5) == \
        (True, "ratio to control, higher is better, may worsen by 25%")
    assert judged("speed_ratio", entry("speed_ratio", 2.0, metric="seconds"), 1.49)[0] is False
    assert judged("speed_ratio", entry("speed_ratio", 1.5, "lower", metric="seconds"), 2.0) == \
        (True, "ratio to control, lower is better, may worsen by 25%")
    assert judged("speed_ratio", entry("speed_ratio", 1.5, "lower", metric="seconds"), 2.01)[0] is False


def test_a_claims_estimate_without_a_spread_is_held_to_the_suites_tolerance():
    before, after = ClaimEvidence("pass", 0.5), ClaimEvidence("pass", 1.5)
    passed, rule = judged("claim", entry("claim", 0.5, "none", claim=before), 1.5, claim=after)
    assert not passed and rule.endswith("moved by 1 > 0.5 = the suite's tolerance (no spread)")
    assert judged("claim", entry("claim", 0.5, "none", claim=before), 0.9, claim=ClaimEvidence("pass", 0.9))[0]


def test_each_check_kind_measures_the_baseline_entrys_seeds_of_the_run():
    run = claims_run({"score": [1.0, 2.0, 4.0, 9.0], "seconds": [2.0, 2.0, 2.0, 9.0]},
                     {"score": [0.5, 0.5, 0.5, 0.5], "seconds": [1.0, 1.0, 1.0, 1.0]}, [])
    claim = entry("claim", 0.25, "none", subject="treat-vs-control", claim=ClaimEvidence("pass", 0.25))
    gated_run = GatedRun(run, {"treat-vs-control": ("treat", "control")}, {("treat-vs-control", "", "score"): claim})
    seeds = (0, 1, 2)
    arm = CHECK_KINDS["quality"].measure(gated_run, entry("quality", 2.0), seeds)
    assert arm == Measured(("treat",), seeds, pytest.approx(7 / 3), pytest.approx(np.std([1, 2, 4], ddof=1) / math.sqrt(3)))
    contrast = CHECK_KINDS["contrast"].measure(gated_run, entry("contrast", 1.0, subject="treat-vs-control"), seeds)
    assert (contrast.labels, contrast.seeds, contrast.value) == (("treat", "control"), seeds, pytest.approx(7 / 3 - 0.5))
    speed = CHECK_KINDS["speed_ratio"].measure(gated_run, entry("speed_ratio", 2.0, "lower", metric="seconds",
                                                                subject="treat-vs-control"), seeds)
    assert speed == Measured(("treat", "control"), seeds, 2.0)
    assert CHECK_KINDS["claim"].measure(gated_run, claim, seeds) == Measured((), seeds, 0.25, claim=claim.claim)
    assert CHECK_KINDS["claim"].measure(gated_run, entry("claim", 0.0, "none", subject="other"), seeds) is None


def test_a_claim_on_a_speed_metric_is_a_timing():
    run = claims_run({"score": [1.0]}, {"score": [1.0]}, [])
    assert CHECK_KINDS["claim"].timing(run, entry("claim", 0.0, "none", metric="seconds"))
    assert not CHECK_KINDS["claim"].timing(run, entry("claim", 0.0, "none", metric="score"))


def test_a_seed_plan_reads_its_families_design_and_columns():
    from harness.analysis.decide.seed_planning import ClaimPlan, SeedPlan
    plan = SeedPlan("s", {TIMING_FAMILY: 1, QUALITY_FAMILY: 2}, 0.025, Schedule(3, 6, skew_bound=1.0), "assumed",
                    (ClaimPlan("a", 0.5, 10, None),))
    assert plan.render().splitlines()[:4] == [
        "== s: sampled claims per Holm family, each planned at the level the run's first Holm step tests it: "
        "quality 2 at one-sided 0.0125, timing 1 at one-sided 0.025; effects assumed",
        "sequential design: obrien_fleming, looks at 3, 4, 5, 6 seeds, futility below 0.1 conditional power; fixed "
        "and sequential alike at critical values calibrated to |skewness| <= 1",
        f"{'claim':<58} {'effect/sd':>9} {'fixed n (80%)':>13} {'seq power':>9} {'seq E[n]':>8}",
        "-" * 101]
    empty = SeedPlan("s", {}, 0.025, Schedule(6, 6, futility=None), "from the pilot run", ())
    assert empty.render().splitlines()[:2] == [
        "== s: sampled claims per Holm family, each planned at the level the run's first Holm step tests it: none; "
        "effects from the pilot run",
        "sequential design: obrien_fleming, looks at 6 seeds"]


def test_a_kind_without_direction_gates_metrics_without_one_and_a_directional_one_does_not():
    memory = Metric(name="bytes", direction="none", unit="bytes", kind="memory")
    assert CHECK_KINDS["memory"].gates(memory)
    assert not CHECK_KINDS["quality"].gates(Metric(name="acc", direction="none", unit="", kind="quality"))


from harness.core.stored_fields import as_stored  # noqa: E402
from harness.gating.values import (  # noqa: E402
    baseline_values,
    paired_differences,
    seed_values,
    speed_ratio,
)


def arms_run(values: dict[str, dict[str, list]], contrasts: list[tuple[str, str]] = (("treat", "control"),),
             claims: list[dict] = (), seeds: list[int] | None = None, environment: dict[str, list[dict]] | None = None):
    """A run of these arms' values by metric and seed (None: not finite), with contrasts treatment-vs-control;
    ``environment`` gives each arm's trials their environment, seed by seed."""
    stored_seeds = list(range(max(len(v) for arm in values.values() for v in arm.values())))
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={key: v[s] for key, v in metrics.items()},
                          environment=(environment or {}).get(arm, [{}] * len(stored_seeds))[s])
              for arm, metrics in values.items() for s in stored_seeds]
    meta = {"suite": "core", "profile": "default", "seeds": stored_seeds if seeds is None else seeds, "sweep": {},
            "metrics": CLAIM_METRICS, "arms": {arm: {"labels": [arm]} for arm in values},
            "contrasts": [{"treatment": t, "control": c, "name": f"{t}-vs-{c}"} for t, c in contrasts],
            "claims": list(claims), "sequential": None, "premises": []}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_a_baseline_holds_each_arms_means_with_spread_each_distinct_pairs_difference_and_every_claim():
    run = arms_run({"treat": {"score": [1.0, 2.0, 4.0], "seconds": [1.0, 1.0, 1.0]},
                    "control": {"score": [0.5, 0.5, 0.5], "seconds": [2.0, 2.0, 2.0]},
                    "other": {"score": [0.0, 1.0, 1.0], "seconds": [4.0, 4.0, 4.0]}},
                   contrasts=[("treat", "control"), ("other", "control")],
                   claims=[{"contrast": "treat-vs-control", "metric": "seconds", "test": "superior"},
                           {"contrast": "missing-vs-control", "metric": "score", "test": "superior"}])
    entries = {v.identity: v for v in baseline_values(run)}
    treat = entries["quality", "treat", "", "score"]
    assert treat.value == pytest.approx(7 / 3) and treat.spread == pytest.approx(np.std([1, 2, 4], ddof=1) / math.sqrt(3))
    assert ("contrast", "treat-vs-control", "", "score") in entries and ("contrast", "other-vs-control", "", "score") in entries
    assert ("speed_ratio", "other-vs-control", "", "seconds") in entries
    assert ("claim", "treat-vs-control", "", "seconds") in entries  # a timing claim, where speed is gated
    untested = entries["claim", "missing-vs-control", "", "score"]  # no such contrast: no estimate, held at 0
    assert untested.value == 0.0 and untested.claim.result == INCONCLUSIVE
    bytes_run = arms_run({"treat": {"bytes": [10.0, 12.0]}}, contrasts=[])
    assert [(v.identity, v.value, v.spread) for v in baseline_values(bytes_run)] == \
        [(("memory", "treat", "", "bytes"), 11.0, None)]  # a size must be equal: no spread


def test_what_a_run_recorded_of_its_executors_environment_and_seed_batches_lists_each_value_once():
    environment = {"treat": [{"executor": "pkg.a", "torch": "2.2", "seed_batch": "0,1"},
                             {"executor": "serial", "torch": "2.1", "seed_batch": "0,1"},
                             {"executor": "pkg.a", "torch": "2.2"}]}
    recorded = BaselineEnvironment.of_run(arms_run({"treat": {"score": [1.0, 2.0, 3.0]}}, contrasts=[],
                                                   environment=environment))
    assert (recorded.executor, recorded.torch, recorded.seed_batch_size) == (("pkg.a", "serial"), "2.1 | 2.2", (1, 2))
    assert as_stored(recorded) == {"executor": "pkg.a | serial", "torch": "2.1 | 2.2", "seed_batch_size": "1 | 2"}
    nothing = arms_run({"treat": {"score": [1.0]}}, contrasts=[], environment={"treat": [{}]})
    assert as_stored(BaselineEnvironment.of_run(nothing)) == {"seed_batch_size": "1"}
    failed_only = index_results(Path("."), nothing.stored, [make_record("treat-0", "treat", 0, status="failed",
                                                                         error="boom", metrics={})])
    assert BaselineEnvironment.of_run(failed_only) == BaselineEnvironment()


def test_seed_values_and_pairs_keep_the_declared_or_asked_seeds():
    run = arms_run({"treat": {"score": [1.0, 2.0, 4.0]}, "control": {"score": [0.0, 0.0, 0.0]}}, seeds=[0, 1])
    assert seed_values(run, "treat", "", "score") == {0: 1.0, 1: 2.0}
    undeclared = arms_run({"treat": {"score": [1.0, 2.0, 4.0]}}, contrasts=[], seeds=[])
    assert seed_values(undeclared, "treat", "", "score") == {0: 1.0, 1: 2.0, 2: 4.0}
    full = arms_run({"treat": {"score": [1.0, 2.0, 4.0]}, "control": {"score": [0.0, 1.0, 0.0]}})
    assert paired_differences(full, "treat", "control", "", "score", [0, 2]) == {0: 1.0, 2: 4.0}
    assert paired_differences(full, "treat", "control", "", "score") == {0: 1.0, 1: 1.0, 2: 4.0}


def test_a_speed_ratio_over_a_control_of_mean_zero_is_none():
    run = arms_run({"treat": {"seconds": [1.0, 2.0]}, "control": {"seconds": [0.0, 0.0]}})
    assert speed_ratio(run, "treat", "control", "", "seconds", None) == (None, [0, 1])


def test_the_gate_refuses_another_runs_baseline_or_other_seed_batches_and_says_why():
    run = arms_run({"treat": {"score": [1.0, 2.0]}}, contrasts=[])
    other = SimpleNamespace(suite="core", profile="smoke", device_class=run.device_class, seeds=(0, 1, 2), sweep=None)
    with pytest.raises(GateError) as refused:
        gate_module._refuse_mismatch(other, run, Path("b.json"))
    assert str(refused.value) == ("refusing to gate: baseline b.json is for another run (profile 'smoke' vs 'default', "
                                  "seeds [0, 1, 2] vs [0, 1] in these results); use the baseline of the same suite, "
                                  "profile, device class, seeds and sweep")
    batched = arms_run({"treat": {"score": [1.0, 2.0]}}, contrasts=[],
                       environment={"treat": [{"seed_batch": "0,1"}, {"seed_batch": "0,1"}]})
    alone = arms_run({"treat": {"score": [1.0, 2.0]}}, contrasts=[])
    failed_only = index_results(Path("."), alone.stored, [make_record("treat-0", "treat", 0, status="failed",
                                                                       error="boom", metrics={})])
    saved_in = {size: SimpleNamespace(environment=BaselineEnvironment(seed_batch_size=(int(size),)))
                for size in ("1", "2")}
    before_batches = SimpleNamespace(environment=BaselineEnvironment())  # a baseline saved before batches were recorded: alone
    for baseline, results in ((saved_in["2"], batched), (saved_in["1"], alone), (before_batches, alone),
                              (saved_in["2"], failed_only)):
        gate_module._refuse_other_seed_batch(baseline, results, Path("b.json"))
    with pytest.raises(GateError) as refused:
        gate_module._refuse_other_seed_batch(before_batches, batched, Path("b.json"))
    assert str(refused.value) == ("refusing to gate: these results' trials were trained in seed batches of 2, baseline "
                                  "b.json's in 1; rerun with the baseline's seed_batch (the suite's or profile's key) "
                                  "or save a baseline of this one")


from harness.gating.baseline import save_baselines  # noqa: E402
from harness.gating.gate import gate  # noqa: E402
from harness.store import RunFolder  # noqa: E402

GATE_METRICS = {"acc": {"direction": "higher", "unit": "", "kind": "quality"},
                "err": {"direction": "lower", "unit": "", "kind": "quality"},
                "qps": {"direction": "higher", "unit": "1/s", "kind": "speed"}}


def gated_folder(root: Path, metrics: dict[str, float], speed: bool = True, task_version: str = "1",
                 environment: dict[str, str] | None = None) -> Path:
    """A two-seed treat/control run on disk whose every trial reports ``metrics`` (plus its seed)."""
    folder = RunFolder(root, "synth", "smoke")
    folder.save_suite({
        "schema": 1, "suite": "synth", "profile": "smoke", "task": "synth", "task_version": task_version,
        "seeds": [0, 1], "sweep": {}, "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
        "contrasts": [{"name": "treat-vs-control", "treatment": "treat", "control": "control", "margins": {}}],
        "validity": None, "claims": [], "gate": {"default_tolerance": 0.05, "speed": speed}, "metrics": GATE_METRICS,
        "device": "cpu", "device_class": "cpu", "device_name": "synthetic"})
    for arm in ("control", "treat"):
        for seed in (0, 1):
            folder.save_trial(make_record(f"{arm}-{seed}", arm, seed, suite="synth", profile="smoke", curves={},
                                          metrics={k: v + 0.01 * seed for k, v in metrics.items()},
                                          environment=dict(environment or {})))
    return folder.path


def test_the_gate_names_its_baseline_file_in_each_refusal(tmp_path):
    deterministic = {"numeric_mode": "deterministic"}
    (baseline,) = save_baselines([gated_folder(tmp_path / "reference", {"acc": 0.8}, environment=deterministic)],
                                 tmp_path / "baselines")
    refusals = [(gated_folder(tmp_path / "version", {"acc": 0.8}, task_version="2"), "version 2"),
                (gated_folder(tmp_path / "mode", {"acc": 0.8}, environment={"numeric_mode": "fast"}), "numeric mode"),
                (gated_folder(tmp_path / "executor", {"acc": 0.8}, environment={**deterministic, "executor": "pkg.x"}),
                 "pkg.x")]
    for run_dir, why in refusals:
        with pytest.raises(GateError, match=why) as refused:
            gate(run_dir, baseline)
        assert f"baseline {baseline} " in str(refused.value)
    run_dir = gated_folder(tmp_path / "seeds", {"acc": 0.8})
    stored = json.loads((run_dir / "suite.json").read_text())
    stored["seeds"] = [0, 1, 2]
    (run_dir / "suite.json").write_text(json.dumps(stored))
    with pytest.raises(GateError, match="is for another run") as refused:
        gate(run_dir, baseline)
    assert f"baseline {baseline} " in str(refused.value)


def test_the_gate_lists_a_missing_value_once_and_a_new_one_where_it_would_be_gated(tmp_path):
    (baseline,) = save_baselines([gated_folder(tmp_path / "reference", {"acc": 0.8, "err": 0.2})], tmp_path / "b")
    lacking = gate(gated_folder(tmp_path / "lacking", {"acc": 0.8}), baseline)
    assert sorted(lacking.missing_in_run) == ["contrast treat-vs-control err", "quality control err", "quality treat err"]
    new_speed = gate(gated_folder(tmp_path / "speed", {"acc": 0.8, "err": 0.2, "qps": 10.0}), baseline)
    assert new_speed.missing_in_baseline == ("speed_ratio treat-vs-control qps",)
    new_quality = gate(gated_folder(tmp_path / "quality", {"acc": 0.8, "err": 0.2, "zz": 1.0, "qps": 10.0},
                                    speed=False), baseline)
    assert new_quality.missing_in_baseline == ()
    (without_err,) = save_baselines([gated_folder(tmp_path / "reference2", {"acc": 0.8})], tmp_path / "b2")
    more = gate(gated_folder(tmp_path / "more", {"acc": 0.8, "err": 0.2, "qps": 10.0}, speed=False), without_err)
    assert sorted(more.missing_in_baseline) == ["contrast treat-vs-control err", "quality control err",
                                                "quality treat err"]


def test_a_failed_trial_is_named_once_not_again_per_value(tmp_path):
    (baseline,) = save_baselines([gated_folder(tmp_path / "reference", {"acc": 0.8})], tmp_path / "b")
    run_dir = gated_folder(tmp_path / "run", {"acc": 0.8})
    RunFolder(tmp_path / "run", "synth", "smoke").save_trial(make_record(
        "treat-1", "treat", 1, suite="synth", profile="smoke", status="failed", error="boom", metrics={}))
    result = gate(run_dir, baseline)
    assert result.failed_trials == ("treat seed=1: boom",) and not result.passed
    assert result.missing_in_run == ()


def test_a_seed_plans_rows_show_what_planning_found_and_explain_its_marks():
    from harness.analysis.decide.seed_planning import ClaimPlan, SeedPlan
    from harness.analysis.stats.sequential_design import OperatingCharacteristics
    seq = OperatingCharacteristics(0.5, 0.8123, 7.25)
    rows = (ClaimPlan("x" * 60, 0.5, 10, seq),  # a label is cut at 58 characters
            ClaimPlan("beyond", 0.7, None, seq),  # no fixed count up to 1000 seeds
            ClaimPlan("zero", 0.0, None, None), ClaimPlan("none", None, None, None))
    lines = SeedPlan("s", {QUALITY_FAMILY: 1}, 0.025, Schedule(6, 6), "assumed", rows).render().splitlines()[4:]
    assert lines == [f"{'x' * 58} {'0.5':>9} {'10':>13} {'0.81':>9} {'7.2':>8}",
                     f"{'beyond':<58} {'0.7':>9} {'>1000':>13} {'0.81':>9} {'7.2':>8}",
                     f"{'zero':<58} {'0':>9} {'-':>13} {'-':>9} {'-':>8}",
                     f"{'none':<58} {'-':>9} {'-':>13} {'-':>9} {'-':>8}",
                     "-: the pilot's estimate is not on the claim's pass side (effect/sd <= 0) or gave no t, so no "
                     "seed count gives it 80% power",
                     ">1000: more seeds than planning tries"]
    found = SeedPlan("s", {QUALITY_FAMILY: 1}, 0.025, Schedule(6, 6), "assumed", rows[:1]).render().splitlines()
    assert len(found) == 5 and found[-1].startswith("x" * 58)  # nothing to explain


def test_a_plan_powers_each_claim_at_its_familys_first_holm_level(monkeypatch):
    """Assumed effects at the quality family's level (else the first family's); a pilot's claims at their own."""
    from harness.analysis.decide import seed_planning
    from harness.analysis.decide.seed_planning import ClaimPlan
    levels: list[float] = []
    monkeypatch.setattr(seed_planning, "_row", lambda label, effect, level, design: levels.append(level) or
                        ClaimPlan(label, effect, None, None))
    for sizes, level in (({TIMING_FAMILY: 2, QUALITY_FAMILY: 4}, 0.025 / 4), ({TIMING_FAMILY: 2}, 0.025 / 2), ({}, 0.025)):
        levels.clear()
        plan = plan_suite("s", 0.95, sizes, Schedule(6, 6), None)
        assert levels == pytest.approx([level] * 4) and plan.source == "assumed (give --from RESULTS for a pilot's)"
    levels.clear()
    pilot = ClaimResult(spec("superior"), "treat-vs-control", "", "acc", INCONCLUSIVE, 6, 0.1, None, "",
                        p_value=0.01, in_family=True)
    plan = plan_suite("s", 0.95, {TIMING_FAMILY: 1, QUALITY_FAMILY: 2}, Schedule(6, 6), [pilot])
    assert levels == pytest.approx([0.025 / 2]) and plan.source == "from the pilot run"


def test_a_plans_fixed_design_is_calibrated_to_the_designs_skew_bound(monkeypatch):
    from harness.analysis.decide import seed_planning
    asked: list[dict] = []
    monkeypatch.setattr(seed_planning, "fixed_seeds_for_power", lambda *args, **kwargs: asked.append(kwargs) or 9)
    monkeypatch.setattr(seed_planning, "operating_characteristics", lambda *args, **kwargs: None)
    assert seed_planning._row("a", 0.8, 0.025, Schedule(3, 6, skew_bound=1.0)).fixed_seeds == 9
    assert asked == [{"skew_bound": 1.0}]


def test_a_reference_contrast_shows_the_control_works_beyond_the_margin_or_says_why_not():
    """Non-inferiority of new vs old, with old-vs-base (or weak-vs-old) as the reference: its 95% interval (the
    claim's one-sided 0.025 in each tail) must lie beyond 0 and beyond the margin; a relative margin is that
    fraction of the interval's lower end."""
    def claim(reference: str = "old-vs-base", **margin) -> dict:
        return {"contrast": "new-vs-old", "metric": "score", "test": "non_inferior", "reference": reference, **margin}
    run = arms_run({"new": {"score": [1.0, 1.1, 0.9, 1.0]}, "old": {"score": [1.0, 1.0, 1.0, 1.05]},
                    "base": {"score": [0.0, 0.1, -0.1, 0.05]}, "weak": {"score": [0.9, 1.05, 1.0, 0.95]},
                    "lone": {"score": [1.5, None, None, None]}, "empty": {"score": [None] * 4}},
                   contrasts=[("new", "old"), ("old", "base"), ("weak", "old"), ("lone", "old"), ("empty", "old")],
                   claims=[claim(margin=0.1), claim(relative_margin=0.2), claim(margin=0.99), claim("weak-vs-old", margin=0.1),
                           claim("weak-vs-old", relative_margin=0.2), claim("nope", margin=0.1),
                           claim("lone-vs-old", margin=0.1), claim("empty-vs-old", margin=0.1),
                           {"contrast": "new-vs-old", "metric": "score", "test": "non_inferior", "margin": 0.1}])
    absolute, relative, too_small, weak, weak_relative, missing, lone, empty, undeclared = \
        [c.reference for c in evaluate_claims(run)]
    assert (lone.contrast, lone.estimate, lone.interval, lone.n, lone.margin, lone.established) == \
        ("lone-vs-old", 0.5, None, 1, 0.1, False)
    assert lone.reason == "vacuous: reference lone-vs-old has 1 pair(s) on score"
    assert (empty.contrast, empty.estimate, empty.interval, empty.n, empty.margin, empty.established) == \
        ("empty-vs-old", None, None, 0, 0.1, False)
    assert empty.reason == "vacuous: reference empty-vs-old has 0 pair(s) on score"
    assert (undeclared.contrast, undeclared.n, undeclared.margin, undeclared.established) == ("", 0, 0.1, False)
    assert undeclared.reason == "vacuous: no reference contrast declared, so nothing shows the control works"
    works = [1.0, 0.9, 1.1, 1.0]
    interval = scipy.stats.ttest_1samp(works, 0.0).confidence_interval(0.95)
    for found in (absolute, relative, too_small):
        assert (found.contrast, found.n) == ("old-vs-base", 4) and found.estimate == pytest.approx(1.0)
        assert (found.interval.low, found.interval.high) == pytest.approx((interval.low, interval.high), rel=1e-12)
    assert absolute.established and absolute.margin == 0.1
    assert absolute.reason == "reference old-vs-base +1 [+0.8701, +1.13] established"
    assert absolute.p_value == pytest.approx(t_greater(works, 0.1), rel=1e-9)
    assert relative.established and relative.margin == pytest.approx(0.2 * interval.low, rel=1e-12)
    assert relative.p_value == pytest.approx(t_greater(works, 0.0), rel=1e-9)
    assert too_small.established is False and too_small.margin == 0.99
    assert too_small.reason == "vacuous: reference old-vs-base +1 [+0.8701, +1.13] is not surely larger than the margin 0.99"
    assert weak.established is False and weak.margin == 0.1 and weak.n == 4 and weak.contrast == "weak-vs-old"
    assert weak.reason == ("vacuous: reference weak-vs-old -0.0375 [-0.1568, +0.08184] is not established (interval "
                           "reaches 0 or the worse side)")
    assert not weak_relative.established and weak_relative.margin is None
    assert (missing.contrast, missing.estimate, missing.interval, missing.n, missing.margin, missing.established) == \
        ("nope", None, None, 0, 0.1, False)
    assert missing.reason == "vacuous: reference 'nope' has no variant in this run, so nothing shows the control works"


from harness.analysis.claim_status import VACUOUS  # noqa: E402


def test_a_reference_effect_of_exactly_zero_or_exactly_the_margin_is_not_established():
    """A deterministic reference (no spread: its interval is a point) at exactly 0 does not show the control
    works; one at exactly the margin is not surely beyond it; an absolute margin of 0 asks only for an effect."""
    def claim(reference: str, **margin) -> dict:
        return {"contrast": "new-vs-old", "metric": "score", "test": "non_inferior", "reference": reference, **margin}
    old = [1.0, 0.5, 0.75, 1.25]
    run = arms_run({"new": {"score": [1.01, 0.49, 0.77, 1.25]}, "old": {"score": old},
                    "same": {"score": list(old)}, "quarter": {"score": [v - 0.25 for v in old]},
                    "base": {"score": [0.8, 0.25, 0.6, 1.05]}},
                   contrasts=[("new", "old"), ("old", "same"), ("old", "quarter"), ("old", "base")],
                   claims=[claim("old-vs-same", margin=0.1), claim("old-vs-same", relative_margin=0.2),
                           claim("old-vs-quarter", margin=0.25), claim("old-vs-quarter", margin=0.2),
                           claim("old-vs-base", margin=0.0)])
    same, same_relative, at_margin, beyond, no_margin = evaluate_claims(run)
    assert same.status == VACUOUS and same.reference.margin == 0.1
    assert same.reference.reason == ("vacuous: reference old-vs-same +0 [+0, +0] is not established (interval "
                                     "reaches 0 or the worse side)")
    assert same_relative.status == VACUOUS and same_relative.reference.margin is None
    assert same_relative.reference.reason == same.reference.reason
    assert at_margin.status == VACUOUS and at_margin.reference.margin == 0.25
    assert at_margin.reference.reason == ("vacuous: reference old-vs-quarter +0.25 [+0.25, +0.25] is not surely "
                                          "larger than the margin 0.25")
    assert beyond.status == PASS and beyond.reference.established  # new equals old: surely within 0.2 of it
    # old beats base by 0.15..0.25: its interval's lower end is surely above 0, not above 1
    low = scipy.stats.ttest_1samp([0.2, 0.25, 0.15, 0.2], 0.0).confidence_interval(0.95).low
    assert 0 < low < 1 and no_margin.reference.interval.low == pytest.approx(low, rel=1e-9)
    assert no_margin.reference.margin == 0.0 and no_margin.reference.established
    assert no_margin.status == INCONCLUSIVE  # tested (new is not surely better than old), not vacuous


def test_a_relative_margin_without_a_reference_effect_has_no_margin():
    """The margin of a relative claim is a fraction of the reference effect: with no reference variant, or one
    with too few pairs for an interval, there is none (summary.json writes null), not 0."""
    def claim(reference: str) -> dict:
        return {"contrast": "new-vs-old", "metric": "score", "test": "non_inferior", "reference": reference,
                "relative_margin": 0.2}
    run = arms_run({"new": {"score": [1.0, 1.1, 0.9]}, "old": {"score": [1.0, 1.0, 1.0]},
                    "lone": {"score": [0.2, None, None]}},
                   contrasts=[("new", "old"), ("old", "lone")], claims=[claim("nope"), claim("old-vs-lone")])
    missing, lone = evaluate_claims(run)
    assert missing.status == VACUOUS and missing.reference.margin is None and missing.reference.n == 0
    assert lone.status == VACUOUS and lone.reference.margin is None and lone.reference.n == 1


def test_a_swept_controls_reference_is_read_at_the_same_control_label():
    """The claim new-vs-old at each of old's two settings reads the reference old-vs-base at that setting: old
    at lr=0.1 beats base, old at lr=1 does not, so only the first claim has a working control."""
    seeds = [0, 1, 2, 3]
    values = {("new", "new"): [1.01, 0.99, 1.02, 1.05], ("old", "old@lr=0.1"): [1.0, 1.0, 1.0, 1.05],
              ("old", "old@lr=1"): [0.0, 0.1, -0.1, 0.05], ("base", "base"): [0.0, 0.1, -0.1, 0.05]}
    trials = [make_record(f"{label}-{s}", arm, s, arm_label=label, metrics={"score": v[s]})
              for (arm, label), v in values.items() for s in seeds]
    meta = {"suite": "core", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": CLAIM_METRICS,
            "arms": {"new": {"labels": ["new"]}, "old": {"labels": ["old@lr=0.1", "old@lr=1"]},
                     "base": {"labels": ["base"]}},
            "contrasts": [{"treatment": "new", "control": "old", "name": "new-vs-old"},
                          {"treatment": "old", "control": "base", "name": "old-vs-base"}],
            "claims": [{"contrast": "new-vs-old", "metric": "score", "test": "non_inferior", "margin": 0.1,
                        "reference": "old-vs-base"}], "sequential": None, "premises": []}
    run = index_results(Path("."), StoredSuite.from_stored(meta), trials)
    by_control = {c.contrast: c for c in evaluate_claims(run)}
    tuned, untuned = by_control["new-vs-old@lr=0.1"], by_control["new-vs-old@lr=1"]
    assert tuned.reference.contrast == "old@lr=0.1-vs-base" and tuned.reference.established
    assert tuned.status == PASS
    assert untuned.reference.contrast == "old@lr=1-vs-base" and not untuned.reference.established
    assert untuned.status == VACUOUS


# -- a positive control too weak to be shown, on a metric where lower is better --------------------------

from harness.analysis.decide.verdicts import INVALID, UNDETERMINED, evaluate_validity  # noqa: E402

LOSS_CONTROL = [0.5 + 0.01 * s for s in range(6)]


def loss_validity(differences: tuple[float, ...]):
    """The validity of a sequential run (looks 3..12, futility 0.1) at 6 seeds whose positive control's loss is
    the control's plus ``differences``."""
    arms = {"control": LOSS_CONTROL, "treat": LOSS_CONTROL,
            "positive": [c + d for c, d in zip(LOSS_CONTROL, differences)]}
    seeds = list(range(6))
    trials = [make_record(f"{a}-{s}", a, s, metrics={"loss": v[s]}) for a, v in arms.items() for s in seeds]
    meta = {"suite": "weak", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": CLAIM_METRICS,
            "arms": {a: {"labels": [a]} for a in arms},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [{"contrast": "treat-vs-control", "metric": "loss", "test": "superior"}],
            "sequential": {"first": 3, "max_seeds": 12, "futility": 0.1}, "premises": [],
            "validity": {"control": "control", "positive": "positive", "metric": "loss"}}
    return evaluate_validity(index_results(Path("."), StoredSuite.from_stored(meta), trials))


def test_a_lower_is_better_positive_control_is_too_weak_only_when_it_cannot_be_shown_lower():
    """Loss: lower is better. A positive control a little worse than the control (its interval still reaching
    the better side) cannot plausibly be shown better by 12 seeds: INVALID, with its figures signed; one a
    little better (its interval reaching the worse side too) still can: UNDETERMINED."""
    worse = loss_validity((0.003, -0.002, 0.0025, -0.001, 0.0015, 0.0))
    assert worse.status == INVALID
    (check,) = worse.checks
    assert check.ok is False and check.point == "" and check.beats_control is False and check.difference.n == 6
    assert check.too_weak == ("+0.0006667 [-0.003924, +0.005257] at n=6, conditional power 0.00 < 0.1 to beat "
                              "it by 12 seeds")
    better = loss_validity((-0.03, -0.05, 0.01, -0.04, -0.02, 0.035))
    assert better.status == UNDETERMINED
    (check,) = better.checks
    assert check.ok is None and check.too_weak == ""


# -- the tuning grid's edges ------------------------------------------------------------------------------

def test_a_grid_edge_ignores_named_and_missing_settings_of_an_axis():
    """Only numbers order an axis: a setting of None or a name on some points, or an axis some points lack,
    leaves the other points' numbers to say whether the choice is on the edge."""
    from harness.analysis.decide.tune_grid import edge_axes
    points = [{"lr": 0.1, "clip": None}, {"lr": 0.2, "clip": 1.0}, {"lr": 0.3}, {"lr": 0.4, "clip": 2.0},
              {"lr": 0.5, "clip": 3.0}]
    assert edge_axes(points, {"lr": 0.3, "clip": 3.0}) == ["clip=3 is the largest of 1, 2, 3"]
    assert edge_axes(points, {"lr": 0.2, "clip": 2.0}) == []
    named = [{"init": "zero"}, {"init": "one"}, {"init": "two"}]
    assert edge_axes(named, {"init": "zero"}) == [] and edge_axes(named, {"init": "one"}) == []


def test_every_calibration_path_is_drawn_in_blocks_as_in_one_call(few_calibration_paths, monkeypatch):
    """The calibration's bad-side t statistics are those of the seeded paths drawn in one call, every path
    included (the first of each block too), whether the draws come in one block or in blocks of 1000 paths."""
    looks = (2, 3, 5, 6)
    expected = bad_side_t(6, 1.0)
    for blocking in (None, 3 * 8 * 6 * 1000):
        if blocking is not None:
            monkeypatch.setattr(skew_calibration, "CALIBRATION_BYTES", blocking)
        skew_calibration._bad_side_t.cache_clear()
        statistics = skew_calibration._bad_side_t(looks, 1.0, range(len(looks)))
        assert statistics.shape == (CALIBRATION_PATHS, len(looks))
        for j, n in enumerate(looks):
            np.testing.assert_array_equal(statistics[:, j], expected[n])


# -- premises: exact metrics, missing values, bounds touched ---------------------------------------------

from harness.analysis.decide.premises import FAILS, HOLDS, OPEN, bound_status, evaluate_premises  # noqa: E402
from harness.analysis.present.summary_json import premise_json  # noqa: E402

PREMISE_METRICS = {"peak_mib": {"direction": "lower", "unit": "MiB", "kind": "memory"},
                   "examples_seen": {"direction": "none", "unit": "examples", "kind": "info"},
                   "signal": {"direction": "none", "unit": "", "kind": "info"}}


def premises_run(values: dict[str, dict[str, list]], premises: list[dict]):
    """Arms' values by metric and seed (None: not reported), the contrast treat-vs-control, and ``premises``."""
    seeds = list(range(max(len(v) for metrics in values.values() for v in metrics.values())))
    trials = [make_record(f"{arm}-{s}", arm, s,
                          metrics={key: v[s] for key, v in metrics.items() if v[s] is not None})
              for arm, metrics in values.items() for s in seeds]
    meta = {"suite": "prem", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": PREMISE_METRICS,
            "arms": {arm: {"labels": [arm]} for arm in values},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [], "sequential": None, "premises": premises}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_memory_and_counted_metrics_are_checked_value_by_value_in_any_unit():
    """A memory metric (in MiB, not only bytes) and a count (of examples, whatever its kind) are exact: a
    premise on one fails when any seed's value is outside its bound, not when a confidence bound is."""
    run = premises_run({"treat": {"peak_mib": [100.0, 100.0, 100.0, 104.0], "examples_seen": [1000, 1000, 1000, 999]},
                        "control": {"peak_mib": [100.0] * 4, "examples_seen": [1000] * 4}},
                       [{"name": "fits", "arm": "treat", "metric": "peak_mib", "at_most": 103.0},
                        {"name": "all_data", "arm": "treat", "metric": "examples_seen", "at_least": 1000}])
    fits, all_data = evaluate_premises(run)
    assert fits.text() == "premise fits not met: 101 (exact: 100..104), needs <= 103 (treat peak_mib)"
    assert all_data.text() == "premise all_data not met: 999.8 (exact: 999..1000), needs >= 1000 (treat examples_seen)"
    assert premise_json(fits)["exact"] is True and premise_json(all_data)["n"] == 4


def test_a_premise_with_no_pair_or_one_value_stays_open_and_says_why():
    run = premises_run({"treat": {"signal": [0.5, None, 0.7]}, "control": {"signal": [None, 0.6, None]}},
                       [{"name": "paired", "contrast": "treat-vs-control", "metric": "signal", "at_least": 0.0},
                        {"name": "seen", "arm": "control", "metric": "signal", "at_least": 0.0}])
    paired, seen = evaluate_premises(run)
    assert paired.status == OPEN
    assert paired.text() == ("premise paired not yet established: no finite values of signal, needs >= 0 "
                             "(treat-vs-control signal)")
    assert (premise_json(paired)["n"], premise_json(paired)["exact"]) == (0, False)
    assert seen.status == OPEN
    assert seen.text() == "premise seen not yet established: 0.6 (n=1, no interval), needs >= 0 (control signal)"
    assert (premise_json(seen)["n"], premise_json(seen)["exact"]) == (1, False)


def test_a_premise_holds_on_a_bound_its_interval_touches_and_fails_only_beyond_it():
    """A constant sample (its interval a point) at exactly the bound holds it; an interval whose far end is the
    bound exactly is not yet beyond it: open, not failed."""
    assert bound_status(mean_estimate([0.0, 0.0, 0.0]), None, 0.0, 0.025) == (HOLDS, 0.0, 0.0)
    assert bound_status(mean_estimate([2.0, 2.0, 2.0]), 2.0, None, 0.025) == (HOLDS, 2.0, 2.0)
    estimate = mean_estimate([0.1, 0.3, 0.2, 0.25])
    interval = estimate.interval_at(0.025)
    assert bound_status(estimate, interval.high, None, 0.025)[0] == OPEN
    assert bound_status(estimate, None, interval.low, 0.025)[0] == OPEN
    assert bound_status(estimate, math.nextafter(interval.high, math.inf), None, 0.025)[0] == FAILS
    assert bound_status(estimate, None, math.nextafter(interval.low, -math.inf), 0.025)[0] == FAILS


# -- what a schedule refuses says why; a power of one p is a number -------------------------------------

@pytest.mark.parametrize(("bad", "message"), [
    (dict(first=7, max_seeds=6), "first look 7 must lie in [1, max_seeds=6]"),
    (dict(first=3, max_seeds=6, batch=0), "batch must be at least 1, got 0"),
    (dict(first=3, max_seeds=6, spending="linear"), "spending 'linear' is not one of obrien_fleming, pocock"),
])
def test_a_schedule_it_cannot_run_is_refused_with_the_reason(bad, message):
    with pytest.raises(ValueError) as refused:
        Schedule(**bad)
    assert str(refused.value) == message


def test_the_mean_of_no_values_is_refused_with_the_reason():
    with pytest.raises(ValueError) as refused:
        mean_estimate([])
    assert str(refused.value) == "the mean of an empty sample"


def test_the_conditional_power_of_one_p_is_a_float_and_of_an_array_an_array():
    """What a claim's futility reads and summary.json writes: a Python float for one p-value."""
    power = conditional_power(0.3, 0.5, 0.01)
    assert type(power) is float and json.loads(json.dumps({"power": power}))["power"] == power
    assert type(conditional_power(0.3, 1.0, 0.01)) is float
    powers = conditional_power(np.array([0.3, 0.01]), 0.5, 0.01)
    assert isinstance(powers, np.ndarray) and powers.shape == (2,) and powers[0] == power


# -- a premise on a metric family reads the keys each side reported at its point -------------------------

FAMILY_METRICS = {"nmse": {"direction": "lower", "unit": "", "kind": "quality"}}


def test_a_family_premise_reads_the_keys_both_sides_reported_at_each_point_in_numeric_order():
    """``nmse`` names every ``nmse@<size>`` key. An arm premise reads the keys that arm reported at the point
    (nmse@64 before nmse@1024); a contrast premise only the keys both arms reported there: a key one arm
    reported elsewhere, or only the other arm reported, is no subject of it."""
    reported = {("treat", 1): (64, 256, 1024), ("control", 1): (64, 256, 4096),
                ("treat", 2): (64, 256, 4096), ("control", 2): (64, 256, 1024)}
    trials = [make_record(f"{arm}-{k}-{s}", arm, s, point={"k": k},
                          metrics={f"nmse@{size}": 0.1 + 0.01 * s + 0.001 * size for size in sizes})
              for (arm, k), sizes in reported.items() for s in range(3)]
    meta = {"suite": "prem", "profile": "default", "seeds": [0, 1, 2], "sweep": {"k": [1, 2]},
            "metrics": FAMILY_METRICS, "arms": {"treat": {"labels": ["treat"]}, "control": {"labels": ["control"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [], "sequential": None,
            "premises": [{"name": "small", "arm": "treat", "metric": "nmse", "at_most": 10.0},
                         {"name": "close", "contrast": "treat-vs-control", "metric": "nmse", "at_most": 10.0}]}
    run = index_results(Path("."), StoredSuite.from_stored(meta), trials)
    found = [(p.name, p.point, p.subject, p.key, p.n) for p in evaluate_premises(run)]
    assert found == [("small", "k=1", "treat", "nmse@64", 3), ("small", "k=1", "treat", "nmse@256", 3),
                     ("small", "k=1", "treat", "nmse@1024", 3),
                     ("small", "k=2", "treat", "nmse@64", 3), ("small", "k=2", "treat", "nmse@256", 3),
                     ("small", "k=2", "treat", "nmse@4096", 3),
                     ("close", "k=1", "treat-vs-control", "nmse@64", 3), ("close", "k=1", "treat-vs-control", "nmse@256", 3),
                     ("close", "k=2", "treat-vs-control", "nmse@64", 3), ("close", "k=2", "treat-vs-control", "nmse@256", 3)]


def test_an_exact_premise_missing_a_seed_stays_open_and_a_sampled_one_is_not_exact():
    """Bytes and counts hold only when every seed's value is within the bound: with a seed missing the premise
    is open, not held. A sampled metric's premise is written as not exact (false, not null)."""
    run = premises_run({"treat": {"peak_mib": [100.0, None, 100.0], "signal": [0.5, 0.6, 0.7]},
                        "control": {"peak_mib": [100.0] * 3, "signal": [0.5] * 3}},
                       [{"name": "fits", "arm": "treat", "metric": "peak_mib", "at_most": 103.0},
                        {"name": "seen", "arm": "treat", "metric": "signal", "at_least": 0.0}])
    fits, seen = evaluate_premises(run)
    assert fits.status == OPEN and fits.n == 2
    assert fits.text() == "premise fits not yet established: 100 (exact: 100), needs <= 103 (treat peak_mib)"
    assert seen.status == HOLDS and premise_json(seen)["exact"] is False


def test_a_sequential_runs_vacuous_claim_has_no_fixed_design_to_match():
    """A claim made vacuous by its reference (not established) was tested at no level: the design cost names
    no fixed design for it, and says so in its line."""
    seeds = list(range(6))
    treat = [0.5, 1.9, -0.2, 1.4, 0.1, 1.6]
    trials = [make_record(f"{arm}-{s}", arm, s, wall_seconds=2.0, metrics={"score": values[s]})
              for arm, values in (("treat", treat), ("control", [0.0] * 6)) for s in seeds]
    meta = {"suite": "core", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": RUN_METRICS,
            "arms": {"treat": {"labels": ["treat"]}, "control": {"labels": ["control"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [{"contrast": "treat-vs-control", "metric": "score", "test": "non_inferior", "margin": 0.1,
                        "reference": "treat-vs-control"}],
            "sequential": {"first": 3, "max_seeds": 12, "batch": 3, "spending": "obrien_fleming", "futility": 0.1},
            "premises": []}
    run = index_results(Path("."), StoredSuite.from_stored(meta), trials)
    (claim,) = evaluate_claims(run)
    assert claim.status == VACUOUS and claim.in_family and claim.level is None and claim.mean_estimate.sd > 0
    cost = design_cost(run, [claim])
    assert cost.fixed_seeds is None and "the fixed design" not in cost.line()


# -- the gate and the baseline file say what a reader needs ------------------------------------------------

def test_the_gate_fails_an_incomplete_run_and_says_so_even_with_every_trial_stored(tmp_path):
    (baseline,) = save_baselines([gated_folder(tmp_path / "reference", {"acc": 0.8})], tmp_path / "b")
    run_dir = gated_folder(tmp_path / "run", {"acc": 0.8})
    (run_dir / "run.incomplete").write_text("")  # the marker of a run that ended early, left behind
    result = gate(run_dir, baseline)
    assert result.incomplete.startswith(f"INCOMPLETE RUN: the run of {run_dir} started ")
    assert not result.passed and not result.missing_trials and "INCOMPLETE RUN" in result.render()


def test_a_saved_baseline_records_where_and_when_it_was_made(tmp_path, monkeypatch):
    """The moment of saving, in UTC to the second (the clock is fixed: no test compares with a running clock)."""
    from datetime import datetime, timezone

    import harness.gating.baseline as baseline_module

    class Fixed(datetime):
        @classmethod
        def now(cls, tz=None):  # as datetime.now: aware in tz when given one, the naive local time when not
            moment = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone.utc)
            return moment.astimezone(tz) if tz is not None else moment.astimezone().replace(tzinfo=None)

    monkeypatch.setattr(baseline_module, "datetime", Fixed)
    (baseline,) = save_baselines([gated_folder(tmp_path / "reference", {"acc": 0.8},
                                               environment={"git_commit": "abc123"})], tmp_path / "b")
    stored = json.loads(baseline.read_text())
    assert (stored["device_name"], stored["git_commit"]) == ("synthetic", "abc123")
    assert stored["created_at"] == "2026-01-02T03:04:05+00:00"


def test_a_file_that_is_not_a_baseline_of_this_schema_is_refused_by_name(tmp_path):
    from harness.gating.baseline import Baseline, load_baseline
    version = Baseline.stored_schema.version
    path = tmp_path / "b.json"
    for content in ([1, 2], {"schema": version + 1, "values": [{"check": "quality"}]}, {"schema": version}):
        path.write_text(json.dumps(content))
        with pytest.raises(GateError) as refused:
            load_baseline(path)
        assert str(refused.value) == f"{path} is not a harness baseline (schema {version})"


def test_a_baseline_whose_trials_name_another_seed_is_refused_with_the_reason(tmp_path):
    from harness.gating.baseline import load_baseline
    (baseline,) = save_baselines([gated_folder(tmp_path / "reference", {"acc": 0.8})], tmp_path / "b")
    stored = json.loads(baseline.read_text())
    stored["trials"][0]["seed"] = 7
    baseline.write_text(json.dumps(stored))
    with pytest.raises(GateError) as refused:
        load_baseline(baseline)
    assert str(refused.value) == (f"baseline {baseline} is malformed: trials: expected {{arm, point, seed}} entries "
                                  "with the baseline's seeds; save it again with `harness baseline save RESULTS`")


def test_a_baseline_keeps_a_lower_is_better_claims_bounds_on_its_better_side():
    run = arms_run({"treat": {"loss": [0.5, 0.45, 0.55]}, "control": {"loss": [1.0, 1.0, 1.0]}},
                   claims=[{"contrast": "treat-vs-control", "metric": "loss", "test": "superior", "margin": 0.2}])
    (entry,) = [v for v in baseline_values(run) if v.claim is not None]
    (claim,) = evaluate_claims(run)
    assert entry.claim.bounds == claim.test.decision_bounds(claim.claim, -1, 0.2) == (-0.2, -0.0)


def test_a_plan_names_its_suite_and_shows_a_pilot_effect_it_cannot_power():
    """A pilot claim at no effect (p = 0.5), on the wrong side, or without a p-value gets no seed count and no
    simulated power; its effect is shown as the pilot gave it."""
    pilots = [ClaimResult(spec("superior"), "treat-vs-control", "", key, INCONCLUSIVE, 4, 0.0, None, "",
                          p_value=p, in_family=True) for key, p in (("zero", 0.5), ("worse", 0.9), ("none", None))]
    plan = plan_suite("s", 0.95, {QUALITY_FAMILY: 3}, Schedule(6, 6), pilots)
    assert plan.render().startswith("== s: sampled claims per Holm family")
    worse = claim_test("superior").effect_in_sd(0.9, 4)
    assert worse < 0
    assert [(r.effect_in_sd, r.fixed_seeds, r.sequential) for r in plan.rows] == \
        [(0.0, None, None), (worse, None, None), (None, None, None)]


def test_a_pilot_claim_of_a_family_the_suite_no_longer_has_is_planned_alone_in_it(monkeypatch):
    """A pilot run may hold a claim of a family the suite's current claims do not fill (a timing claim since
    dropped): it is planned at the unadjusted level, as the only claim of its family."""
    from harness.analysis.decide import seed_planning
    from harness.analysis.decide.seed_planning import ClaimPlan
    levels: list[float] = []
    monkeypatch.setattr(seed_planning, "_row", lambda label, effect, level, design: levels.append(level) or
                        ClaimPlan(label, effect, None, None))
    pilot = ClaimResult(spec("superior"), "treat-vs-control", "", "seconds", INCONCLUSIVE, 6, 0.1, None, "",
                        p_value=0.01, in_family=True, family=TIMING_FAMILY)
    plan_suite("s", 0.95, {QUALITY_FAMILY: 2}, Schedule(6, 6), [pilot])
    assert levels == pytest.approx([0.025])


# -- futility of a claim with a reference contrast ----------------------------------------------------------

from harness.analysis.claim_status import FUTILE  # noqa: E402

def reference_run(values: dict[str, list[float]], claim: dict, sequential: dict):
    """A sequential run of arms new, old and base (``score`` by seed), contrasts new-vs-old and old-vs-base."""
    seeds = list(range(len(values["new"])))
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={"score": v[s]}) for arm, v in values.items() for s in seeds]
    meta = {"suite": "core", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": CLAIM_METRICS,
            "arms": {arm: {"labels": [arm]} for arm in values},
            "contrasts": [{"treatment": t, "control": c, "name": f"{t}-vs-{c}"} for t, c in (("new", "old"), ("old", "base"))],
            "claims": [claim], "sequential": sequential, "premises": []}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


NON_INFERIOR = {"contrast": "new-vs-old", "metric": "score", "test": "non_inferior", "margin": 0.1,
                "reference": "old-vs-base"}
ONLY_LOOK_5 = {"first": 3, "max_seeds": 6, "batch": 1, "spending": "obrien_fleming", "futility": 0.1,
               "futility_from": 0.8}  # looks 3, 4, 5, 6: only the look at 5 seeds may stop a claim as futile


def test_a_vacuous_claim_whose_reference_cannot_be_established_stops_as_futile_at_the_look_before_the_last():
    """The control does not beat base (old-vs-base near 0): the non-inferiority claim is vacuous, and at the look
    before the last its reference's conditional power to be established by the last look (at that look's level)
    is below the threshold: FUTILE, saying why."""
    base = [1.0, 1.2, 0.8, 1.1, 0.9, 1.0]
    old = [b + 0.15 + e for b, e in zip(base, [0.05, -0.1, 0.05, -0.05, 0.05, 0.0])]  # 0.15 over base: not beyond 0.1
    new = [v + 0.3 + 0.01 * i for i, v in enumerate(old)]
    run = reference_run({"new": new, "old": old, "base": base}, NON_INFERIOR, ONLY_LOOK_5)
    (claim,) = evaluate_claims(run)
    looks = (3, 4, 5, 6)
    final = nominal_levels(looks, claim_alpha(0.95), "obrien_fleming")[-1]
    power = conditional_power(claim.reference.p_value, 5 / 6, final)
    assert claim.status == FUTILE and claim.n == 5 and 0.01 < power < 0.1
    assert claim.detail == (f"futile: reference old-vs-base cannot be established by 6 seeds "
                            f"(conditional power {power:.2f} < 0.1)")


def test_a_claim_with_an_established_reference_is_futile_by_its_own_conditional_power():
    """The control beats base surely; the new arm sits at the margin's edge, so neither passing nor failing can
    plausibly be reached by the last look: FUTILE by the claim's own two conditional powers, at the look before
    the last, with the fraction of seeds that look has taken."""
    base = [0.0, 0.1, -0.1, 0.05, -0.05, 0.0]
    old = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    new = [0.95, 0.85, 0.9, 0.95, 0.85, 0.9]
    run = reference_run({"new": new, "old": old, "base": base}, NON_INFERIOR, ONLY_LOOK_5)
    (claim,) = evaluate_claims(run)
    assert claim.reference.established and claim.status == FUTILE and claim.n == 5
    final = nominal_levels((3, 4, 5, 6), claim.level, "obrien_fleming")[-1]
    to_pass, to_fail = (conditional_power(p, 5 / 6, final) for p in (claim.p_value, claim.p_fail))
    assert claim.detail.startswith(f"futile: conditional power to pass {to_pass:.2f} and to fail {to_fail:.2f} "
                                   "by 6 seeds (< 0.1); ")


def test_a_two_seed_positive_control_at_the_metric_ceiling_is_named_as_unable_to_fail():
    """Two seeds are enough to say every seed sits at the ceiling (a smoke run of an oracle)."""
    metrics = {"acc": {"direction": "higher", "unit": "fraction", "kind": "quality"}}
    arms = {"control": [0.40, 0.45], "oracle": [1.0, 1.0]}
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={"acc": v[s]}) for arm, v in arms.items() for s in (0, 1)]
    meta = {"suite": "ceiling", "profile": "default", "seeds": [0, 1], "sweep": {}, "metrics": metrics,
            "arms": {arm: {"labels": [arm]} for arm in arms},
            "contrasts": [{"treatment": "oracle", "control": "control", "name": "oracle-vs-control"}],
            "claims": [], "sequential": None, "premises": [],
            "validity": {"control": "control", "positive": "oracle", "metric": "acc"}}
    validity = evaluate_validity(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    assert [c.arm_label for c in validity.cannot_fail] == ["oracle"]
    (check,) = validity.checks
    assert check.reason == ("positive control 'oracle' beats 'control' on acc; it cannot fail: acc is at its ceiling "
                            "(1) on every seed, with no spread")


def test_a_futility_threshold_of_zero_never_stops_a_claim_even_at_no_conditional_power():
    """``futility: 0`` keeps every claim open to the last look: a reference surely worse than base (every seed
    the same: p = 1, conditional power 0.0 at an early look) leaves the claim vacuous, never futile."""
    base = [1.0, 1.2, 0.8]
    old = [v - 1.0 for v in base]
    new = [v + 0.3 + 0.01 * i for i, v in enumerate(old)]
    never = {"first": 3, "max_seeds": 100, "batch": 97, "spending": "obrien_fleming", "futility": 0.0}  # looks 3, 100
    (claim,) = evaluate_claims(reference_run({"new": new, "old": old, "base": base}, NON_INFERIOR, never))
    final = nominal_levels((3, 100), claim_alpha(0.95), "obrien_fleming")[-1]
    assert conditional_power(claim.reference.p_value, 3 / 100, final) == 0.0
    assert claim.status == VACUOUS


def validity_run(arms: dict[str, list], validity: dict, sweep: list | None = None):
    """Arms' ``acc`` by seed (None: the trial did not finish), at each sweep point ``k`` (the same values)."""
    metrics = {"acc": {"direction": "higher", "unit": "fraction", "kind": "quality"}}
    seeds = list(range(len(next(iter(arms.values())))))
    points = [{"k": k} for k in sweep] if sweep else [{}]
    trials = [make_record(f"{arm}-{s}-{i}", arm, s, point=point, metrics={"acc": v[s]})
              for arm, v in arms.items() for s in seeds for i, point in enumerate(points) if v[s] is not None]
    meta = {"suite": "valid", "profile": "default", "seeds": seeds, "sweep": {"k": sweep} if sweep else {},
            "metrics": metrics, "arms": {arm: {"labels": [arm]} for arm in arms},
            "contrasts": [{"treatment": arm, "control": "control", "name": f"{arm}-vs-control"}
                          for arm in arms if arm != "control"],
            "claims": [], "sequential": None, "premises": [], "validity": validity}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def test_validity_reasons_name_the_point_only_in_a_sweep_and_a_control_without_pairs():
    arms = {"control": [0.40, 0.45, 0.42, 0.50], "strong": [0.90, 0.95, 0.92, 0.99], "gone": [None] * 4}
    validity = {"control": "control", "positive": "gone", "negative": "strong", "metric": "acc"}
    plain = evaluate_validity(validity_run(arms, validity))
    assert sorted(c.reason for c in plain.checks) == ["negative control 'strong' beats 'control' on acc",
                                                      "positive control 'gone' has no finished pair with 'control' on acc"]
    (gone,) = [c for c in plain.checks if c.arm_label == "gone"]
    assert (gone.role, gone.arm_label, gone.point) == ("positive", "gone", "")
    assert gone.ok is False and gone.difference is None and gone.beats_control is None
    swept = evaluate_validity(validity_run(arms, validity, sweep=[1, 2]))
    assert sorted(c.reason for c in swept.checks) == [
        "negative control 'strong' beats 'control' on acc at k=1", "negative control 'strong' beats 'control' on acc at k=2",
        "positive control 'gone' has no finished pair with 'control' on acc at k=1",
        "positive control 'gone' has no finished pair with 'control' on acc at k=2"]
    assert sorted((c.role, c.arm_label, c.point) for c in swept.checks if c.arm_label == "gone") == \
        [("positive", "gone", "k=1"), ("positive", "gone", "k=2")]
    lone = evaluate_validity(validity_run({"control": [0.40, 0.45, 0.42, 0.50], "lone": [0.9, None, None, None]},
                                          {"control": "control", "positive": "lone", "metric": "acc"}))
    (check,) = lone.checks
    assert (check.beats_control, check.ok, check.difference.n) == (None, None, 1)
    assert check.reason == ("positive control 'lone' cannot be shown to beat or not beat (n=1, insufficient pairs) "
                            "'control' on acc")


def test_a_negative_control_identical_to_the_control_does_not_beat_it():
    """A difference of exactly 0 on every seed (its interval the point 0) is not better: the negative control
    passes."""
    same = [0.40, 0.45, 0.42, 0.50]
    result = evaluate_validity(validity_run({"control": same, "twin": list(same)},
                                            {"control": "control", "negative": "twin", "metric": "acc"}))
    (check,) = result.checks
    assert check.beats_control is False and check.ok is True and check.point == "" and check.difference.n == 4
    assert check.reason == "negative control 'twin' does not beat 'control' on acc"
    as_positive = evaluate_validity(validity_run({"control": same, "twin": list(same)},
                                                 {"control": "control", "positive": "twin", "metric": "acc"}))
    (check,) = as_positive.checks  # nor is it short of beating: its interval does not reach the better side
    assert check.beats_control is False and check.ok is False
    assert check.reason == "positive control 'twin' does not beat 'control' on acc"


def test_a_claim_is_futile_only_below_its_power_to_reach_the_last_looks_level():
    """The conditional power that stops a claim is the chance to reach the *last* look's level: with the
    threshold just below it the claim goes on to the last look, just above it the claim stops."""
    base = [0.0, 0.1, -0.1, 0.05, -0.05, 0.0]
    new = [0.95, 0.85, 0.9, 0.95, 0.85, 0.9]
    values = {"new": new, "old": [1.0] * 6, "base": base}
    (first,) = evaluate_claims(reference_run(values, NON_INFERIOR, ONLY_LOOK_5))
    final = nominal_levels((3, 4, 5, 6), first.level, "obrien_fleming")[-1]
    best = max(conditional_power(p, 5 / 6, final) for p in (first.p_value, first.p_fail))
    assert 0 < best < 0.1
    (kept,) = evaluate_claims(reference_run(values, NON_INFERIOR, dict(ONLY_LOOK_5, futility=best * 0.999)))
    assert kept.status != FUTILE and kept.n == 6
    (stopped,) = evaluate_claims(reference_run(values, NON_INFERIOR, dict(ONLY_LOOK_5, futility=best * 1.001)))
    assert stopped.status == FUTILE and stopped.n == 5


def test_a_too_weak_positive_control_is_checked_at_every_sweep_point():
    """A control too weak at one point is still checked (and named) at the next."""
    differences = (0.003, -0.002, 0.0025, -0.001, 0.0015, 0.0)
    arms = {"control": LOSS_CONTROL, "treat": LOSS_CONTROL,
            "positive": [c + d for c, d in zip(LOSS_CONTROL, differences)]}
    trials = [make_record(f"{a}-{s}-{k}", a, s, point={"k": k}, metrics={"loss": v[s]})
              for a, v in arms.items() for s in range(6) for k in (1, 2)]
    meta = {"suite": "weak", "profile": "default", "seeds": list(range(6)), "sweep": {"k": [1, 2]},
            "metrics": CLAIM_METRICS, "arms": {a: {"labels": [a]} for a in arms},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [{"contrast": "treat-vs-control", "metric": "loss", "test": "superior"}],
            "sequential": {"first": 3, "max_seeds": 12, "futility": 0.1}, "premises": [],
            "validity": {"control": "control", "positive": "positive", "metric": "loss"}}
    validity = evaluate_validity(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    assert [(c.point, c.ok, bool(c.too_weak)) for c in validity.checks] == [("k=1", False, True), ("k=2", False, True)]


def test_a_positive_control_not_yet_shown_to_beat_says_its_interval_reaches_the_better_side():
    arms = {"control": [0.40, 0.45, 0.42, 0.50], "mid": [0.45, 0.43, 0.47, 0.49]}
    (check,) = evaluate_validity(validity_run(arms, {"control": "control", "positive": "mid", "metric": "acc"})).checks
    assert (check.beats_control, check.ok) == (False, None)
    assert check.reason == ("positive control 'mid' is not yet shown to beat (n=4, interval reaches the better side) "
                            "'control' on acc")


def test_a_claim_that_favours_neither_arm_adds_nothing_to_its_result():
    (undecided,) = evaluate_claims(run_of([0.1, -0.1, 0.05]))
    assert undecided.status == INCONCLUSIVE and undecided.favours("treat") == "" and undecided.favours(None) == ""
    (passed,) = evaluate_claims(run_of([1.0, 1.2, 0.9, 1.1]))
    assert passed.status == PASS and passed.favours("treat") == "for treat" and passed.favours("other") == ""


# -- the sign-flip check of a t decision, at the edges where it can just reach the level ------------------

def one_sided(values: list[float], confidence: float, test: str = "superior", **claim) -> ClaimResult:
    """The one claim ``test`` on score (higher is better) of a run whose treat-minus-control differences are ``values``."""
    run = claims_run({"score": values}, {"score": [0.0] * len(values)},
                     [{"contrast": "treat-vs-control", "metric": "score", "test": test, **claim}], confidence=confidence)
    (result,) = evaluate_claims(run)
    return result


def test_at_a_level_of_exactly_one_in_two_to_the_n_the_sign_flip_test_confirms_only_every_pair_beyond():
    """Confidence 0.875 reads claims at one-sided 1/16, the smallest sign-flip p four pairs can give: a t pass
    stands when all four pairs lie beyond the bound (sign-flip p = 1/16, the level itself), and is blocked as
    skewed when one pair lies on the other side (sign-flip p = 2/16), though t alone would pass it."""
    beyond = one_sided([1.0, 1.1, 0.9, 1.2], confidence=0.875)
    assert (beyond.level, beyond.p_flip) == (0.0625, 0.0625)
    assert beyond.status == PASS and not beyond.skew_blocked
    one_short = one_sided([1.0, 1.1, 0.9, -0.05], confidence=0.875)
    assert one_short.level == 0.0625 and one_short.p_value < 0.0625 and one_short.p_flip == 0.125
    assert one_short.status == INCONCLUSIVE and one_short.skew_blocked
    assert one_short.result_text.startswith("INCONCLUSIVE (skewed: sample skewness -1.86; t alone would decide")


def test_a_difference_exactly_at_a_superiority_margin_on_every_seed_is_short_of_it_at_any_seed_count():
    """Every pair exactly 0.5 better against a margin of 0.5: no sampling error, so the exact tie decides
    (a tie is not beyond a strict bound) even where the sign-flip test, all its patterns tied, could never
    reach the level with six pairs."""
    tie = one_sided([0.5] * 6, confidence=0.95, margin=0.5)
    assert (tie.p_value, tie.p_fail, tie.p_flip_fail) == (1.0, 0.0, 1.0)
    assert tie.status == SHORT and not tie.skew_blocked
    assert tie.result_text == "SHORT OF MARGIN (better, by less than 0.5)"


def test_a_ratio_claim_which_has_no_sign_flip_check_is_decided_by_its_t_test_alone():
    """Six unequal ratios near 2 against a minimum of 1.5, enough pairs for a sign-flip test to reach 0.025:
    the ratio claim carries none, and passes on its t test."""
    run = claims_run({"score": [2.0, 2.2, 1.9, 2.1, 2.05, 1.95]}, {"score": [1.0] * 6}, [ratio_claim("score", min=1.5)])
    (result,) = evaluate_claims(run)
    assert result.p_flip is None and result.mean_estimate.sd > 0 and result.p_value < 0.025
    assert result.status == PASS and not result.skew_blocked


def test_an_equal_claim_favours_neither_arm_even_in_a_suite_that_names_its_mechanism():
    """An exact check (equal bytes) passes or fails without saying the mechanism arm is better or worse."""
    for treat_bytes, status in (([4.0, 4.0, 4.0], PASS), ([4.0, 5.0, 4.0], FAIL)):
        run = claims_run({"score": [1.0, 1.2, 0.9], "bytes": treat_bytes}, {"score": [0.0] * 3, "bytes": [4.0] * 3},
                         [{"contrast": "treat-vs-control", "metric": "bytes", "test": "equal"}])
        (result,) = evaluate_claims(run)
        assert (result.status, result.treatment_arm) == (status, "treat")
        assert result.polarity("treat") == "" and result.favours("treat") == ""
        assert result.favours("control") == ""


# -- the exploratory verdicts' margins: by key, then by the key's metric family ---------------------------

from harness.analysis.decide import verdicts  # noqa: E402


def nmse_rows(margins: dict[str, float]) -> dict[str, verdicts.ContrastRow]:
    """The contrast rows of a run reporting nmse@1024 and nmse@4096 (lower is better), treat within 0.02 of
    control on every seed, under a contrast declaring ``margins``."""
    differences = [0.01, -0.02, 0.015, -0.005]
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={key: 1.0 + (d if arm == "treat" else 0.0)
                                                         for key in ("nmse@1024", "nmse@4096")})
              for arm in ("treat", "control") for s, d in enumerate(differences)]
    meta = {"suite": "core", "profile": "default", "seeds": list(range(4)), "sweep": {},
            "metrics": {"nmse": {"direction": "lower", "unit": "", "kind": "quality"},
                        "loss": {"direction": "lower", "unit": "", "kind": "quality"}},
            "arms": {"treat": {"labels": ["treat"]}, "control": {"labels": ["control"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control", "margins": margins}],
            "claims": [], "sequential": None, "premises": []}
    rows = verdicts.evaluate_contrasts(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    return {row.key: row for row in rows}


def test_a_margin_declared_for_a_metric_family_applies_to_each_of_its_keys_unless_a_key_has_its_own():
    rows = nmse_rows({"nmse": 0.5, "nmse@4096": 0.0})
    assert (rows["nmse@1024"].margin, rows["nmse@1024"].verdict) == (0.5, verdicts.EQUIVALENT)
    assert (rows["nmse@4096"].margin, rows["nmse@4096"].verdict) == (0.0, verdicts.INCONCLUSIVE)


def test_without_a_declared_margin_a_small_difference_is_inconclusive_not_equivalent():
    for margins in ({}, {"loss": 0.5}):
        rows = nmse_rows(margins)
        assert [(row.margin, row.verdict) for row in rows.values()] == [(0.0, verdicts.INCONCLUSIVE)] * 2
