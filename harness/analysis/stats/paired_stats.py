"""Paired statistics with honest coverage at small n: Student-t intervals, an exact sign-flip check,
multiplicity adjustments and the power of the test.

Treatment and control share seed, data and order, so their per-seed difference removes the
seed-to-seed variation both arms have in common. With the 3–10 seeds a suite affords, a percentile
bootstrap of the mean difference under-covers badly (at n = 3 it is the min–max of the three
differences, ~75% coverage), so the verdict rule is the Student-t interval of the mean paired
difference, which is exact under normal differences at every n >= 2. The exact sign-flip
permutation test is reported beside it as a distribution-free check; it can only reach a two-sided
5% level from 6 pairs on (its smallest p-value is 2 / 2**n).

Whatever a well-kept library computes comes from it: the t distribution, t intervals and the sign-flip
permutation test from scipy.stats, Holm, Benjamini–Hochberg and the t test's power from statsmodels
(tests/test_library_statistics.py holds each to the library on random inputs); the calibration tests
hold them to published tables and to simulation all the same.
"""
from __future__ import annotations

import gc
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np
import scipy.optimize
import scipy.stats
from statsmodels.stats import multitest
from statsmodels.stats.power import TTestPower

CONFIDENCE = 0.95
METHOD = "paired Student-t"
MIN_PAIRS = 2  # a t interval needs one degree of freedom
POWER = 0.80  # for the minimum detectable effect
EXACT_PERMUTATION_MAX_PAIRS = 16  # 2**16 sign patterns; beyond that a seeded Monte Carlo sample
PERMUTATION_SAMPLES = 20_000  # beyond the exact limit (the smallest p is then 1 / (PERMUTATION_SAMPLES + 1))
PERMUTATION_SEED = 20_240_601


# -- the t distribution -------------------------------------------------------------------------

def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    return float(scipy.stats.t.sf(t, df))


def critical_t(level: float, n: int) -> float:
    """The t value a one-sided test at nominal ``level`` with n pairs must reach (the upper tail's inverse:
    at an early look's level, 1e-15, ``ppf(1 - level)`` would have lost most of its digits)."""
    return float(scipy.stats.t.isf(level, n - 1))


def t_power(effect_in_sd: float, n: int, alpha: float) -> float:
    """Power of the one-sided paired t test at ``alpha`` with n pairs when the true mean difference is
    ``effect_in_sd`` standard deviations (statsmodels' TTestPower: the noncentral t at its own critical value)."""
    return float(TTestPower().power(effect_in_sd, n, alpha, alternative="larger"))


def minimum_detectable_effect(sd: float, n: int, alpha: float, power: float = POWER) -> float | None:
    """Smallest true mean difference a one-sided paired t test at level alpha finds with the given power.

    None below MIN_PAIRS; 0 when the differences do not vary (a deterministic quantity).
    """
    if n < MIN_PAIRS or not math.isfinite(sd):
        return None
    if sd == 0:
        return 0.0
    return detectable_effect(n, alpha, power) * sd


@lru_cache(maxsize=4096)
def detectable_effect(n: int, alpha: float, power: float) -> float:
    """The effect (in sd of the differences) at which the t test reaches ``power``: a property of the design,
    not of the data, so each is found once per process. A sequential run re-analyses every earlier look at
    each new one, and at an early look's tiny level (a claim settled at look 1 of 22: level 2e-15 at 3
    seeds) the noncentral t converges slowly: 25 s a time, which was most of such a run's wall time."""
    high = 1.0
    while t_power(high, n, alpha) < power:
        high *= 2.0
    return scipy.optimize.brentq(lambda d: t_power(d, n, alpha) - power, 0.0, high, xtol=1e-12)


