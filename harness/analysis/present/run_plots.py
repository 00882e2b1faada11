"""Figures from stored results, one message per figure, rendered to PNG with the Agg canvas.

Builders turn ``RunResults`` into ``FigureSpec`` data; one renderer draws every spec. A builder
whose data is absent yields nothing, so the same code serves every suite:

- training curves per arm with a min-max band over seeds (trial ``curves``);
- each directed metric per arm with 95% CIs, or against a numeric sweep axis when the suite
  sweeps one (recall@k vs bank size, throughput vs bank size);
- a metric family against the number after '@' in its keys (nmse@256..., tokens/s per context),
  the axis named by the metric's declared ``axis``;
- a metric against the family it declares ``pairs_with`` over that family's axis (recurrent-state
  bytes against the KV cache over context);
- per-item scatters of paired lists that tasks record in trial ``details``, as the task declares
  them (suite.json ``detail_scatters``);
- Pareto views: one point per arm variant, a metric's mean against another's (accuracy against
  the bytes an arm adds), as the task declares them (suite.json ``pareto_views``);
- beside each figure that compares arms on a key metric (per arm, or by qualifier), the same
  comparison as each contrast's seed-paired difference with its t interval and a zero line: what
  the verdicts read, and much narrower than the arms' unpaired bands.

Every hint comes from the task's declarations stored in suite.json: this module names no task
and no task metric.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.analysis.decide.verdicts import compare, contrast_variants
from harness.analysis.run_results import RunResults
from harness.analysis.stats.paired_stats import CONFIDENCE, summarize
from harness.core.metrics import ParetoView, metric_family
from harness.suite.points import point_label

LOG_AXIS_SPAN = 8.0
LEGEND_INSIDE_LIMIT = 8  # more series than this get their legend beside the axes
MARKER_LIMIT = 30  # longer lines (training curves) are drawn without point markers
# Series differ in marker and line style too, so identical series (e.g. equal state bytes) stay visible.
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":")  # a numeric axis spanning at least this factor is drawn on a log scale


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float | str, ...]
    y: tuple[float, ...]
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None


@dataclass(frozen=True)
class FigureSpec:
    """style: 'line' (numeric x, shaded band), 'categorical' (error bars), 'scatter', or 'points'
    (one labelled point per series with its error bar on y)."""

    name: str
    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...]
    style: str
    logx: bool = False
    logy: bool = False
    zero_line: bool = False  # a paired difference: no effect at y = 0


def build_figures(results: RunResults) -> list[FigureSpec]:
    """Every figure the stored data supports."""
    return [
        *training_curve_figures(results),
        *metric_figures(results),
        *qualifier_figures(results),
        *paired_difference_figures(results),
        *paired_figures(results),
        *detail_scatter_figures(results),
        *pareto_figures(results),
    ]


def write_plots(results: RunResults, out_dir: Path) -> list[Path]:
    """Render every figure to ``out_dir`` (stale PNGs from an earlier report are removed, but only
    inside the run folder: a plots folder linked elsewhere keeps the files that were there)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir.resolve().is_relative_to(results.run_dir.resolve()):
        for stale in out_dir.glob("*.png"):
            stale.unlink()
    paths: list[Path] = []
    used: set[str] = set()
    for spec in build_figures(results):
        stem = _file_stem(spec.name)
        candidate, n = stem, 1
        while candidate in used:
            n += 1
            candidate = f"{stem}_{n}"
        used.add(candidate)
        path = out_dir / f"{candidate}.png"
        render(spec, path)
        paths.append(path)
    return paths


