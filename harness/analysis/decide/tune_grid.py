"""A tuning run's grids: each tuned arm's metric at every grid point, averaged over the tuning seeds,
the point it chooses, and the figure of each arm's metric over its grid."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Iterable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.core.record import TrialRecord
from harness.store import write_atomic
from harness.suite.points import point_label
from harness.suite.tuning_plan import at_dotted, best_point, point_mean

COLUMNS = 3


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


def write_grid_plot(grids: list[ArmGrid], metric: str, direction: str, title: str, path: Path) -> Path:
    """One panel per tuned arm: each tuning seed's value and their mean at every grid point, the chosen one marked."""
    columns = min(COLUMNS, len(grids))
    rows = math.ceil(len(grids) / columns)
    figure = Figure(figsize=(4.6 * columns, 3.6 * rows + 0.6), dpi=100)
    FigureCanvasAgg(figure)
    for number, grid in enumerate(grids, 1):
        axes = figure.add_subplot(rows, columns, number)
        positions = range(len(grid.points))
        for x, point in zip(positions, grid.points):
            axes.scatter([x] * len(point.values), list(point.values.values()), color="0.6", s=14, zorder=2)
        means = [p.mean if p.mean is not None else math.nan for p in grid.points]
        axes.plot(list(positions), means, marker="o", color="tab:blue", zorder=3, label="mean over tuning seeds")
        if grid.chosen is not None:
            x = grid.points.index(grid.chosen)
            axes.scatter([x], [grid.chosen.mean], s=160, facecolors="none", edgecolors="tab:red", linewidths=2,
                         zorder=4, label="chosen")
        axes.set_xticks(list(positions), [point_label(p.params) for p in grid.points], rotation=30, fontsize=7)
        axes.set_title(grid.arm, fontsize=10)
        axes.set_ylabel(f"{metric} ({direction} is better)", fontsize=8)
        axes.grid(True, alpha=0.3)
        if number == 1:
            axes.legend(fontsize="small", loc="best")
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    write_atomic(path, lambda handle: figure.savefig(handle, format="png"))
    return path

