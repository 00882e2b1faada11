"""Paired statistics: per-seed differences and a seeded bootstrap confidence interval.

Treatment and control share seed, data and order, so their per-seed difference removes the
seed-to-seed variation both arms have in common. The bootstrap uses a fixed generator seed so
that ``harness report`` gives the same intervals every time it is rebuilt from the same results.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 20_240_601


@dataclass(frozen=True)
class Interval:
    """A two-sided interval; ``degenerate`` when it rests on a single observation."""

    low: float
    high: float
    degenerate: bool


@dataclass(frozen=True)
class PairedDifference:
    """Treatment minus control over the pairs both arms finished, for one metric key."""

    pair_keys: tuple[Hashable, ...]
    treatment: tuple[float, ...]
    control: tuple[float, ...]
    differences: tuple[float, ...]
    mean_difference: float
    relative_change: float | None
    interval: Interval

    @property
    def n(self) -> int:
        return len(self.differences)

    @property
    def treatment_mean(self) -> float:
        return float(np.mean(self.treatment))

    @property
    def control_mean(self) -> float:
        return float(np.mean(self.control))


@dataclass(frozen=True)
class SampleSummary:
    """One arm's values of one metric over seeds: mean, standard deviation and mean's CI."""

    values: tuple[float, ...]
    mean: float
    sd: float | None
    interval: Interval

    @property
    def n(self) -> int:
        return len(self.values)


def bootstrap_mean_interval(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Percentile bootstrap interval of the mean; one value gives a degenerate point interval."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("bootstrap of an empty sample")
    if data.size == 1:
        return Interval(float(data[0]), float(data[0]), degenerate=True)
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, data.size, size=(resamples, data.size))
    means = data[indices].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(low), float(high), degenerate=False)


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
    treatment: Mapping[Hashable, float], control: Mapping[Hashable, float], seed: int = BOOTSTRAP_SEED
) -> PairedDifference | None:
    """Per-pair treatment minus control, its mean, relative change and bootstrap CI; None without pairs."""
    keys, treated, controlled = pair_values(treatment, control)
    if not keys:
        return None
    differences = treated - controlled
    mean_difference = float(differences.mean())
    control_mean = float(controlled.mean())
    relative = mean_difference / abs(control_mean) if control_mean != 0 else None
    return PairedDifference(
        pair_keys=keys,
        treatment=tuple(float(v) for v in treated),
        control=tuple(float(v) for v in controlled),
        differences=tuple(float(v) for v in differences),
        mean_difference=mean_difference,
        relative_change=relative,
        interval=bootstrap_mean_interval(differences, seed=seed),
    )


def summarize(values: Sequence[float], seed: int = BOOTSTRAP_SEED) -> SampleSummary | None:
    """Mean, sample standard deviation (None for one value) and bootstrap CI of finite values."""
    finite = [float(v) for v in values if _finite(v)]
    if not finite:
        return None
    data = np.asarray(finite)
    sd = float(data.std(ddof=1)) if data.size > 1 else None
    return SampleSummary(tuple(finite), float(data.mean()), sd, bootstrap_mean_interval(data, seed=seed))


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
