"""Critical values calibrated to a declared skewness bound, and the pooled skewness a bound is checked on.

A one-sided t test assumes roughly normal per-seed differences; on skewed ones its error on the long
tail's side grows (skewness 1.0 takes a 2.5% test at 6 seeds to about 4.6%), and no test of 3-24 seeds
can tell from the sample itself which side is long. A design that declares ``skew_bound`` instead
moves its critical t values out far enough that the one-sided error stays within INFLATION times the
nominal level for every per-seed distribution up to that skewness, the worst case being a gamma skewed
to the side the test errs on: the differences ``-(G - k) / sqrt(k)``, G ~ Gamma(k), k = 4 / bound^2.

The calibration runs inside the design's own schedule: the t statistics of CALIBRATION_PATHS seeded
bad-side paths are read at every look, and each look's critical value is the one that lets the paths
crossing by then (a path counts once, at its first crossing) reach INFLATION times the level the
design's alpha spending has spent by that look. A critical value never falls below the normal-theory
boundary, so normal data keep the design's level. A look whose spent level is too small for the paths
to resolve (an early look of O'Brien–Fleming spending) is set beyond every path: the normal-theory
boundary is no bound there, as a sample of 3 skewed differences reaches t = 260 far more often than
normal ones, and over looks 3-12 those early looks alone take the error to 2.6 times the level. With one
look at 0.025 and bound 1.0 this gives t 4.30 / 3.34 / 2.96 / 2.65 / 2.33 at 4 / 6 / 8 / 12 / 24
seeds (t itself: 3.18 / 2.57 / 2.36 / 2.20 / 2.07).

A bound is only worth what the data respect, so ``skew_check`` measures the pooled skewness of a run's
sets of per-seed differences: the mean |G1| (scipy's bias-corrected sample skewness) over the sets,
against the mean |G1| that sets of the same sizes drawn at the bound give. At 3-24 values G1 is far
below the population skewness (normal sets of the sealed runs' sizes average 0.65, skewness 1.0 sets
0.77), so a set is only ever compared with what its own size gives.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
import scipy.stats

INFLATION = 1.2  # the one-sided error a calibrated look may reach at the bound, in units of its level
CALIBRATION_PATHS = 200_000
CALIBRATION_SEED = 20_261_207
MIN_RESOLVED_CROSSINGS = 50  # fewer bad-side crossings than this: keep the normal-theory boundary
MAX_SKEW_BOUND = 3.0  # a gamma this skewed has shape 4/9; beyond it no seed count a suite affords decides
CALIBRATION_BYTES = 64 * 2**20  # the draws held at once, whatever the number of seeds
MIN_SKEW_VALUES = 3  # a set's skewness needs three values (and a spread)
SKEW_CHECK_PATHS = 50_000  # simulated sets per size for the skewness a bound gives
SKEW_CHECK_DRAWS = 4_000_000  # at most this many draws per size (fewer sets of a large size)


def check_skew_bound(bound: object) -> float:
    """The bound as a float; ValueError unless it is a number in (0, MAX_SKEW_BOUND]."""
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 < bound <= MAX_SKEW_BOUND:
        raise ValueError(f"skew_bound {bound!r} is not a skewness in (0, {MAX_SKEW_BOUND:g}]")
    return float(bound)


def bad_side_draws(rng: np.random.Generator, shape: tuple[int, int], skew: float) -> np.ndarray:
    """Standardized draws (mean 0, sd 1) of skewness ``-skew``: a gamma whose long tail lies on the side
    a one-sided test of 'mean above its bound' errs on (samples that miss the tail look tight and high)."""
    k = 4.0 / (skew * skew)
    return -(rng.standard_gamma(k, size=shape) - k) / math.sqrt(k)


def _row_blocks(paths: int, width: int, rng: np.random.Generator, skew: float
                ) -> Iterator[tuple[slice, np.ndarray]]:
    """The (paths, width) bad-side draws of ``rng`` in consecutive blocks of rows (the stream is filled row
    by row, so the blocks are the numbers one call would give), in bounded memory."""
    rows = max(1, CALIBRATION_BYTES // (3 * 8 * width))  # draws, sums and squares
    for start in range(0, paths, rows):
        stop = min(paths, start + rows)
        yield slice(start, stop), bad_side_draws(rng, (stop - start, width), skew)


@lru_cache(maxsize=1)  # one schedule's paths serve every level Holm and futility ask of it (read only)
def _bad_side_t(looks: tuple[int, ...], skew: float, columns: range) -> np.ndarray:
    """The t statistics (H0: mean 0) of the seeded bad-side paths at looks[columns]; -inf below two seeds."""
    out = np.full((CALIBRATION_PATHS, len(columns)), -np.inf)
    rng = np.random.default_rng(CALIBRATION_SEED)
    for rows, draws in _row_blocks(CALIBRATION_PATHS, looks[-1], rng, skew):
        sums, squares = np.cumsum(draws, axis=1), np.cumsum(draws * draws, axis=1)
        for j, k in enumerate(columns):
            n = looks[k]
            if n >= 2:
                mean = sums[:, n - 1] / n
                sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
                with np.errstate(divide="ignore", invalid="ignore"):
                    out[rows, j] = np.where(sd > 0, mean * math.sqrt(n) / sd, -np.inf)
    out.flags.writeable = False
    return out


def calibrated_critical_values(looks: tuple[int, ...], spent: tuple[float, ...], floors: tuple[float, ...],
                               skew: float) -> tuple[float, ...]:
    """Each look's critical t: at most INFLATION * ``spent[k]`` of the bad-side paths have crossed by look k
    (``spent``: the design's cumulative one-sided spending), and never below ``floors[k]`` (the normal-theory
    boundary's t)."""
    block = max(1, CALIBRATION_BYTES // (8 * CALIBRATION_PATHS))  # looks whose statistics are held at once
    alive = np.ones(CALIBRATION_PATHS, dtype=bool)
    crossed = 0
    critical: list[float] = []
    for first in range(0, len(looks), block):
        columns = range(first, min(len(looks), first + block))
        statistics = _bad_side_t(looks, skew, columns)
        for j, k in enumerate(columns):
            allowed = math.floor(INFLATION * spent[k] * CALIBRATION_PATHS) - crossed
            value = floors[k]
            survivors = statistics[alive, j]
            if looks[k] >= 2 and survivors.size > max(allowed, 0):
                if allowed >= MIN_RESOLVED_CROSSINGS:
                    rank = survivors.size - allowed  # the allowed-th largest: that many reach it
                    value = max(value, float(np.partition(survivors, rank)[rank]))
                else:  # too little spent to resolve: beyond every path (a skewed sample's t is far heavier-tailed)
                    value = max(value, float(np.nextafter(survivors.max(), np.inf)))
            critical.append(value)
            crossing = alive & (statistics[:, j] >= value)
            crossed += int(crossing.sum())
            alive &= ~crossing
    return tuple(critical)


@dataclass(frozen=True)
class SkewCheck:
    """The pooled skewness of a run's sets of per-seed differences against its design's declared bound."""

    pooled: float | None  # the mean |G1| of the sets (None: no set of three values with a spread)
    at_bound: float | None  # what sets of the same sizes drawn at the bound give on average
    bound: float
    sets: int  # the sets measured

    @property
    def exceeds(self) -> bool:
        return self.pooled is not None and self.at_bound is not None and self.pooled > self.at_bound

    def text(self) -> str:
        if self.pooled is None:
            return f"pooled skewness not measurable (no set of {MIN_SKEW_VALUES} differences with a spread)"
        verdict = "exceeds" if self.exceeds else "within"
        return (f"pooled skewness: mean |G1| {self.pooled:.3f} over {self.sets} sets of per-seed differences "
                f"({self.at_bound:.3f} at skewness {self.bound:g}): {verdict} the declared bound")


def set_skewness(values: Sequence[float]) -> float | None:
    """G1, scipy's bias-corrected sample skewness, of one set's finite values; None below three values or
    without a spread."""
    data = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if data.size < MIN_SKEW_VALUES or float(data.std()) == 0.0:
        return None
    return float(scipy.stats.skew(data, bias=False))


@lru_cache(maxsize=256)
def expected_abs_skewness(n: int, skew: float) -> float:
    """The mean |G1| of n values of a gamma of skewness ``skew``, by seeded simulation. |G1| of a few values
    is mostly noise (6 values average 0.77 at skewness 1.0 and 0.67 when normal), so a set is compared with
    what its own size gives at the bound, never with the bound itself."""
    paths = min(SKEW_CHECK_PATHS, SKEW_CHECK_DRAWS // n)
    draws = bad_side_draws(np.random.default_rng(CALIBRATION_SEED + n), (paths, n), skew)
    return float(np.mean(np.abs(scipy.stats.skew(draws, axis=1, bias=False))))


def skew_check(groups: Sequence[Sequence[float]], bound: float) -> SkewCheck:
    """Whether the pooled skewness of these sets of per-seed differences (one set per contrast, metric and
    point) exceeds the declared ``bound``: their mean |G1| against the mean that sets of the same sizes
    drawn from a gamma at the bound give. The audit fails a sealed run whose pooled data exceed it."""
    bound = check_skew_bound(bound)
    measured = [(g, len(values)) for values in groups
                if (g := set_skewness(values)) is not None]
    if not measured:
        return SkewCheck(None, None, bound, 0)
    pooled = float(np.mean([abs(g) for g, _ in measured]))
    at_bound = float(np.mean([expected_abs_skewness(n, bound) for _, n in measured]))
    return SkewCheck(pooled, at_bound, bound, len(measured))
