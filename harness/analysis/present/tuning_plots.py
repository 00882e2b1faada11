"""The figure of a tuning run: each tuned arm's metric over its grid, per tuning seed and averaged, with the
point the grid chose marked, so a reader sees whether the choice sits inside the grid or at its edge."""
from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.analysis.decide.tune_grid import ArmGrid
from harness.store import write_atomic
from harness.suite.points import point_label

COLUMNS = 3


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

