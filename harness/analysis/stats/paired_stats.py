"""Paired statistics with honest coverage at small n: Student-t intervals, an exact sign-flip check,
multiplicity adjustments and the power of the test.

Treatment and control share seed, data and order, so their per-seed difference removes the
seed-to-seed variation both arms have in common. With the 3–10 seeds a suite affords, a percentile
bootstrap of the mean difference under-covers badly (at n = 3 it is the min–max of the three
differences, ~75% coverage), so the verdict rule is the Student-t interval of the mean paired
difference, which is exact under normal differences at every n >= 2. The exact sign-flip
permutation test is reported beside it as a distribution-free check; it can only reach a two-sided
5% level from 6 pairs on (its smallest p-value is 2 / 2**n).

The t and noncentral-t distributions come from scipy.stats, the reference implementation; the
calibration tests hold them to published tables and to simulation all the same.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Mapping, Sequence

import numpy as np
import scipy.optimize
import scipy.stats

CONFIDENCE = 0.95
METHOD = "paired Student-t"
MIN_PAIRS = 2  # a t interval needs one degree of freedom
POWER = 0.80  # for the minimum detectable effect
EXACT_PERMUTATION_MAX_PAIRS = 16  # 2**16 sign patterns; beyond that a seeded Monte Carlo sample
PERMUTATION_SAMPLES = 20_000
PERMUTATION_SEED = 20_240_601


# -- the t distribution -------------------------------------------------------------------------

def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    return float(scipy.stats.t.sf(t, df))


def critical_t(level: float, n: int) -> float:
    """The t value a one-sided test at nominal ``level`` with n pairs must reach."""
    return float(scipy.stats.t.isf(level, n - 1))


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p (cached: an analysis asks for the same few thousands of times)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile probability must lie in (0, 1), got {p}")
    return float(scipy.stats.t.ppf(p, df))


def t_test_power(shift: float, df: int, critical: float, sided: int = 2) -> float:
    """Power of a t test whose statistic is noncentral t(df, shift) against the critical value;
    ``sided=1`` rejects only for T > c."""
    upper = float(scipy.stats.nct.sf(critical, df, shift))
    if sided == 1:
        return upper
    return upper + float(scipy.stats.nct.cdf(-critical, df, shift))


def minimum_detectable_effect(
    sd: float, n: int, alpha: float, power: float = POWER, sided: int = 2
) -> float | None:
    """Smallest true mean difference a paired t test at level alpha finds with the given power.

    None below MIN_PAIRS; 0 when the differences do not vary (a deterministic quantity).
    """
    if n < MIN_PAIRS or not math.isfinite(sd):
        return None
    if sd == 0:
        return 0.0
    return detectable_shift(n - 1, alpha, power, sided) * sd / math.sqrt(n)


@lru_cache(maxsize=4096)
def detectable_shift(df: int, alpha: float, power: float, sided: int) -> float:
    """The noncentrality at which the t test reaches ``power``: a property of the design, not of the data,
    so each is found once per process. A sequential run re-analyses every earlier look at each new one,
    and at an early look's tiny level (a claim settled at look 1 of 22: level 2e-15 at 3 seeds) the
    noncentral t converges slowly: 25 s a time, which was most of such a run's wall time."""
    critical = t_quantile(1.0 - alpha / sided, df)
    high = 1.0
    while t_test_power(high, df, critical, sided) < power:
        high *= 2.0
    return scipy.optimize.brentq(lambda s: t_test_power(s, df, critical, sided) - power, 0.0, high, xtol=1e-12)


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
        what a one-sided test at ``level`` reads, on either side."""
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
    se = sd / math.sqrt(data.size)
    half = t_quantile(0.5 + confidence / 2.0, data.size - 1) * se
    if se == 0.0:
        p_value = 1.0 if mean == 0.0 else 0.0
    else:
        p_value = min(1.0, 2.0 * t_sf(abs(mean) / se, data.size - 1))
    return MeanEstimate(int(data.size), mean, sd, Interval(mean - half, mean + half), p_value, confidence)


def sign_flip_p_value(differences: Sequence[float]) -> float | None:
    """Two-sided exact sign-flip permutation p of H0: differences symmetric about 0.

    Every sign pattern up to EXACT_PERMUTATION_MAX_PAIRS pairs, a seeded sample beyond. Counts
    patterns whose |mean| reaches the observed one, the observed pattern included.
    """
    data = np.asarray(differences, dtype=np.float64)
    if data.size == 0:
        return None
    observed = abs(data.mean())
    means = np.abs(_sign_patterns(data.size) @ data) / data.size
    return float(np.mean(means >= observed * (1.0 - 1e-12) - 1e-300))


@lru_cache(maxsize=32)
def _sign_patterns(n: int) -> np.ndarray:
    """Every sign pattern of n pairs, or a seeded sample of them (the identity first) beyond the limit."""
    if n <= EXACT_PERMUTATION_MAX_PAIRS:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    signs = np.random.default_rng(PERMUTATION_SEED).choice((1.0, -1.0), size=(PERMUTATION_SAMPLES, n))
    signs[0] = 1.0
    return signs


def sign_flip_p_beyond(values: Sequence[float], bound: float, side: int) -> float | None:
    """One-sided sign-flip permutation p of H0: the values are symmetric about ``bound``, against a
    centre beyond it on ``side`` (+1: above, -1: below). The claim's own hypothesis at its own bound,
    with no normality assumed: the check the t test's decision must pass where these pairs can reach
    the level (``smallest_one_sided_sign_flip_p``)."""
    data = side * (np.asarray(values, dtype=np.float64) - bound)
    if data.size == 0:
        return None
    observed = data.sum()
    sums = _sign_patterns(data.size) @ data
    return float(np.mean(sums >= observed - 1e-12 * abs(observed) - 1e-300))


def smallest_one_sided_sign_flip_p(n: int) -> float:
    """The smallest one-sided p-value the sign-flip test can give with n pairs (its pattern sample's
    resolution beyond the exact limit)."""
    if n == 0:
        return 1.0
    return 1.0 / 2.0**n if n <= EXACT_PERMUTATION_MAX_PAIRS else 1.0 / PERMUTATION_SAMPLES


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

def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: family-wise error control for the primary claims."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    m = len(p_values)
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg q-values: the false discovery rate of the exploratory rows."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i], reverse=True)
    adjusted = [0.0] * m
    running = 1.0
    for position, index in enumerate(order):
        rank = m - position
        running = min(running, p_values[index] * m / rank)
        adjusted[index] = min(1.0, running)
    return adjusted


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
    var_t = float(treated.var(ddof=1)) / treated.size
    var_c = float(controlled.var(ddof=1)) / controlled.size
    se = math.sqrt(var_t + var_c)
    if se == 0.0:  # both samples constant: the difference is exact
        p_value = 1.0 if difference == 0.0 else 0.0
        df = float(treated.size + controlled.size - 2)
        return UnpairedDifference(*values, difference, Interval(difference, difference), p_value, df, confidence)
    df = (var_t + var_c) ** 2 / (var_t**2 / (treated.size - 1) + var_c**2 / (controlled.size - 1))
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    p_value = min(1.0, 2.0 * t_sf(abs(difference) / se, df))
    return UnpairedDifference(*values, difference, Interval(difference - half, difference + half), p_value, df, confidence)