def render(spec: FigureSpec, path: Path) -> None:
    figure = Figure(figsize=(7.5, 4.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if spec.style == "categorical":
        draw_categorical(axes, spec.series)
    else:
        for n, series in enumerate(spec.series):
            marker = MARKERS[n % len(MARKERS)]
            if spec.style == "points":
                low = series.low or series.y
                high = series.high or series.y
                errors = [[y - lo for y, lo in zip(series.y, low)], [hi - y for y, hi in zip(series.y, high)]]
                axes.errorbar(series.x, series.y, yerr=errors, fmt=marker, capsize=3, label=series.label,
                              color=f"C{n % 10}")
                continue
            if spec.style == "scatter":
                axes.scatter(series.x, series.y, s=14, alpha=0.6, marker=marker, label=series.label)
                continue
            (line,) = axes.plot(
                series.x, series.y, label=series.label, linestyle=LINESTYLES[n % len(LINESTYLES)],
                marker=marker if len(series.x) <= MARKER_LIMIT else None, markersize=5,
            )
            if series.low is not None and series.high is not None and len(series.x) > 1:
                axes.fill_between(series.x, series.low, series.high, alpha=0.2, color=line.get_color())
    if spec.zero_line:
        axes.axhline(0.0, color="black", linewidth=0.8)
    if spec.logx:
        axes.set_xscale("log")
    if spec.logy:
        axes.set_yscale("log")
    axes.set_title(spec.title, fontsize=10, wrap=True)
    axes.set_xlabel(spec.xlabel)
    axes.set_ylabel(spec.ylabel)
    axes.grid(True, alpha=0.3)
    crowded = len(spec.series) > LEGEND_INSIDE_LIMIT
    if any(series.label for series in spec.series):
        if crowded:  # beside the axes, where it cannot cover the data
            axes.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.01, 0.5))
        else:
            axes.legend(fontsize="small", loc="best")
    figure.tight_layout()
    figure.savefig(path, format="png", bbox_inches="tight" if crowded else None)


def training_curve_figures(results: RunResults) -> list[FigureSpec]:
    """Mean curve per arm over seeds, band from the lowest to the highest seed at each step."""
    figures = []
    curve_keys = sorted({key for trial in results.finished for key in trial.curves})
    points = results.point_labels()
    for key in curve_keys:
        for point in points:
            series = []
            seeds = 0
            for label in results.arm_labels():
                by_step: dict[float, list[float]] = defaultdict(list)
                trials = [t for t in results.trials_of(label, point) if key in t.curves]
                for trial in trials:
                    for step, value in _pairs(trial.curves[key]):
                        by_step[step].append(value)
                if not by_step:
                    continue
                seeds = max(seeds, len(trials))
                steps = sorted(by_step)
                series.append(
                    Series(
                        label,
                        tuple(steps),
                        tuple(sum(by_step[s]) / len(by_step[s]) for s in steps),
                        tuple(min(by_step[s]) for s in steps),
                        tuple(max(by_step[s]) for s in steps),
                    )
                )
            if series:
                figures.append(
                    FigureSpec(
                        name=f"curve_{key}{_suffix(point, points)}",
                        title=_title(results, f"{key} during training, mean of {seeds} seed(s), band = min-max", point, points),
                        xlabel="training step",
                        ylabel=axis_label(key, results.spec_for(key).unit),
                        series=tuple(series),
                        style="line",
                    )
                )
    return figures


def metric_figures(results: RunResults) -> list[FigureSpec]:
    """Key metrics per arm with 95% CIs; with a numeric sweep axis, key, speed and memory
    metrics against that axis instead."""
    keys = _key_metrics(results)
    axes = _numeric_axes(results)
    if axes:
        sized = [k for k in results.metric_keys() if k in keys or _is_cost(results, k)]
        return [figure for axis in axes for key in sized if (figure := _metric_vs_axis(results, key, axis))]
    qualified = _qualifier_families(results)
    return [figure for key in keys if metric_family(key) not in qualified if (figure := _metric_per_arm(results, key))]


def qualifier_figures(results: RunResults) -> list[FigureSpec]:
    """A metric family against the number after '@' (e.g. NMSE per evaluation context)."""
    figures = []
    points = results.point_labels()
    special = {family for pair in _pairings(results) for family in pair}
    for family, keys in sorted(_qualifier_families(results).items()):
        if family in special:
            continue
        spec = results.spec_for(keys[0])
        for point in points:
            series = []
            for label in results.arm_labels():
                line = summary_series(((_qualifier(key), results.values(label, point, key)) for key in keys), label)
                if line:
                    series.append(line)
            if series:
                xs = [_qualifier(key) for key in keys]
                axis = _qualifier_axis(results, family)
                figures.append(
                    FigureSpec(
                        name=f"{family}_by_qualifier{_suffix(point, points)}",
                        title=_title(results, f"{family} by {axis}, mean and 95% CI over seeds", point, points),
                        xlabel=axis,
                        ylabel=axis_label(family, spec.unit, spec.direction),
                        series=tuple(series),
                        style="line",
                        logx=_wide(xs),
                    )
                )
    return figures