# -- samples and pairs ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class MeanEstimate:
    """A sample mean with its t interval and test against zero; ``interval`` is None below MIN_PAIRS."""

    n: int
    mean: float
    sd: float | None
    interval: Interval | None
    p_value: float | None  # two-sided, H0: true mean = 0
    confidence: float

    @property
    def insufficient(self) -> bool:
        return self.interval is None

    @property
    def standard_error(self) -> float | None:
        return None if self.sd is None else self.sd / math.sqrt(self.n)

    def interval_at(self, level: float) -> Interval:
        """The two-sided interval with ``level`` in each tail (a point for a deterministic quantity):
        what a one-sided test at ``level`` reads, on either side. Not scipy's ``confidence_interval``:
        it inverts ``1 - level``, which keeps few digits at a sequential look's nominal level (1e-9 and below)."""
        half = critical_t(level, self.n) * (self.standard_error or 0.0)
        return Interval(self.mean - half, self.mean + half)

    def p_above(self, bound: float) -> float | None:
        """One-sided p of H0: true mean <= bound (small when the mean is surely above it)."""
        return self._one_sided(bound, +1)

    def p_below(self, bound: float) -> float | None:
        """One-sided p of H0: true mean >= bound."""
        return self._one_sided(bound, -1)

    def _one_sided(self, bound: float, sign: int) -> float | None:
        if self.insufficient:
            return None
        se = self.standard_error or 0.0
        gap = sign * (self.mean - bound)
        if se == 0.0:  # a deterministic quantity: the bound is met or not (boundaries are inclusive)
            return 0.0 if gap >= 0 else 1.0
        return t_sf(gap / se, self.n - 1)


