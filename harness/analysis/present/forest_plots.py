"""Forest plots: the paired effects the verdicts rest on.

Arm plots show each arm's mean with an unpaired band, which looks far wider than the paired
differences every verdict is computed from. Two figures show those differences directly:

- the claims figure (``0-forest.png``), the report's and the MLflow run's first picture: the primary
  claims only, full width, one row per claim (every sweep point). Each row is a short label (contrast,
  metric, point; the test and its margin under it), a strip on the claim's own scale with the interval
  the claim was decided on (the repeated interval of a sequential design), the estimate, the zero line
  (1 for a ratio), the margin or bounds dashed, and the result word at the right edge in its colour.
  Each strip runs so that its right side is better for the suite's mechanism (for the treatment where
  the mechanism is not in the contrast), and the figure says so above the strips;
- the exploratory figure (``0-forest_exploratory.png``): the contrasts on key metrics, one compact
  panel per metric family, the same way round (each difference signed so, since a panel's rows share
  one axis), with at most ``EXPLORATORY_ROWS`` rows per panel and
  ``EXPLORATORY_PANELS`` panels (the rest is in verdicts.txt).

Both are laid out by hand in figure coordinates, not by a layout engine, so that a long label or many
rows can never collapse an axes: labels are wrapped and shrunk until they fit their column.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from harness.analysis.claim_status import FAIL, PASS, SHORT
from harness.analysis.decide.claims import FOR, ClaimResult
from harness.analysis.decide.verdicts import INFO, ContrastRow
from harness.analysis.present.claim_interval import interval_names, shown_interval
from harness.core.metrics import metric_family

if TYPE_CHECKING:  # report.py draws these plots, so it cannot be imported from here at run time
    from harness.analysis.decide.run_decisions import RunAnalysis

FOREST_STEM = "0-forest"  # sorts first among a report's files and a parent run's MLflow artifacts
CLAIMS_FILE = f"{FOREST_STEM}.png"
EXPLORATORY_FILE = f"{FOREST_STEM}_exploratory.png"  # sorts after the claims figure
COLOURS = {
    "pass": "#1a9850", "better": "#1a9850",
    "fail": "#d73027", "worse": "#d73027",
    "short of margin": "#a6611a",  # better than 0, surely by less than the margin worth having
    "vacuous": "#f28e2b",
    "equivalent": "#4575b4",
}
UNDECIDED_COLOUR = "#8c8c8c"  # inconclusive, insufficient pairs, futile
WIDTH = 10.0  # inches, at DPI: 1,000 px
DPI = 100
LABELS = (0.01, 0.29)  # figure-width fractions: the label column, the strips, the result column
STRIPS = (0.31, 0.81)
RESULTS = (0.83, 0.99)
ROW_INCHES = 0.62
EXPLORATORY_ROWS = 6
EXPLORATORY_PANELS = 6  # with the rows: at most about 1,150 px high
EXPLORATORY_ROW_INCHES = 0.24
FONT = 8.0


@dataclass(frozen=True)
class ForestRow:
    """One row of either figure: numbers as measured; ``flipped``: the axis runs right to left, so that
    its right side is better for the mechanism."""

    label: str
    estimate: float
    low: float | None
    high: float | None
    result: str  # a claim's status or a contrast's verdict
    null: float = 0.0  # no effect: 0 for a difference, 1 for a ratio
    bounds: tuple[float, ...] = ()  # the claim's margin or ratio bounds, in the row's units
    flipped: bool = False
    detail: str = ""  # a claim's test and margin, under its label
    result_text: str = ""  # the words at the right edge

    polarity: str = ""  # a decided claim's: for or against the mechanism

    @property
    def colour(self) -> str:
        """A claim that favours the mechanism green, one that favours its control red, else its result's."""
        if self.polarity:
            return COLOURS[PASS] if self.polarity == FOR else COLOURS[FAIL]
        return COLOURS.get(self.result, UNDECIDED_COLOUR)

    def oriented(self) -> ForestRow:
        """The row with its values signed so that larger is better for the mechanism (a shared axis)."""
        if not self.flipped:
            return self
        return replace(self, estimate=-self.estimate, low=None if self.high is None else -self.high,
                       high=None if self.low is None else -self.low, bounds=tuple(-b for b in self.bounds),
                       null=-self.null, flipped=False)