def paired_figures(results: RunResults) -> list[FigureSpec]:
    """A metric per arm (flat unless qualified like its partner) against the family it declares
    ``pairs_with``, over the partner's qualifiers: e.g. recurrent-state bytes vs the KV cache."""
    figures = []
    points = results.point_labels()
    for family, partner in _pairings(results):
        partner_keys = _qualifier_families(results)[partner]
        xs = [_qualifier(key) for key in partner_keys]
        axis = _qualifier_axis(results, partner)
        for point in points:
            series = []
            for label in results.arm_labels():
                values = []
                for x, partner_key in zip(xs, partner_keys):
                    key = _key_at(results, family, label, point, partner_key)
                    values.append((x, results.values(label, point, key) if key else {}))
                line = summary_series(values, f"{label}: {family}")
                if line:
                    series.append(line)
            trials = [t for label in results.arm_labels() for t in results.trials_of(label, point)]
            partner_values = [
                (x, {n: t.metrics[key] for n, t in enumerate(trials) if _is_number(t.metrics.get(key))})
                for x, key in zip(xs, partner_keys)
            ]
            line = summary_series(partner_values, f"{partner} (every arm)")
            if line:
                series.append(line)
            if series:
                figures.append(
                    FigureSpec(
                        name=f"{family}_vs_{partner}{_suffix(point, points)}",
                        title=_title(results, f"{family} vs {partner} over {axis}", point, points),
                        xlabel=axis,
                        ylabel=results.spec_for(family).unit or family,
                        series=tuple(series),
                        style="line",
                        logx=_wide([x for x in xs if x is not None]),
                        logy=True,
                    )
                )
    return figures


def paired_difference_figures(results: RunResults) -> list[FigureSpec]:
    """Each contrast's mean paired difference (treatment - control) with its t interval: per
    contrast for a key metric drawn per arm, over the sweep axis or the qualifier where the arms
    are drawn against it."""
    variants = contrast_variants(results)
    if not variants:
        return []
    points = results.point_labels()
    qualified = _qualifier_families(results)
    level = f"{100 * results.confidence:g}% CI"
    axes = _numeric_axes(results)
    if axes:
        return [figure for axis in axes for key in _key_metrics(results)
                if (figure := _paired_vs_axis(results, variants, key, axis, level))]
    figures = []
    for key in _key_metrics(results):
        if metric_family(key) in qualified:
            continue
        series = []
        for point in points:
            cells = [(v.name, compare(results, v.treatment_label, v.control_label, point, key)) for v in variants]
            cells = [(name, d) for name, d in cells if d is not None and d.interval is not None]
            if cells:
                series.append(Series(point, tuple(name for name, _ in cells),
                                     tuple(d.mean_difference for _, d in cells),
                                     tuple(d.interval.low for _, d in cells), tuple(d.interval.high for _, d in cells)))
        if series:
            spec = results.spec_for(key)
            figures.append(FigureSpec(
                name=f"{key}_paired_differences",
                title=_title(results, f"{key}, treatment - control paired by seed, mean and {level}", "", []),
                xlabel="contrast", ylabel=axis_label(f"{key} difference", spec.unit, spec.direction),
                series=tuple(series), style="categorical", zero_line=True,
            ))
    for family, keys in sorted(qualified.items()):
        if not any(results.is_key_metric(key) for key in keys):
            continue
        spec = results.spec_for(keys[0])
        for point in points:
            series = []
            for variant in variants:
                differences = [(_qualifier(key), compare(results, variant.treatment_label, variant.control_label,
                                                         point, key)) for key in keys]
                kept = [(x, d) for x, d in differences if d is not None and d.interval is not None]
                if kept:
                    series.append(Series(variant.name, tuple(x for x, _ in kept),
                                         tuple(d.mean_difference for _, d in kept),
                                         tuple(d.interval.low for _, d in kept), tuple(d.interval.high for _, d in kept)))
            if series:
                axis = _qualifier_axis(results, family)
                figures.append(FigureSpec(
                    name=f"{family}_paired_differences_by_qualifier{_suffix(point, points)}",
                    title=_title(results, f"{family} by {axis}, treatment - control paired by seed, mean and {level}",
                                 point, points),
                    xlabel=axis, ylabel=axis_label(f"{family} difference", spec.unit, spec.direction),
                    series=tuple(series), style="line", logx=_wide([_qualifier(key) for key in keys]), zero_line=True,
                ))
    return figures


