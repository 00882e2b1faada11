"""Group-sequential seed designs: look after every batch of seeds, stop when every claim is decided.

Method: Lan–DeMets alpha spending (Lan & DeMets 1983, Biometrika 70:659) on the paired t statistic,
with looks at fixed seed counts n_1 < ... < n_K = max_seeds and information fraction n_k / n_K.
The spending function (O'Brien–Fleming-type or Pocock-type) says how much of a claim's one-sided
level may be used up by look k; the boundary at look k is set so that, under the null, the chance
of crossing first at look k is exactly the increment. Boundaries are expressed as *nominal*
one-sided p-levels of the ordinary t test at each look (the "significance level approach" of
Jennison & Turnbull 2000, Group Sequential Methods, §3.8), computed here without the normal
approximation: under the null the joint law of the t statistics of a growing normal sample does not
depend on the variance, so it is simulated once per look schedule (seeded, so boundaries are
reproducible) and the conditional crossing probabilities are read off the simulated paths. Where an
increment is too small for the simulation to resolve, the look uses the increment itself as its
nominal level, which is conservative (Bonferroni over looks).

A fixed design is the one-look case (the nominal level is the level), so one decision rule serves
both. A design that declares a skewness bound (``skew_bound``) crosses on critical values calibrated to
it inside its own schedule (skew_calibration.py) instead: the levels below are then the t test's p at
those critical values, so every reader of a nominal level (claims, premises, validity, intervals,
planning) reads the calibrated one.

Futility uses conditional power under the current estimate (Lan & Wittes 1988, the B-value): it only
ever stops a claim without a decision, so it cannot raise the error rate (non-binding).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import scipy.stats

from harness.analysis.stats.paired_stats import t_power
from harness.analysis.stats.skew_calibration import calibrated_critical_values, check_skew_bound

if TYPE_CHECKING:  # numbers in, numbers out: a spec is only read here
    from harness.suite.schema import SequentialSpec

SPENDINGS = ("obrien_fleming", "pocock")
DEFAULT_SPENDING = "obrien_fleming"
DEFAULT_FUTILITY = 0.10  # stop a claim whose conditional power (to pass or to fail) is below 10%
NULL_PATHS = 200_000
NULL_SEED = 20_261_201
MIN_RESOLVED_CROSSINGS = 50  # fewer simulated crossings than this: use the increment (conservative)


@dataclass(frozen=True)
class Schedule:
    """Where a run looks at its data: after ``first`` seeds, then every ``batch`` more up to ``max_seeds``.

    The fixed design is ``Schedule(n, n)``: one look.
    """

    first: int
    max_seeds: int
    batch: int = 1
    spending: str = DEFAULT_SPENDING
    futility: float | None = DEFAULT_FUTILITY
    futility_from: float = 0.0  # share of max_seeds before which no claim stops as futile
    skew_bound: float | None = None  # declared |skewness| of the per-seed differences: calibrated critical values

    def __post_init__(self) -> None:
        if not 1 <= self.first <= self.max_seeds:
            raise ValueError(f"first look {self.first} must lie in [1, max_seeds={self.max_seeds}]")
        if self.batch < 1:
            raise ValueError(f"batch must be at least 1, got {self.batch}")
        if self.spending not in SPENDINGS:
            raise ValueError(f"spending {self.spending!r} is not one of {', '.join(SPENDINGS)}")
        if isinstance(self.futility_from, bool) or not isinstance(self.futility_from, (int, float)) \
                or not 0 <= self.futility_from < 1:
            raise ValueError(f"futility_from {self.futility_from!r} is not a fraction in [0, 1)")
        if self.skew_bound is not None:
            check_skew_bound(self.skew_bound)

    @property
    def sequential(self) -> bool:
        return self.first < self.max_seeds

    @property
    def looks(self) -> tuple[int, ...]:
        """Seed counts at each look; the last is max_seeds."""
        counts = list(range(self.first, self.max_seeds, self.batch))
        return (*counts, self.max_seeds)

    def may_stop_futile(self, seeds: int) -> bool:
        """Whether a look at this many seeds may stop a claim as futile (never at the last look)."""
        return self.futility is not None and seeds < self.max_seeds and seeds >= self.futility_from * self.max_seeds

    def futility_phrase(self) -> str:
        """How the design stops a claim for futility, as the reports say it ('' when it never does)."""
        if self.futility is None:
            return ""
        start = math.ceil(self.futility_from * self.max_seeds)
        return f"futility below {self.futility:g} conditional power" + (f" from {start} seeds" if self.futility_from else "")

    def describe(self) -> dict[str, Any]:
        described = {"first": self.first, "max_seeds": self.max_seeds, "batch": self.batch,
                     "spending": self.spending, "futility": self.futility}
        if self.futility_from:
            described["futility_from"] = self.futility_from
        if self.skew_bound is not None:
            described["skew_bound"] = self.skew_bound
        return described

    def levels(self, looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
        """The nominal one-sided level of each of ``looks`` for a claim at ``alpha`` under this design's
        spending (and its skewness bound, when it declares one)."""
        return nominal_levels(looks, alpha, self.spending, self.skew_bound)

    @classmethod
    def of(cls, spec: SequentialSpec, first: int) -> Schedule:
        """The schedule a suite declares (its ``sequential``) with ``first`` seeds at its first look."""
        return cls(first, spec.max_seeds, spec.batch, spec.spending, spec.futility, spec.futility_from, spec.skew_bound)


def spent(fraction: float, alpha: float, spending: str) -> float:
    """Lan–DeMets spending: the one-sided error allowed by information fraction ``fraction``."""
    if fraction <= 0:
        return 0.0
    if fraction >= 1:
        return alpha
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * fraction)
    z = scipy.stats.norm.isf(alpha / 2.0)
    return float(2.0 * scipy.stats.norm.sf(z / math.sqrt(fraction)))


SIMULATION_BYTES = 64 * 2**20  # a simulation holds about this much at once, whatever the number of seeds


def _row_chunks(paths: int, width: int, rng: np.random.Generator) -> Iterator[tuple[slice, np.ndarray]]:
    """The (paths, width) standard normal draws of ``rng``, in consecutive blocks of rows: the same
    numbers as one call (the stream is filled row by row), in bounded memory."""
    rows = max(1, SIMULATION_BYTES // (3 * 8 * width))  # draws, sums and squares
    for start in range(0, paths, rows):
        stop = min(paths, start + rows)
        yield slice(start, stop), rng.standard_normal((stop - start, width))


@lru_cache(maxsize=1)  # one schedule's paths serve every level Holm and futility ask of it (read only)
def _null_p_values(looks: tuple[int, ...], columns: range) -> np.ndarray:
    """Nominal one-sided p-values of the t test at looks[columns], for NULL_PATHS simulated null paths
    (the whole seeded stream is drawn again for each block of looks, so memory stays bounded)."""
    out = np.ones((NULL_PATHS, len(columns)))
    for rows, draws in _row_chunks(NULL_PATHS, looks[-1], np.random.default_rng(NULL_SEED)):
        sums, squares = np.cumsum(draws, axis=1), np.cumsum(draws * draws, axis=1)
        for j, k in enumerate(columns):
            if looks[k] >= 2:
                out[rows, j] = _t_p_values(sums, squares, looks[k])
    out.flags.writeable = False  # cached: shared by every caller
    return out


def _t_p_values(sums: np.ndarray, squares: np.ndarray, n: int) -> np.ndarray:
    """One-sided p (H0: mean <= 0) of the t test on each path's first n draws, from running sums."""
    mean = sums[:, n - 1] / n
    sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
    return scipy.stats.t.sf(mean * math.sqrt(n) / sd, n - 1)