def better_side_flipped(sign: int, treatment: str, control: str, mechanism: str | None) -> bool:
    """Whether a row's axis must run right to left for its right side to be better for the mechanism
    (for the treatment where the mechanism is not in the contrast): the metric's lower values are
    better, or the mechanism is the control, but not both."""
    lower_better = sign < 0
    mechanism_is_control = bool(mechanism) and control == mechanism and treatment != mechanism
    return lower_better != mechanism_is_control


def claim_rows(analysis: RunAnalysis) -> list[ForestRow]:
    """A row per primary claim with an estimate, in the suite's order, every sweep point."""
    results = analysis.results
    mechanism = results.stored.mechanism
    several_points = len(results.point_labels()) > 1
    rows = []
    for claim in analysis.claims:
        if claim.estimate is None:
            continue
        spec = results.spec_for(claim.key)
        shown = shown_interval(claim, results.confidence)
        reference = claim.reference
        bounds = claim.test.plot_marks(claim.claim, spec.better_sign or 1,
                                       reference.margin if reference is not None else None)
        label = f"{claim.contrast} · {claim.key}" + (f" @ {claim.point}" if claim.point and several_points else "")
        rows.append(ForestRow(
            label=label, estimate=claim.estimate, low=None if shown is None else shown.low,
            high=None if shown is None else shown.high, result=claim.status,
            null=1.0 if claim.test.needs.ratio else 0.0, bounds=bounds,
            flipped=better_side_flipped(spec.better_sign, claim.treatment_arm, claim.control_arm, mechanism),
            detail=_detail(claim, bounds), result_text=_result_words(claim, mechanism),
            polarity=claim.polarity(mechanism),
        ))
    return rows


def _detail(claim: ClaimResult, bounds: tuple[float, ...]) -> str:
    """The test, and the margin's value where it has one: what the strip's dashed marks are."""
    marks = ", ".join(f"{bound:+.4g}" for bound in bounds)
    return claim.statement + (f"; dashed: {marks}" if marks else "")


def _result_words(claim: ClaimResult, mechanism: str | None) -> str:
    word = claim.status.upper()
    side = claim.favours(mechanism)
    if claim.status in (PASS, FAIL, SHORT) and side:
        word += f"\n{side}"
    elif claim.premise is not None:
        word += f"\npremise {claim.premise.name}"
    return word


def exploratory_panels(analysis: RunAnalysis) -> list[tuple[str, list[ForestRow], int]]:
    """(metric family, its rows, how many more rows it has) for the contrasts on key metrics, families in
    the run's order; capped at ``EXPLORATORY_PANELS`` panels of ``EXPLORATORY_ROWS`` rows."""
    results = analysis.results
    mechanism = results.stored.mechanism
    families: dict[str, list[ContrastRow]] = {}
    for row in analysis.rows:
        if row.verdict != INFO and results.is_key_metric(row.key) and row.difference.n:
            families.setdefault(metric_family(row.key), []).append(row)
    several_points = len(results.point_labels()) > 1
    panels = []
    for family, rows in list(families.items())[:EXPLORATORY_PANELS]:
        shown = []
        for row in rows[:EXPLORATORY_ROWS]:
            interval = row.difference.interval
            where = [row.key if row.key != family else "", row.point if several_points else ""]
            shown.append(ForestRow(
                label=" ".join([row.variant.name, *filter(None, where)]), estimate=row.difference.mean_difference,
                low=None if interval is None else interval.low, high=None if interval is None else interval.high,
                result=row.verdict, flipped=better_side_flipped(row.spec.better_sign, row.variant.treatment_arm,
                                                                row.variant.control_arm, mechanism),
                result_text=row.verdict,
            ).oriented())
        panels.append((family, shown, len(rows) - len(shown)))
    return panels