def _paired_vs_axis(results: RunResults, variants, key: str, axis: str, level: str) -> FigureSpec | None:
    """One line per contrast (and value of the other sweep axes) over a numeric sweep axis."""
    groups: dict[tuple[str, str], list[tuple[float, Any]]] = defaultdict(list)
    for point in results.point_labels():
        coordinates = results.point_of(point)
        if axis not in coordinates:
            continue
        rest = point_label({k: v for k, v in coordinates.items() if k != axis})
        for variant in variants:
            difference = compare(results, variant.treatment_label, variant.control_label, point, key)
            if difference is not None and difference.interval is not None:
                groups[(variant.name, rest)].append((float(coordinates[axis]), difference))
    series = []
    for (name, rest), cells in groups.items():
        cells.sort(key=lambda cell: cell[0])
        series.append(Series(f"{name} {rest}".strip(), tuple(x for x, _ in cells),
                             tuple(d.mean_difference for _, d in cells), tuple(d.interval.low for _, d in cells),
                             tuple(d.interval.high for _, d in cells)))
    if not series:
        return None
    spec = results.spec_for(key)
    xs = [float(v) for v in results.stored.sweep.get(axis, [])]
    return FigureSpec(
        name=f"{key}_paired_differences_vs_{axis}",
        title=_title(results, f"{key} vs {axis}, treatment - control paired by seed, mean and {level}", "", []),
        xlabel=axis.replace("_", " "), ylabel=axis_label(f"{key} difference", spec.unit, spec.direction),
        series=tuple(series), style="line", logx=_wide(xs), zero_line=True,
    )


def detail_scatter_figures(results: RunResults) -> list[FigureSpec]:
    figures = []
    points = results.point_labels()
    for scatter in results.stored.detail_scatters:
        for point in points:
            series = []
            for label in results.arm_labels():
                xs: list[float] = []
                ys: list[float] = []
                for trial in results.trials_of(label, point):
                    detail = trial.details.get(scatter.detail)
                    x, y = (detail.get(scatter.x_key), detail.get(scatter.y_key)) if isinstance(detail, dict) else (None, None)
                    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
                        kept = [(a, b) for a, b in zip(x, y) if _is_number(a) and _is_number(b)]
                        xs.extend(a for a, _ in kept)
                        ys.extend(b for _, b in kept)
                if xs:
                    series.append(Series(label, tuple(xs), tuple(ys)))
            if series:
                figures.append(
                    FigureSpec(
                        name=f"{scatter.detail}{_suffix(point, points)}",
                        title=_title(results, f"{scatter.title} (all seeds)", point, points),
                        xlabel=scatter.xlabel,
                        ylabel=scatter.ylabel,
                        series=tuple(series),
                        style="scatter",
                    )
                )
    return figures


def pareto_figures(results: RunResults) -> list[FigureSpec]:
    """Per declared view and sweep point: each arm variant at (mean x, mean y) with y's 95% CI. A view
    whose y is a family reported at several qualifiers (recall per load) draws them all in one figure,
    a series per qualifier, so that where y falls with the qualifier shows against x."""
    figures = []
    points = results.point_labels()
    qualified = _qualifier_families(results)
    for view in results.stored.pareto_views:
        if view.y in qualified:
            figures.extend(_pareto_per_qualifier(results, view, qualified[view.y]))
            continue
        for point in points:
            series = []
            for label in results.arm_labels():
                xs = summarize(list(results.values(label, point, view.x).values()))
                ys = summarize(list(results.values(label, point, view.y).values()))
                if xs is None or ys is None:
                    continue
                series.append(Series(label, (xs.mean,), (ys.mean,), (ys.interval.low,), (ys.interval.high,)))
            if len(series) >= 2:
                figures.append(_pareto_figure(results, view, point, points, series))
    return figures


