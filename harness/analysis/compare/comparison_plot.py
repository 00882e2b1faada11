"""One figure of a comparison: each key metric per arm, A and B side by side with their intervals."""
from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.analysis.compare.run_comparison import Comparison
from harness.analysis.present.run_plots import Series, axis_label, draw_categorical, summary_series
from harness.analysis.run_results import RunResults, metric_order

MAX_PANELS = 12
COLUMNS = 3


def key_metrics(comparison: Comparison) -> list[str]:
    """Metrics either run counts as key (declared, or named by a claim or the validity check)."""
    keys = {s.key for s in comparison.shifts if comparison.a.is_key_metric(s.key) or comparison.b.is_key_metric(s.key)}
    return sorted(keys, key=metric_order)


def write_comparison_plot(comparison: Comparison, path: Path, a_name: str, b_name: str) -> Path | None:
    """Panels of key metrics (mean and t interval over seeds per arm); None when there is none."""
    keys = key_metrics(comparison)[:MAX_PANELS]
    if not keys:
        return None
    columns = min(COLUMNS, len(keys))
    rows = math.ceil(len(keys) / columns)
    figure = Figure(figsize=(5.2 * columns, 3.8 * rows + 0.6), dpi=100)
    FigureCanvasAgg(figure)
    for index, key in enumerate(keys, 1):
        axes = figure.add_subplot(rows, columns, index)
        spec = comparison.b.spec_for(key)
        series = [s for s in (_series(comparison.a, key, a_name), _series(comparison.b, key, b_name)) if s is not None]
        draw_categorical(axes, series)
        axes.set_title(key, fontsize=10)
        axes.set_ylabel(axis_label(key, spec.unit, spec.direction), fontsize=8)
        axes.grid(True, alpha=0.3)
        axes.tick_params(labelsize=7)
        if index == 1:
            axes.legend(fontsize="small", loc="best")
    confidence = f"{100 * comparison.confidence:g}%"
    figure.suptitle(f"{comparison.b.suite}: A vs B per arm, mean and {confidence} t interval over seeds", fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def _series(results: RunResults, key: str, name: str) -> Series | None:
    """One point per arm label (and sweep point when the suite sweeps)."""
    points = results.point_labels()
    cells = ((f"{label} {point}" if len(points) > 1 else label, results.values(label, point, key))
             for point in points for label in results.arm_labels())
    return summary_series(cells, name, results.confidence)
