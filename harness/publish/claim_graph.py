"""A claim's history as a small PNG: one point per run in git order, its decided interval as a bar,
coloured by the result, with no effect dotted and the latest margins dashed, so a drift across commits
is seen before any number is read."""
from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.analysis.present.forest_plots import COLOURS, UNDECIDED_COLOUR
from harness.publish.timeline import ClaimTimeline
from harness.store import write_atomic

WIDTH = 6.4  # inches at DPI: 640 x 240 px, small enough to sit beside the claim's table
HEIGHT = 2.4
DPI = 100


def graph_points(timeline: ClaimTimeline) -> list[tuple[int, float, float | None, float | None, str]]:
    """What the graph plots: (run number, estimate, low, high, colour) per run with an estimate."""
    points = []
    for step in timeline.steps:
        if step.estimate is None:
            continue
        low, high = step.interval or (None, None)
        points.append((step.number, step.estimate, low, high, COLOURS.get(step.claim.status, UNDECIDED_COLOUR)))
    return points


def margin_marks(timeline: ClaimTimeline) -> tuple[float, ...]:
    """The latest run's margins, as its forest plot marks them: where the claim's interval must lie."""
    latest = timeline.latest
    spec = latest.run.analysis.results.spec_for(latest.claim.key)
    reference = latest.claim.reference
    return latest.claim.test.plot_marks(latest.claim.claim, spec.better_sign or 1,
                                        reference.margin if reference is not None else None)


def write_claim_graph(timeline: ClaimTimeline, path: Path) -> Path:
    """Draw ``graph_points`` to ``path``: the x axis names each run by its number and commit."""
    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    points = graph_points(timeline)
    for number, estimate, low, high, colour in points:
        if low is not None and high is not None:
            axes.plot([number, number], [low, high], color=colour, linewidth=2)
        axes.plot([number], [estimate], "o", color=colour)
    axes.plot([p[0] for p in points], [p[1] for p in points], color="#bbbbbb", linewidth=1, zorder=0)
    null = 1.0 if timeline.latest.claim.test.needs.ratio else 0.0
    axes.axhline(null, color="#444444", linewidth=0.8, linestyle=":")
    for bound in margin_marks(timeline):
        axes.axhline(bound, color="#444444", linewidth=0.8, linestyle="--")
    axes.set_xticks([step.number for step in timeline.steps])
    axes.set_xticklabels([f"{step.number}\n{step.run.commit}" for step in timeline.steps], fontsize=7)
    axes.set_xlim(min(s.number for s in timeline.steps) - 0.5, max(s.number for s in timeline.steps) + 0.5)
    axes.tick_params(axis="y", labelsize=7)
    axes.set_ylabel("ratio" if null else "treatment - control", fontsize=7)
    figure.tight_layout()
    write_atomic(Path(path), lambda handle: figure.savefig(handle, format="png"))
    return Path(path)