def mean_estimate(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanEstimate:
    """Mean, sd and the Student-t interval of the mean of finite values (at least one)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("the mean of an empty sample")
    mean = float(data.mean())
    if data.size < MIN_PAIRS:
        return MeanEstimate(int(data.size), mean, None, None, None, confidence)
    sd = float(data.std(ddof=1))
    if sd == 0.0:  # a deterministic quantity: scipy's t test divides by its zero spread
        return MeanEstimate(int(data.size), mean, sd, Interval(mean, mean), 1.0 if mean == 0.0 else 0.0, confidence)
    with warnings.catch_warnings():  # nearly equal values: scipy warns of the cancellation the t test survives
        warnings.simplefilter("ignore", RuntimeWarning)
        test = scipy.stats.ttest_1samp(data, 0.0)
        interval = test.confidence_interval(confidence)
    return MeanEstimate(int(data.size), mean, sd, Interval(float(interval.low), float(interval.high)),
                        float(test.pvalue), confidence)


def sign_flip_p_value(differences: Sequence[float]) -> float | None:
    """Two-sided exact sign-flip permutation p of H0: differences symmetric about 0 (the patterns whose
    |mean| reaches the observed one, the observed pattern included)."""
    data = np.asarray(differences, dtype=np.float64)
    if data.size == 0:
        return None
    return _sign_flip(data, lambda x, axis: np.abs(np.mean(x, axis=axis)))


def sign_flip_p_beyond(values: Sequence[float], bound: float, side: int) -> float | None:
    """One-sided sign-flip permutation p of H0: the values are symmetric about ``bound``, against a
    centre beyond it on ``side`` (+1: above, -1: below). The claim's own hypothesis at its own bound,
    with no normality assumed: the check the t test's decision must pass where these pairs can reach
    the level (``smallest_one_sided_sign_flip_p``)."""
    data = side * (np.asarray(values, dtype=np.float64) - bound)
    if data.size == 0:
        return None
    return _sign_flip(data, lambda x, axis: np.mean(x, axis=axis))


def _sign_flip(data: np.ndarray, statistic: Callable[..., np.ndarray]) -> float:
    """scipy's permutation test of one sample's signs (``permutation_type='samples'``), large statistics
    significant: every sign pattern up to EXACT_PERMUTATION_MAX_PAIRS pairs (so the p-value is the exact
    one), a seeded sample of PERMUTATION_SAMPLES patterns beyond."""
    if data.size == 1:  # scipy needs two observations; one value's two patterns are itself and its negative
        flipped = statistic(np.stack([data, -data]), axis=-1)
        return float(np.mean(flipped >= flipped[0]))
    exact = data.size <= EXACT_PERMUTATION_MAX_PAIRS
    result = scipy.stats.permutation_test(
        (data,), statistic, permutation_type="samples", vectorized=True, alternative="greater",
        n_resamples=2**data.size if exact else PERMUTATION_SAMPLES, rng=np.random.default_rng(PERMUTATION_SEED))
    return float(result.pvalue)


def smallest_one_sided_sign_flip_p(n: int) -> float:
    """The smallest one-sided p-value the sign-flip test can give with n pairs (its pattern sample's
    resolution beyond the exact limit)."""
    if n == 0:
        return 1.0
    return 1.0 / 2.0**n if n <= EXACT_PERMUTATION_MAX_PAIRS else 1.0 / (PERMUTATION_SAMPLES + 1)


def smallest_sign_flip_p(n: int) -> float:
    """The smallest two-sided p-value the sign-flip test can give with n pairs."""
    return 1.0 if n == 0 else min(1.0, 2.0 / 2.0**n)


@dataclass(frozen=True)
class PairedDifference:
    """Treatment minus control over the seeds both arms finished with finite values, for one key."""

    pair_keys: tuple[Hashable, ...]
    treatment: tuple[float, ...]
    control: tuple[float, ...]
    differences: tuple[float, ...]
    estimate: MeanEstimate
    relative_change: float | None
    sign_flip_p: float | None
    dropped: tuple[Hashable, ...]  # expected pairs with a missing or non-finite value on either side

    @property
    def n(self) -> int:
        return len(self.differences)

    @property
    def mean_difference(self) -> float:
        return self.estimate.mean

    @property
    def interval(self) -> Interval | None:
        return self.estimate.interval

    @property
    def insufficient(self) -> bool:
        return self.estimate.insufficient

    @property
    def t_only(self) -> bool:
        """The t test and the distribution-free sign-flip test disagree: the t interval excludes 0 at the
        confidence level, the sign-flip test could reach that level with these pairs and does not. Seen
        with heavy-tailed per-seed differences (one seed far from the rest), where the t test is not exact."""
        estimate = self.estimate
        if estimate.p_value is None or self.sign_flip_p is None:
            return False
        level = 1.0 - estimate.confidence
        return estimate.p_value <= level and smallest_sign_flip_p(self.n) <= level < self.sign_flip_p

    @property
    def treatment_mean(self) -> float:
        return float(np.mean(self.treatment))

    @property
    def control_mean(self) -> float:
        return float(np.mean(self.control))


def pair_values(
    treatment: Mapping[Hashable, float], control: Mapping[Hashable, float]
) -> tuple[tuple[Hashable, ...], np.ndarray, np.ndarray]:
    """Values present and finite on both sides, in a stable order of their pairing keys."""
    keys = sorted(
        (key for key in treatment.keys() & control.keys() if _finite(treatment[key]) and _finite(control[key])),
        key=repr,
    )
    return (
        tuple(keys),
        np.array([treatment[k] for k in keys], dtype=np.float64),
        np.array([control[k] for k in keys], dtype=np.float64),
    )


def paired_difference(
    treatment: Mapping[Hashable, float],
    control: Mapping[Hashable, float],
    confidence: float = CONFIDENCE,
    expected: Sequence[Hashable] = (),
) -> PairedDifference | None:
    """Per-pair treatment minus control with its t interval and sign-flip check; None without pairs.

    ``expected`` are the pairing keys the run was meant to have (its seeds): any of them, or any
    key either side reported, that did not make a finite pair is counted as dropped.
    """
    keys, treated, controlled = pair_values(treatment, control)
    if not keys:
        return None
    differences = treated - controlled
    estimate = mean_estimate(differences, confidence)
    control_mean = float(controlled.mean())
    wanted = set(expected) | set(treatment) | set(control)
    return PairedDifference(
        pair_keys=keys,
        treatment=tuple(float(v) for v in treated),
        control=tuple(float(v) for v in controlled),
        differences=tuple(float(v) for v in differences),
        estimate=estimate,
        relative_change=estimate.mean / abs(control_mean) if control_mean != 0 else None,
        sign_flip_p=sign_flip_p_value(differences),
        dropped=tuple(sorted(wanted - set(keys), key=repr)),
    )


@dataclass(frozen=True)
class SampleSummary:
    """One arm's values of one metric over seeds; a single value gives a point interval (no bar)."""

    values: tuple[float, ...]
    mean: float
    sd: float | None
    interval: Interval

    @property
    def n(self) -> int:
        return len(self.values)


def summarize(values: Sequence[float], confidence: float = CONFIDENCE) -> SampleSummary | None:
    """Mean, sample standard deviation (None for one value) and t interval of the finite values."""
    finite = [float(v) for v in values if _finite(v)]
    if not finite:
        return None
    estimate = mean_estimate(finite, confidence)
    interval = estimate.interval or Interval(estimate.mean, estimate.mean)
    return SampleSummary(tuple(finite), estimate.mean, estimate.sd, interval)


# -- multiplicity ----------------------------------------------------------------------------------

def _no_collection(*_: object) -> int:
    return 0


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (statsmodels): family-wise error control for the primary claims."""
    return _adjusted(p_values, "holm")


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg q-values (statsmodels): the false discovery rate of the exploratory rows."""
    return _adjusted(p_values, "fdr_bh")


def _adjusted(p_values: Sequence[float], method: str) -> list[float]:
    """statsmodels' adjusted p-values. Its Holm branch calls ``gc.collect()`` on every call (to free an array it
    just deleted): a full collection that costs tens to hundreds of milliseconds in a process holding torch,
    paid for every family at every look; for the call's length it is a no-op (the values do not depend on it,
    and the collector still runs on its own)."""
    if not p_values:  # statsmodels refuses an empty family
        return []
    collect, gc.collect = gc.collect, _no_collection
    try:
        adjusted = multitest.multipletests(np.asarray(p_values, dtype=np.float64), method=method)[1]
    finally:
        gc.collect = collect
    return [float(p) for p in adjusted]


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- unpaired samples ------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnpairedDifference:
    """Mean of one sample minus the mean of another drawn on different seeds (Welch's t interval).

    ``interval`` is None unless both samples have MIN_PAIRS values; ``df`` is the
    Welch–Satterthwaite degrees of freedom.
    """

    treatment: tuple[float, ...]
    control: tuple[float, ...]
    mean_difference: float
    interval: Interval | None
    p_value: float | None
    df: float | None
    confidence: float


def welch_difference(
    treatment: Sequence[float], control: Sequence[float], confidence: float = CONFIDENCE
) -> UnpairedDifference | None:
    """Treatment minus control of independent samples; None when either has no finite value."""
    treated = np.array([v for v in treatment if _finite(v)], dtype=np.float64)
    controlled = np.array([v for v in control if _finite(v)], dtype=np.float64)
    if treated.size == 0 or controlled.size == 0:
        return None
    difference = float(treated.mean() - controlled.mean())
    values = (tuple(float(v) for v in treated), tuple(float(v) for v in controlled))
    if treated.size < MIN_PAIRS or controlled.size < MIN_PAIRS:
        return UnpairedDifference(*values, difference, None, None, None, confidence)
    if treated.var() == 0.0 and controlled.var() == 0.0:  # both samples constant: the difference is exact
        df = float(treated.size + controlled.size - 2)
        p_value = 1.0 if difference == 0.0 else 0.0
        return UnpairedDifference(*values, difference, Interval(difference, difference), p_value, df, confidence)
    with warnings.catch_warnings():  # as in mean_estimate
        warnings.simplefilter("ignore", RuntimeWarning)
        test = scipy.stats.ttest_ind(treated, controlled, equal_var=False)
        interval = test.confidence_interval(confidence)
    return UnpairedDifference(*values, difference, Interval(float(interval.low), float(interval.high)),
                              float(test.pvalue), float(test.df), confidence)