@lru_cache(maxsize=1024)
def nominal_levels(looks: tuple[int, ...], alpha: float, spending: str = DEFAULT_SPENDING,
                   skew_bound: float | None = None) -> tuple[float, ...]:
    """The one-sided nominal p-level of each look such that the chance, under the null, of any
    look's t test reaching its level is ``alpha`` (at most). One look: ``(alpha,)``. With ``skew_bound``:
    the levels of the critical values calibrated to it (at most INFLATION * alpha at the bound)."""
    if skew_bound is not None:
        return _calibrated_levels(looks, alpha, spending, skew_bound)
    if len(looks) == 1:
        return (alpha,)
    block = max(1, SIMULATION_BYTES // (8 * NULL_PATHS))  # looks whose p-values are held at once
    alive = np.ones(NULL_PATHS, dtype=bool)
    levels: list[float] = []
    before = 0.0
    for first in range(0, len(looks), block):
        columns = range(first, min(len(looks), first + block))
        null_p = _null_p_values(looks, columns)
        for j, k in enumerate(columns):
            now = spent(looks[k] / looks[-1], alpha, spending)
            increment = max(now - before, 0.0)
            before = now
            crossings = math.floor(increment * NULL_PATHS)
            if k == 0 or crossings < MIN_RESOLVED_CROSSINGS:
                level = increment
            else:
                survivors = null_p[alive, j]
                rank = min(crossings, survivors.size) - 1
                level = float(np.partition(survivors, rank)[rank]) if survivors.size else increment
            levels.append(level)
            alive &= null_p[:, j] > level
    return tuple(levels)


def _calibrated_levels(looks: tuple[int, ...], alpha: float, spending: str, skew_bound: float) -> tuple[float, ...]:
    normal = nominal_levels(looks, alpha, spending)
    if looks[-1] < 2:  # no t test to calibrate
        return normal
    floors = tuple(float(scipy.stats.t.isf(level, n - 1)) if n >= 2 else math.inf for n, level in zip(looks, normal))
    spent_by = tuple(spent(n / looks[-1], alpha, spending) for n in looks)
    critical = calibrated_critical_values(looks, spent_by, floors, skew_bound)
    return tuple(level if c == floor else float(scipy.stats.t.sf(c, n - 1))
                 for n, level, c, floor in zip(looks, normal, critical, floors))


def conditional_power(p_now: Any, fraction: float, final_level: float) -> Any:
    """Chance of reaching the final look's level if the current estimate is the truth (B-value,
    Lan & Wittes 1988), from the current one-sided p (a float or an array) and information fraction."""
    p = np.clip(np.asarray(p_now, dtype=np.float64), 1e-300, 1.0 - 1e-16)
    if fraction >= 1.0:
        power = (p <= final_level).astype(np.float64)
    else:
        z_now = scipy.stats.norm.isf(p)
        drift = z_now / math.sqrt(fraction)  # the standardized effect at full information, as estimated
        z_final = float(scipy.stats.norm.isf(final_level))
        power = scipy.stats.norm.sf((z_final - z_now * math.sqrt(fraction) - drift * (1.0 - fraction))
                                    / math.sqrt(1.0 - fraction))
    return float(power) if power.ndim == 0 else power


# -- planning --------------------------------------------------------------------------------------

def fixed_seeds_for_power(effect_in_sd: float, alpha: float, power: float = 0.80, limit: int = 1000,
                          skew_bound: float | None = None) -> int | None:
    """Fewest seeds a fixed one-sided paired t test at ``alpha`` (at its critical value calibrated to
    ``skew_bound``, when given) needs to find ``effect_in_sd`` (mean difference / sd of differences) with
    ``power``; None beyond ``limit``. Power grows with the seeds, so doubling then bisecting finds it: a
    calibrated critical value costs a simulation per seed count, and the search never asks for the power
    far beyond the answer, where the noncentral t's numerics fail (statsmodels gives NaN near 1.22 sd at
    1,000 seeds)."""
    if effect_in_sd <= 0:
        return None

    def enough(n: int) -> bool:
        return t_power(effect_in_sd, n, fixed_level(n, alpha, skew_bound)) >= power

    low, high = 1, 2  # not enough(low): one seed has no t test
    while not enough(high):
        if high >= limit:
            return None
        low, high = high, min(2 * high, limit)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def fixed_level(n: int, alpha: float, skew_bound: float | None = None) -> float:
    """The level a fixed design of n seeds tests a claim at ``alpha`` at: alpha itself, or the t test's p at
    the critical value calibrated to ``skew_bound``. A calibration beyond CALIBRATED_SEEDS takes the excess
    of its critical value over t's at CALIBRATED_SEEDS down as 1 / sqrt(n), as the skewness term of the t
    statistic's Edgeworth expansion falls (planning only: a run calibrates its own schedule)."""
    if skew_bound is None:
        return alpha
    if n <= CALIBRATED_SEEDS:
        return nominal_levels((n,), alpha, DEFAULT_SPENDING, skew_bound)[0]
    at = CALIBRATED_SEEDS
    excess = float(scipy.stats.t.isf(fixed_level(at, alpha, skew_bound), at - 1) - scipy.stats.t.isf(alpha, at - 1))
    return float(scipy.stats.t.sf(scipy.stats.t.isf(alpha, n - 1) + excess * math.sqrt(at / n), n - 1))


CALIBRATED_SEEDS = 64  # fixed designs the planner calibrates by simulation; beyond, the Edgeworth decay


@dataclass(frozen=True)
class OperatingCharacteristics:
    """A design's behaviour for one claim at a true effect, by simulation."""

    effect_in_sd: float
    power: float  # chance of passing
    expected_seeds: float


def operating_characteristics(design: Schedule, effect_in_sd: float, alpha: float, paths: int = 20_000,
                              seed: int = 7) -> OperatingCharacteristics:
    """Pass rate and mean seeds used of one claim tested alone under ``design``."""
    looks, levels = design.looks, design.levels(design.looks, alpha)
    passed = used = 0.0
    for _rows, draws in _row_chunks(paths, design.max_seeds, np.random.default_rng(seed)):
        chunk = _simulate_paths(design, draws + effect_in_sd, looks, levels)
        passed, used = passed + chunk[0], used + chunk[1]
    return OperatingCharacteristics(effect_in_sd, passed / paths, used / paths)


def _simulate_paths(design: Schedule, draws: np.ndarray, looks: tuple[int, ...],
                    levels: tuple[float, ...]) -> tuple[float, float]:
    """Paths passed and seeds used, summed over these paths (one row each)."""
    paths = draws.shape[0]
    sums, squares = np.cumsum(draws, axis=1), np.cumsum(draws * draws, axis=1)
    open_ = np.ones(paths, dtype=bool)
    passed = np.zeros(paths, dtype=bool)
    used = np.full(paths, design.max_seeds, dtype=np.float64)
    for k, (n, level) in enumerate(zip(looks, levels)):
        if n < 2:
            continue
        p_pass = _t_p_values(sums, squares, n)
        up, down = open_ & (p_pass <= level), open_ & (1.0 - p_pass <= level)
        passed |= up
        stop = up | down
        if k < len(looks) - 1 and design.may_stop_futile(n):
            fraction = n / design.max_seeds
            hopeless = np.maximum(conditional_power(p_pass, fraction, levels[-1]),
                                  conditional_power(1.0 - p_pass, fraction, levels[-1])) < design.futility
            stop |= open_ & hopeless
        used[stop] = n
        open_ &= ~stop
    return float(passed.sum()), float(used.sum())