def _pareto_figure(results: RunResults, view: ParetoView, point: str, points: list[str],
                   series: list[Series]) -> FigureSpec:
    x_spec, y_spec = results.spec_for(view.x), results.spec_for(view.y)
    return FigureSpec(
        name=f"pareto_{view.y}_vs_{view.x}{_suffix(point, points)}",
        title=_title(results, f"{view.title}, mean over seeds (95% CI)", point, points),
        xlabel=axis_label(view.x, x_spec.unit, x_spec.direction),
        ylabel=axis_label(view.y, y_spec.unit, y_spec.direction),
        series=tuple(series),
        style="points",
    )


def _pareto_per_qualifier(results: RunResults, view: ParetoView, keys: list[str]) -> list[FigureSpec]:
    figures = []
    points = results.point_labels()
    axis = _qualifier_axis(results, view.y)
    for point in points:
        series = []
        for key in keys:
            placed = []
            for label in results.arm_labels():
                xs = summarize(list(results.values(label, point, view.x).values()))
                ys = summarize(list(results.values(label, point, key).values()))
                if xs is not None and ys is not None:
                    placed.append((xs.mean, ys.mean, ys.interval.low, ys.interval.high))
            if placed:
                x, y, low, high = zip(*sorted(placed))
                series.append(Series(f"{axis} {key.split('@', 1)[1]}", x, y, low, high))
        if series:
            figures.append(_pareto_figure(results, view, point, points, series))
    return figures


def _metric_vs_axis(results: RunResults, key: str, axis: str) -> FigureSpec | None:
    spec = results.spec_for(key)
    groups: dict[tuple[str, str], list[tuple[float, dict[int, float]]]] = defaultdict(list)
    for point in results.point_labels():
        coordinates = results.point_of(point)
        if axis not in coordinates:
            continue
        rest = point_label({k: v for k, v in coordinates.items() if k != axis})
        for label in results.arm_labels():
            values = results.values(label, point, key)
            if values:
                groups[(label, rest)].append((float(coordinates[axis]), values))
    series = []
    for (label, rest), values in groups.items():
        line = summary_series(sorted(values, key=lambda item: item[0]), f"{label} {rest}".strip())
        if line:
            series.append(line)
    if not series:
        return None
    xs = [float(v) for v in results.stored.sweep.get(axis, [])]
    return FigureSpec(
        name=f"{key}_vs_{axis}",
        title=_title(results, f"{key} vs {axis}, mean and 95% CI over seeds", "", []),
        xlabel=axis.replace("_", " "),
        ylabel=axis_label(key, spec.unit, spec.direction),
        series=tuple(series),
        style="line",
        logx=_wide(xs),
    )


def _metric_per_arm(results: RunResults, key: str) -> FigureSpec | None:
    spec = results.spec_for(key)
    series = []
    for point in results.point_labels():
        line = summary_series(((label, results.values(label, point, key)) for label in results.arm_labels()), point)
        if line is not None:
            series.append(line)
    if not series:
        return None
    return FigureSpec(
        name=f"{key}_per_arm",
        title=_title(results, f"{key} per arm, mean and 95% CI over seeds", "", []),
        xlabel="arm",
        ylabel=axis_label(key, spec.unit, spec.direction),
        series=tuple(series),
        style="categorical",
    )


def draw_categorical(axes, series: Sequence[Series]) -> None:
    """Each series' points with error bars, side by side at every category."""
    categories: list[str] = []
    for one in series:
        categories.extend(str(x) for x in one.x if str(x) not in categories)
    width = 0.6 / max(len(series), 1)
    for n, one in enumerate(series):
        offset = (n - (len(series) - 1) / 2) * width
        positions = [categories.index(str(x)) + offset for x in one.x]
        low = one.low or one.y
        high = one.high or one.y
        errors = [[y - lo for y, lo in zip(one.y, low)], [hi - y for y, hi in zip(one.y, high)]]
        axes.errorbar(positions, one.y, yerr=errors, fmt=MARKERS[n % len(MARKERS)], capsize=4, label=one.label)
    axes.set_xticks(range(len(categories)))
    crowded = len(categories) > 3
    axes.set_xticklabels(categories, rotation=20 if crowded else 0, ha="right" if crowded else "center")


