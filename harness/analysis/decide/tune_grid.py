"""A tuning run's grids: each tuned arm's metric at every grid point, averaged over the tuning seeds,
and the point it chooses (the figure of them is analysis/present/tuning_plots.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Iterable, Mapping, Sequence

from harness.core.record import TrialRecord
from harness.suite.tuning_plan import at_dotted, best_point, point_mean


@dataclass
class GridPoint:
    """One grid point of one arm: its per-seed values (each the mean over the suite's sweep points and
    the arm's own variants) and their mean; None unless every trial of the point finished finite."""

    params: dict[str, Any]
    values: dict[int, float] = field(default_factory=dict)
    failed: int = 0
    mean: float | None = None


@dataclass
class ArmGrid:
    arm: str
    points: list[GridPoint]
    chosen: GridPoint | None  # None: no grid point finished on every seed


def score_grid(arm: str, points: list[dict[str, Any]], records: Iterable[TrialRecord], metric: str,
               direction: str, seeds: list[int]) -> ArmGrid:
    """Every grid point's mean over the tuning seeds; the best one by ``direction`` (the first on a tie)."""
    grid = [GridPoint(params) for params in points]
    cells: dict[tuple[int, int], list[float]] = {}
    for record in records:
        if record.arm != arm:
            continue
        index = next((i for i, p in enumerate(points) if all(at_dotted(record.params, k) == v for k, v in p.items())), None)
        if index is None:
            continue
        value = record.metrics.get(metric) if record.finished else None
        if value is None or not math.isfinite(value):
            grid[index].failed += 1
            continue
        cells.setdefault((index, record.seed), []).append(value)
    for index, point in enumerate(grid):
        point.values = {seed: fmean(cells[index, seed]) for seed in seeds if (index, seed) in cells}
        point.mean = point_mean(point.values, point.failed, seeds)
    best = best_point([p.mean for p in grid], direction)  # the rule a run checks a lock's choice by
    return ArmGrid(arm, grid, grid[best] if best is not None else None)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def edge_axes(points: Sequence[Mapping[str, Any]], chosen: Mapping[str, Any]) -> list[str]:
    """Each tuned axis on which ``chosen`` sits at the smallest or largest of three or more numbers, said in
    words: a best point on the edge of its grid says the grid stopped before the metric did, so the arm was
    not tuned as well as it could be. An axis of two values has no inside (it compares two settings); a
    failed point still counts as part of the grid (a learning rate above the best that diverged bounds it)."""
    edges = []
    for key, value in chosen.items():
        values = sorted({point[key] for point in points if key in point and _is_number(point[key])})
        if len(values) >= 3 and _is_number(value) and value in (values[0], values[-1]):
            side = "smallest" if value == values[0] else "largest"
            edges.append(f"{key}={value:g} is the {side} of {', '.join(f'{v:g}' for v in values)}")
    return edges
