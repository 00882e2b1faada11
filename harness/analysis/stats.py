"""Paired statistics with honest coverage at small n: Student-t intervals, an exact sign-flip check,
multiplicity adjustments and the power of the test.

Treatment and control share seed, data and order, so their per-seed difference removes the
seed-to-seed variation both arms have in common. With the 3–10 seeds a suite affords, a percentile
bootstrap of the mean difference under-covers badly (at n = 3 it is the min–max of the three
differences, ~75% coverage), so the verdict rule is the Student-t interval of the mean paired
difference, which is exact under normal differences at every n >= 2. The exact sign-flip
permutation test is reported beside it as a distribution-free check; it can only reach a two-sided
5% level from 6 pairs on (its smallest p-value is 2 / 2**n).

numpy has no t distribution and the project does not depend on scipy, so the few special functions
needed (regularised incomplete beta, t CDF and quantile, noncentral-t power) are implemented here
and checked against published tables and simulation in the tests.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95
METHOD = "paired Student-t"
MIN_PAIRS = 2  # a t interval needs one degree of freedom
POWER = 0.80  # for the minimum detectable effect
EXACT_PERMUTATION_MAX_PAIRS = 16  # 2**16 sign patterns; beyond that a seeded Monte Carlo sample
PERMUTATION_SAMPLES = 20_000
PERMUTATION_SEED = 20_240_601


# -- special functions -------------------------------------------------------------------------

def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz), valid for x < (a+1)/(a+b+2)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return result


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    return 1.0 - t_sf(t, df)


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p, by bisection on the CDF (monotone, so always converges)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile probability must lie in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * max(1.0, high):
            break
    return 0.5 * (low + high)


_erf = np.frompyfunc(math.erf, 1, 1)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


@lru_cache(maxsize=64)
def _scaled_chi_grid(df: int, points: int = 4001) -> tuple[np.ndarray, np.ndarray]:
    """Grid and trapezoid weights for S = sqrt(chi2_df / df), the t statistic's denominator."""
    upper = 1.0 + 12.0 / math.sqrt(df)
    s = np.linspace(0.0, upper, points)[1:]
    log_density = (
        math.log(2.0) + (df / 2.0) * math.log(df / 2.0) - math.lgamma(df / 2.0)
        + (df - 1) * np.log(s) - df * s * s / 2.0
    )
    weights = np.exp(log_density) * (s[1] - s[0])
    return s, weights / weights.sum()


def t_test_power(shift: float, df: int, critical: float, sided: int = 2) -> float:
    """Power of a t test whose statistic is noncentral t(df, shift) against the critical value.

    T = (Z + shift) / S with S = sqrt(chi2_df / df), so P(T > c) = E_S[Phi(shift - c S)]; the
    expectation is a quadrature over S. ``sided=1`` rejects only for T > c.
    """
    s, weights = _scaled_chi_grid(int(df))
    upper = float(np.sum(weights * _normal_cdf(shift - critical * s)))
    if sided == 1:
        return upper
    return upper + float(np.sum(weights * _normal_cdf(-critical * s - shift)))


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
    df = n - 1
    critical = t_quantile(1.0 - alpha / sided, df)
    low, high = 0.0, 1.0
    while t_test_power(high, df, critical, sided) < power:
        low, high = high, 2.0 * high
    for _ in range(60):
        middle = 0.5 * (low + high)
        if t_test_power(middle, df, critical, sided) < power:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high) * sd / math.sqrt(n)


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