def _better_note(analysis: RunAnalysis) -> str:
    mechanism = analysis.results.stored.mechanism
    who = f"{mechanism} (the mechanism; the treatment where {mechanism} is not in the contrast)" if mechanism \
        else "the treatment"
    return f"right of the solid line: better for {who}"


def claims_figure(analysis: RunAnalysis) -> Figure | None:
    """The primary claims, one full-width row each; None when no claim has an estimate."""
    rows = claim_rows(analysis)
    if not rows:
        return None
    results = analysis.results
    head, foot = 0.7, 0.35  # inches for the title lines and the note under the strips
    height = head + foot + ROW_INCHES * len(rows)
    figure = _figure(height)
    validity = analysis.validity
    counts = "" if validity.claims_count else f"; validity {validity.status.upper()}: the claims do not count"
    names = interval_names([c for c in analysis.claims if c.estimate is not None], results.confidence)
    _title(figure, [f"{results.suite} ({results.profile}): primary claims, treatment - control paired over "
                    f"{len(results.seeds)} seed(s){counts}",
                    f"bars: the {names} interval each claim was decided on; dashed: margin or bounds; "
                    + _better_note(analysis)], height)
    for n, row in enumerate(rows):
        top = height - head - n * ROW_INCHES
        _row(figure, row, top / height, (top - ROW_INCHES) / height)
    figure.text(STRIPS[0], 0.12 / height, "each strip on its claim's own scale; ← worse · better →",
                fontsize=FONT - 1, ha="left", va="bottom", color="#555555")
    return figure


def exploratory_figure(analysis: RunAnalysis) -> Figure | None:
    """The exploratory contrasts on key metrics, one compact panel per metric family; None when none."""
    panels = exploratory_panels(analysis)
    if not panels:
        return None
    results = analysis.results
    head, title = 0.7, 0.3
    height = head + sum(title + EXPLORATORY_ROW_INCHES * len(rows) for _, rows, _ in panels) + 0.2
    figure = _figure(height)
    _title(figure, [f"{results.suite} ({results.profile}): exploratory contrasts (secondary), treatment - control",
                    f"bars: {100 * results.confidence:g}% t intervals, each row one test at its level; signed so that "
                    + _better_note(analysis)], height)
    top = height - head
    for family, rows, more in panels:
        extra = f" (+{more} more rows in verdicts.txt)" if more else ""
        figure.text(LABELS[0], (top - 0.05) / height, f"{family}{extra}", fontsize=FONT, fontweight="bold",
                    ha="left", va="top")
        top -= title
        bottom = top - EXPLORATORY_ROW_INCHES * len(rows)
        _panel(figure, rows, top / height, bottom / height)
        top = bottom
    return figure