def summary_series(values: Iterable[tuple[Any, Mapping[int, float]]], label: str,
                   confidence: float = CONFIDENCE) -> Series | None:
    """Mean and t interval over seeds at each x (a number or a category) that has a value."""
    xs, means, lows, highs = [], [], [], []
    for x, by_seed in values:
        summary = summarize(list(by_seed.values()), confidence)
        if summary is None:
            continue
        xs.append(x)
        means.append(summary.mean)
        lows.append(summary.interval.low)
        highs.append(summary.interval.high)
    if not xs:
        return None
    return Series(label, tuple(xs), tuple(means), tuple(lows), tuple(highs))


def _key_metrics(results: RunResults) -> list[str]:
    return [k for k in results.metric_keys() if results.is_key_metric(k)]


def _is_cost(results: RunResults, key: str) -> bool:
    """Speed and memory figures are worth plotting against size even when not key metrics."""
    spec = results.spec_for(key)
    return spec.kind in ("speed", "memory") and spec.direction != "none"


def _numeric_axes(results: RunResults) -> list[str]:
    sweep = results.stored.sweep
    return [axis for axis, values in sweep.items() if len(values) >= 2 and all(_is_number(v) for v in values)]


def _qualifier_families(results: RunResults) -> dict[str, list[str]]:
    """Families reported with two or more numeric qualifiers, keys sorted by qualifier."""
    families: dict[str, list[str]] = defaultdict(list)
    for key in results.metric_keys():
        if _qualifier(key) is not None and results.spec_for(key).kind != "info":
            families[metric_family(key)].append(key)
    return {f: sorted(keys, key=_qualifier) for f, keys in families.items() if len(keys) >= 2}


def _pairings(results: RunResults) -> list[tuple[str, str]]:
    """(family, partner) for each declared ``pairs_with`` whose partner is reported over 2+ qualifiers."""
    reported = {metric_family(k) for k in results.metric_keys()}
    qualified = _qualifier_families(results)
    return [
        (family, spec.pairs_with)
        for family, spec in sorted(results.metric_specs.items())
        if spec.pairs_with and family in reported and spec.pairs_with in qualified
    ]


def _key_at(results: RunResults, family: str, label: str, point: str, partner_key: str) -> str | None:
    """The family's key at the partner key's qualifier, else its unqualified key, else None."""
    qualified = f"{family}@{partner_key.split('@', 1)[1]}"
    keys = results.metric_keys(label, point)
    if qualified in keys:
        return qualified
    return family if family in keys else None


def _qualifier_axis(results: RunResults, family: str) -> str:
    return results.spec_for(family).axis or f"N in '{family}@N'"


def _qualifier(key: str) -> float | None:
    if "@" not in key:
        return None
    try:
        value = float(key.split("@", 1)[1])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _pairs(curve: object) -> list[tuple[float, float]]:
    if not isinstance(curve, list):
        return []
    return [
        (float(item[0]), float(item[1]))
        for item in curve
        if isinstance(item, (list, tuple)) and len(item) == 2 and _is_number(item[0]) and _is_number(item[1])
    ]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _wide(xs: Sequence[float]) -> bool:
    positive = [x for x in xs if x > 0]
    return len(positive) == len(xs) >= 2 and max(positive) / min(positive) >= LOG_AXIS_SPAN


def axis_label(name: str, unit: str, direction: str = "none") -> str:
    label = f"{name} ({unit})" if unit else name
    hint = {"higher": "higher is better", "lower": "lower is better"}.get(direction)
    return f"{label}, {hint}" if hint else label


def _title(results: RunResults, what: str, point: str, points: Sequence[str]) -> str:
    where = f" at {point}" if point and len(points) > 1 else ""
    return f"{results.suite} ({results.profile}): {what}{where}"


def _suffix(point: str, points: Sequence[str]) -> str:
    return f"_{point}" if point and len(points) > 1 else ""


def _file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace("@", "_at_")).strip("_") or "figure"
