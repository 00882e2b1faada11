"""Forest plots: the paired effects the verdicts rest on, one row per claim or key contrast.

Arm plots show each arm's mean with an unpaired band, which looks far wider than the paired
differences every verdict is computed from. A forest plot shows those differences directly:
per sweep point, the claims first in one compact block (a thin strip per claim on its own
metric's scale, its reference effect under it for non-inferiority and equivalence), then the
exploratory contrasts on key metrics, one panel per metric; each row is the mean paired
difference (treatment - control) with its t interval, the zero line (1 for a ratio claim), the
claim's margin or bounds as dashed ticks on its row, and the marker coloured by the result.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.decide.claims import ClaimResult
from harness.analysis.decide.verdicts import INFO
from harness.analysis.present.run_plots import _file_stem, axis_label

if TYPE_CHECKING:  # report.py draws these plots, so it cannot be imported from here at run time
    from harness.analysis.decide.run_decisions import RunAnalysis

FOREST_STEM = "0-forest"  # sorts first among a report's files and a parent run's MLflow artifacts
COLOURS = {
    "pass": "#1a9850", "better": "#1a9850",
    "fail": "#d73027", "worse": "#d73027",
    "short of margin": "#a6611a",  # better than 0, surely by less than the margin worth having
    "vacuous": "#f28e2b",
    "equivalent": "#4575b4",
    "reference effect": "#000000",
}
UNDECIDED_COLOUR = "#8c8c8c"  # inconclusive, insufficient pairs
CLAIMS = "claims"
EXPLORATORY = "exploratory contrasts"
COMPACT_SECTIONS = (CLAIMS,)  # drawn as touching strips under one title, in this order, before the panels


@dataclass(frozen=True)
class ForestRow:
    label: str
    estimate: float
    low: float | None
    high: float | None
    result: str  # a claim's status, a contrast's verdict, or "reference"
    bounds: tuple[float, ...] = ()  # the claim's margin or ratio bounds, in the panel's units

    @property
    def colour(self) -> str:
        return COLOURS.get(self.result, UNDECIDED_COLOUR)


@dataclass(frozen=True)
class ForestPanel:
    metric: str
    xlabel: str
    null: float  # no effect: 0 for a difference, 1 for a ratio
    rows: tuple[ForestRow, ...]
    section: str = EXPLORATORY  # CLAIMS: a strip of the compact first block; EXPLORATORY: a panel after it


def forest_panels(analysis: RunAnalysis, point: str = "") -> list[ForestPanel]:
    """The panels of one sweep point: a strip per claim (followed by its reference effect), then a
    panel per key metric with the contrasts that no claim already shows."""
    results = analysis.results
    panels = []
    rows: dict[str, list[ForestRow]] = {}
    shown: set[tuple[str, str]] = set()
    for claim in analysis.claims:
        if claim.point != point or claim.estimate is None:
            continue
        ratio = claim.test.needs.ratio
        spec = results.spec_for(claim.key)
        panels.append(ForestPanel(
            metric=claim.key, xlabel=_xlabel(claim.key, spec.unit, spec.direction, ratio), null=1.0 if ratio else 0.0,
            rows=tuple(_claim_rows(claim, spec.better_sign, results.stored.mechanism)), section=CLAIMS,
        ))
        shown.add((claim.contrast, claim.key))
        if claim.reference is not None:
            shown.add((claim.reference.contrast, claim.key))
    for row in analysis.rows:
        if row.point != point or row.verdict == INFO or not results.is_key_metric(row.key):
            continue
        if (row.variant.name, row.key) in shown:
            continue
        difference = row.difference
        interval = difference.interval
        rows.setdefault(row.key, []).append(ForestRow(
            row.variant.name, difference.mean_difference, None if interval is None else interval.low,
            None if interval is None else interval.high, row.verdict,
        ))
    for key, panel_rows in rows.items():
        spec = results.spec_for(key)
        panels.append(ForestPanel(metric=key, xlabel=_xlabel(key, spec.unit, spec.direction, False), null=0.0,
                                  rows=tuple(panel_rows)))
    return panels


def _xlabel(key: str, unit: str, direction: str, ratio: bool) -> str:
    what = "treatment / control" if ratio else "treatment - control"
    return axis_label(f"{key}: {what}", "" if ratio else unit, direction)


def _claim_rows(claim: ClaimResult, sign: int, mechanism: str | None = None) -> list[ForestRow]:
    """The claim's row, with its margin on the worse side (non-inferiority), +-margin (equivalence)
    or [min, max] (ratio); then its reference effect, the evidence that the control works here."""
    interval = claim.interval
    reference = claim.reference
    bounds = claim.test.plot_marks(claim.claim, sign or 1, reference.margin if reference is not None else None)
    premise = f"; VACUOUS: premise {claim.premise.name} {'not met' if claim.premise.status == 'fails' else 'open'}" \
        if claim.premise is not None else ""
    which_way = f"; {claim.which_way}" if claim.which_way else ""
    which_way += f"; {claim.favours(mechanism)}" if claim.favours(mechanism) else ""
    rows = [ForestRow(f"{claim.contrast} {claim.key} ({claim.claim.test}{premise}{which_way})", claim.estimate,
                      None if interval is None else interval.low, None if interval is None else interval.high,
                      claim.status, bounds)]
    if reference is not None and reference.estimate is not None:
        ref_interval = reference.interval
        rows.append(ForestRow(f"reference {reference.contrast}", reference.estimate,
                              None if ref_interval is None else ref_interval.low,
                              None if ref_interval is None else ref_interval.high, "reference effect"))
    return rows


def forest_figure(analysis: RunAnalysis, point: str = "") -> Figure | None:
    """One figure per sweep point, one panel per metric; None when there is nothing to show."""
    panels = forest_panels(analysis, point)
    if not panels:
        return None
    results = analysis.results
    blocks = [[p for p in panels if p.section == section] for section in COMPACT_SECTIONS]
    blocks = [block for block in blocks if block] + [[p] for p in panels if p.section not in COMPACT_SECTIONS]
    heights = [sum(len(p.rows) + (0.8 if p.section in COMPACT_SECTIONS else 1.2) for p in block) + 0.4
               for block in blocks]
    figure = Figure(figsize=(8.0, 1.0 + 0.42 * sum(heights)), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(len(blocks), 1, height_ratios=heights)
    results_seen: dict[str, str] = {}
    titled: set[str] = set()
    for cell, block in zip(grid, blocks):
        compact = block[0].section in COMPACT_SECTIONS
        strips = cell.subgridspec(len(block), 1, height_ratios=[len(p.rows) + 0.8 for p in block])
        for n, panel in enumerate(block):
            axes = figure.add_subplot(strips[n])
            _draw_panel(axes, panel, compact)
            if n == 0 and panel.section not in titled:  # each section's name over its first panel
                titled.add(panel.section)
                axes.set_title(panel.section, fontsize="small", loc="left", fontweight="bold")
            results_seen.update({row.result: row.colour for row in panel.rows})
    where = f" at {point}" if point else ""
    validity = analysis.validity
    counts = "" if validity.claims_count else f"\nvalidity {validity.status.upper()}: the claims do not count"
    figure.suptitle(
        f"{results.suite} ({results.profile}){where}: paired differences over {len(results.seeds)} seed(s), "
        f"{100 * results.confidence:g}% t intervals{counts}", fontsize=10,
    )
    handles = [Line2D([], [], marker="o", linestyle="", color=colour, label=result)
               for result, colour in results_seen.items()]
    figure.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize="small",
                  frameon=False)
    return figure


def _draw_panel(axes, panel: ForestPanel, compact: bool = False) -> None:
    """A panel, or a claim's thin strip: the same marks with small ticks and its scale's label under it."""
    positions = list(range(len(panel.rows)))[::-1]  # the first row on top
    axes.axvline(panel.null, color="black", linewidth=0.8)
    for y, row in zip(positions, panel.rows):
        has_interval = row.low is not None and row.high is not None
        error = [[row.estimate - row.low], [row.high - row.estimate]] if has_interval else None
        hollow = row.result == "reference effect"
        axes.errorbar([row.estimate], [y], xerr=error, fmt="o", capsize=3, color=row.colour,
                      markerfacecolor="white" if hollow else row.colour, label=row.result)
        for bound in row.bounds:
            axes.plot([bound, bound], [y - 0.35, y + 0.35], linestyle="--", color=row.colour, linewidth=1.2)
            axes.annotate("margin" if panel.null == 0 else "bound", (bound, y + 0.35), fontsize="x-small",
                          ha="center", va="bottom", color=row.colour)
    axes.set_yticks(positions)
    axes.set_yticklabels([row.label for row in panel.rows], fontsize="small")
    axes.set_ylim(-0.7, len(panel.rows) - 0.3)
    axes.set_xlabel(panel.xlabel, fontsize="x-small" if compact else "small", labelpad=1 if compact else 4)
    if compact:
        axes.tick_params(axis="x", labelsize="x-small", pad=1)
    axes.grid(True, axis="x", alpha=0.3)


def write_forest_plots(analysis: RunAnalysis, out_dir: Path) -> list[Path]:
    """``0-forest.png`` (``0-forest_<point>.png`` per sweep point) in ``out_dir``, stale ones removed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f"{FOREST_STEM}*.png"):
        stale.unlink()
    points = analysis.results.point_labels()
    paths = []
    for point in points:
        figure = forest_figure(analysis, point)
        if figure is None:
            continue
        stem = FOREST_STEM + (f"_{_file_stem(point)}" if point and len(points) > 1 else "")
        path = out_dir / f"{stem}.png"
        figure.savefig(path, format="png")
        paths.append(path)
    return paths