def _figure(height: float) -> Figure:
    figure = Figure(figsize=(WIDTH, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _title(figure: Figure, lines: list[str], height: float) -> None:
    for n, line in enumerate(lines):
        _fit(figure.text(LABELS[0], (height - 0.12 - 0.24 * n) / height, line, fontsize=FONT + (1 if n == 0 else 0),
                         fontweight="bold" if n == 0 else "normal", ha="left", va="top"), LABELS[0], RESULTS[1])


def _row(figure: Figure, row: ForestRow, top: float, bottom: float) -> None:
    """A claim's label, its strip and its result word, between ``top`` and ``bottom`` (figure fractions)."""
    middle = (top + bottom) / 2
    label = _wrapped(row.label, 44) + (f"\n{_wrapped(row.detail, 52)}" if row.detail else "")
    _fit(figure.text(LABELS[0], middle, label, fontsize=FONT, ha="left", va="center", linespacing=1.2),
         LABELS[0], LABELS[1])
    pad = 0.18 * (top - bottom)
    axes = figure.add_axes((STRIPS[0], bottom + pad + 0.08 * (top - bottom), STRIPS[1] - STRIPS[0],
                            top - bottom - 2 * pad))
    _draw(axes, [row])
    _fit(figure.text(RESULTS[1], middle, row.result_text, fontsize=FONT, ha="right", va="center", color=row.colour,
                     fontweight="bold", linespacing=1.1), RESULTS[0], RESULTS[1])


def _panel(figure: Figure, rows: list[ForestRow], top: float, bottom: float) -> None:
    """An exploratory family: one axes holding its rows, labels left and verdicts right of it."""
    axes = figure.add_axes((STRIPS[0], bottom, STRIPS[1] - STRIPS[0], top - bottom))
    _draw(axes, rows)
    step = (top - bottom) / len(rows)
    for n, row in enumerate(rows):
        middle = top - (n + 0.5) * step
        _fit(figure.text(LABELS[1], middle, row.label, fontsize=FONT - 1, ha="right", va="center"), LABELS[0], LABELS[1])
        _fit(figure.text(RESULTS[1], middle, row.result_text, fontsize=FONT - 1, ha="right", va="center",
                         color=row.colour), RESULTS[0], RESULTS[1])


def _draw(axes, rows: list[ForestRow]) -> None:
    """The rows' estimates and intervals, the no-effect line and dashed bounds; right is better."""
    positions = list(range(len(rows)))[::-1]  # the first row on top
    values = []
    for y, row in zip(positions, rows):
        has_interval = row.low is not None and row.high is not None
        error = [[row.estimate - row.low], [row.high - row.estimate]] if has_interval else None
        axes.errorbar([row.estimate], [y], xerr=error, fmt="o", markersize=4, capsize=3, color=row.colour)
        for bound in row.bounds:
            axes.plot([bound, bound], [y - 0.4, y + 0.4], linestyle="--", color="#333333", linewidth=1.0)
        values += [row.estimate, row.null, *row.bounds, *((row.low, row.high) if has_interval else ())]
    null = rows[0].null
    axes.axvline(null, color="black", linewidth=0.9)
    low, high = min(values), max(values)
    span = high - low
    if span <= 1e-9 * max(abs(low), abs(high), 1.0):  # every value the same (equal bytes): a unit window
        span = max(abs(high), 1.0)
        low, high = low - span / 2, high + span / 2
    axes.set_xlim(low - 0.08 * span, high + 0.08 * span)
    if rows[0].flipped:
        axes.invert_xaxis()
    axes.set_ylim(-0.6, len(rows) - 0.4)
    axes.set_yticks([])
    axes.tick_params(axis="x", labelsize=FONT - 2, pad=1, length=2)
    axes.grid(True, axis="x", alpha=0.3)


def _wrapped(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def _fit(text: Text, left: float, right: float) -> None:
    """Shrink a text until it lies between ``left`` and ``right`` (figure fractions) and inside the figure."""
    figure = text.get_figure()
    renderer = figure.canvas.get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    while text.get_fontsize() > 4:
        box = text.get_window_extent(renderer)
        if box.x0 >= left * width - 0.5 and box.x1 <= right * width + 0.5 and box.y0 >= 0 and box.y1 <= height:
            return
        text.set_fontsize(text.get_fontsize() - 0.5)


def write_forest_plots(analysis: RunAnalysis, out_dir: Path) -> list[Path]:
    """The claims figure, then the exploratory figure, in ``out_dir`` (stale forest plots removed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f"{FOREST_STEM}*.png"):
        stale.unlink()
    paths = []
    for name, figure in ((CLAIMS_FILE, claims_figure(analysis)), (EXPLORATORY_FILE, exploratory_figure(analysis))):
        if figure is not None:
            path = out_dir / name
            figure.savefig(path, format="png")
            paths.append(path)
    return paths
