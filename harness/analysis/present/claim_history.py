"""A claim's timeline across runs, as a table and a plot (one panel per claim, runs in order).

The points come from wherever runs are recorded (MLflow's parent runs: harness.tracking.history);
this module only lays them out, so the same picture can be drawn from any source.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.analysis.present.forest_plots import COLOURS, UNDECIDED_COLOUR
from harness.store import write_atomic
from harness.core.terminal import format_table, format_value


@dataclass(frozen=True)
class ClaimPoint:
    """One claim in one run: its estimate (treatment - control, or a ratio), interval and result."""

    claim: str  # contrast/metric[/point], as its MLflow metrics name it
    run_id: str
    started: datetime
    commit: str
    dirty: bool
    estimate: float
    low: float | None
    high: float | None
    result: str  # PASS, FAIL, INCONCLUSIVE, VACUOUS, ...
    seeds: int | None = None
    task_commit: str = ""  # the commit of the git checkout the task's code sits in ('' unknown, 'none' outside git)
    task_dirty: bool = False

    @property
    def revision(self) -> str:
        """The commit, short, marked when the checkout had uncommitted changes."""
        return (self.commit[:10] or "unknown") + ("+dirty" if self.dirty else "")

    @property
    def task_revision(self) -> str:
        """The task checkout's commit, as ``revision`` writes the harness's."""
        if self.task_commit in ("", "none"):
            return self.task_commit or "unknown"
        return self.task_commit[:10] + ("+dirty" if self.task_dirty else "")


def render_history(points: list[ClaimPoint]) -> str:
    """One row per claim and run, claims grouped, runs oldest first."""
    rows = [
        [p.claim, p.started.strftime("%Y-%m-%d %H:%M"), p.revision, p.task_revision, format_value(p.estimate),
         _interval(p), p.result, "" if p.seeds is None else str(p.seeds), p.run_id[:12]]
        for p in sorted(points, key=lambda p: (p.claim, p.started))
    ]
    return format_table(["claim", "date (UTC)", "harness commit", "task commit", "estimate", "95% CI", "result", "seeds",
                         "run"], rows)


def write_history_plot(points: list[ClaimPoint], path: Path, title: str) -> Path:
    """A panel per claim: estimate and interval per run in time order, coloured by result."""
    claims = sorted({p.claim for p in points})
    figure = Figure(figsize=(max(6.0, 0.6 * len({p.run_id for p in points}) + 3), 1.0 + 2.2 * len(claims)))
    FigureCanvasAgg(figure)
    axes_list = figure.subplots(len(claims), 1, squeeze=False)[:, 0]
    for axes, claim in zip(axes_list, claims):
        series = sorted((p for p in points if p.claim == claim), key=lambda p: p.started)
        for x, point in enumerate(series):
            colour = COLOURS.get(point.result.lower(), UNDECIDED_COLOUR)
            if point.low is not None and point.high is not None:
                axes.plot([x, x], [point.low, point.high], color=colour, linewidth=2)
            axes.plot([x], [point.estimate], "o", color=colour)
            axes.annotate(point.result.lower(), (x, point.estimate), textcoords="offset points", xytext=(6, 0),
                          fontsize=7, color=colour, va="center")
        axes.plot(range(len(series)), [p.estimate for p in series], color="#bbbbbb", linewidth=1, zorder=0)
        spans = [v for p in series for v in (p.low, p.estimate, p.high) if v is not None]
        if min(spans) <= 0.0 <= max(spans):  # no effect, for a difference (a ratio claim's 1 is rarely in range)
            axes.axhline(0.0, color="#444444", linewidth=0.8, linestyle=":")
        axes.set_xticks(range(len(series)))
        axes.set_xticklabels([f"{p.revision}\n{p.started:%m-%d %H:%M}" for p in series], fontsize=7)
        axes.set_xlim(-0.5, len(series) - 0.5)
        axes.set_title(claim, fontsize=9, loc="left")
        axes.set_ylabel("estimate", fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    write_atomic(Path(path), lambda handle: figure.savefig(handle, format="png", dpi=110))
    return Path(path)


def _interval(point: ClaimPoint) -> str:
    if point.low is None or point.high is None:
        return "n/a"
    return f"[{format_value(point.low)}, {format_value(point.high)}]"
