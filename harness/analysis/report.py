"""The report of one run, rebuilt from stored results alone: text tables, summary JSON, plots.

``build_report(run_dir)`` is what the spine calls at the end of a run (and ``harness report``
calls for stored results); it writes everything under ``<run_dir>/report/`` and returns a
``RunReport`` naming the files, so the caller can print the text and log the files to MLflow.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from harness.analysis.claims import ClaimResult, evaluate_claims
from harness.analysis.plots import write_plots
from harness.analysis.results import RunResults, load_results
from harness.analysis.stats import BOOTSTRAP_SEED, CONFIDENCE, RESAMPLES, Interval, PairedDifference, summarize
from harness.analysis.verdicts import BETTER, WORSE, ContrastRow, Validity, evaluate_contrasts, evaluate_validity
from harness.store import SUITE_FILE, iter_trial_files, write_json_atomic, write_text_atomic
from harness.terminal import format_table, format_value

REPORT_DIR = "report"
PLOTS_DIR = "plots"
SUMMARY_FILE = "summary.json"
TEXT_FILE = "verdicts.txt"


@dataclass(frozen=True)
class RunAnalysis:
    """Everything decided from one run's stored results, before anything is written."""

    results: RunResults
    rows: tuple[ContrastRow, ...]
    validity: Validity
    claims: tuple[ClaimResult, ...]


@dataclass(frozen=True)
class RunReport:
    """What ``build_report`` wrote for one ``<suite>/<profile>`` run.

    ``text`` is the terminal report (validity, failed trials, verdict table, claims);
    ``summary_path`` the machine-readable summary; ``plot_paths`` every PNG written, so the
    spine can log ``summary_path``, ``text_path`` and ``plot_paths`` as MLflow artifacts.
    ``valid`` is None when the suite declares no validity controls.
    """

    run_dir: Path
    suite: str
    profile: str
    report_dir: Path
    summary_path: Path
    text_path: Path
    plot_paths: tuple[Path, ...]
    text: str
    valid: bool | None
    failed_trials: int

    @property
    def artifact_paths(self) -> tuple[Path, ...]:
        return (self.summary_path, self.text_path, *self.plot_paths)


def analyse(results: RunResults) -> RunAnalysis:
    return RunAnalysis(
        results=results,
        rows=tuple(evaluate_contrasts(results)),
        validity=evaluate_validity(results),
        claims=tuple(evaluate_claims(results)),
    )


def build_report(run_dir: Path) -> RunReport:
    """Analyse one run folder and write ``report/`` (summary.json, verdicts.txt, plots/*.png)."""
    results = load_results(Path(run_dir))
    analysis = analyse(results)
    report_dir = results.run_dir / REPORT_DIR
    plot_paths = write_plots(results, report_dir / PLOTS_DIR)
    text = render_report(analysis)
    summary_path = report_dir / SUMMARY_FILE
    text_path = report_dir / TEXT_FILE
    write_json_atomic(summary_path, summary(analysis, [p.relative_to(report_dir).as_posix() for p in plot_paths]))
    write_text_atomic(text_path, text + "\n")
    return RunReport(
        run_dir=results.run_dir,
        suite=results.suite,
        profile=results.profile,
        report_dir=report_dir,
        summary_path=summary_path,
        text_path=text_path,
        plot_paths=tuple(plot_paths),
        text=text,
        valid=analysis.validity.valid,
        failed_trials=len(results.failed),
    )


ARM_TABLE_COLUMNS = 6


def render_arm_table(results: RunResults) -> str:
    """Arms x key metrics, mean ± sd over seeds, per sweep point: the first table after a run."""
    keys = results.metric_keys()
    columns = [k for k in keys if results.spec_for(k).key] or [
        k for k in keys if results.spec_for(k).kind == "quality"
    ]
    columns = columns[:ARM_TABLE_COLUMNS]
    points = results.point_labels()
    rows = []
    for point in points:
        for label in results.arm_labels():
            trials = results.trials_of(label, point)
            if not trials:
                continue
            cells = [_mean_sd(list(results.values(label, point, key).values())) for key in columns]
            rows.append([label, *([point] if point else []), str(len(trials)), *cells])
    if not rows:
        return "(no finished trials)"
    header = ["arm", *(["point"] if any(points) else []), "seeds", *columns]
    return format_table(header, rows)


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return format_value(values[0])
    data = np.asarray(values)
    return f"{format_value(float(data.mean()))} ± {format_value(float(data.std(ddof=1)))}"


def stored_report_text(run_dir: Path) -> str | None:
    """The last report's text if no trial or suite file changed since (a rerun that ran nothing)."""
    text_path = Path(run_dir) / REPORT_DIR / TEXT_FILE
    if not text_path.exists():
        return None
    written = text_path.stat().st_mtime
    inputs = [Path(run_dir) / SUITE_FILE, *iter_trial_files(run_dir)]
    if any(p.stat().st_mtime > written for p in inputs if p.exists()):
        return None
    return text_path.read_text(encoding="utf-8").rstrip("\n")


def render_report(analysis: RunAnalysis) -> str:
    """Heading, validity, failed trials, verdict table and claims, as terminal text."""
    results = analysis.results
    parts = [
        f"== {results.suite} / {results.profile}  ({results.meta.get('device_name') or results.device_class})",
        render_validity(analysis.validity),
    ]
    if results.failed:
        parts.append(render_failed(results))
    parts.append(render_verdict_table(analysis))
    if analysis.claims:
        parts.append(render_claims(analysis.claims, analysis.validity.valid is False))
    return "\n\n".join(part for part in parts if part)


def render_verdict_table(analysis: RunAnalysis) -> str:
    """One line per contrast x sweep point x key metric; the other rows are in summary.json."""
    results = analysis.results
    rows = [row for row in analysis.rows if results.is_key_metric(row.key)]
    hidden = len(analysis.rows) - len(rows)
    note = f"\n({hidden} more rows, non-key or informational metrics, are in summary.json)" if hidden else ""
    if not rows:
        return ("no contrast has paired results" if not analysis.rows else "no key metrics to compare") + note
    invalid = analysis.validity.valid is False
    with_points = any(row.point for row in rows)
    with_margins = any(row.margin for row in rows)
    header = ["contrast", *(["point"] if with_points else []), "metric", "better", "n", "control", "treatment",
              "diff", "rel", "95% CI of diff", *(["margin"] if with_margins else []), "verdict"]
    lines = []
    for row in rows:
        difference = row.difference
        shown = row.verdict.upper() if row.verdict in (BETTER, WORSE) else row.verdict
        lines.append([
            row.variant.name,
            *([row.point] if with_points else []),
            f"{row.key} [{row.spec.unit}]" if row.spec.unit else row.key,
            row.spec.direction,
            str(difference.n),
            fmt(difference.control_mean),
            fmt(difference.treatment_mean),
            fmt(difference.mean_difference, signed=True),
            _percent(difference.relative_change),
            _interval(difference),
            *([f"+-{row.margin:g}" if row.margin else "-"] if with_margins else []),
            f"{shown} (INVALID)" if invalid else shown,
        ])
    return _table(header, lines) + note


def render_validity(validity: Validity) -> str:
    if validity.valid is None:
        return "validity: no positive/negative controls declared"
    if validity.valid:
        return f"validity: OK ({'; '.join(c.reason for c in validity.checks) or 'no checks'})"
    return "validity: INVALID, verdicts below do not count: " + "; ".join(validity.problems)


def render_failed(results: RunResults) -> str:
    lines = [[f.arm_label, "" if f.seed is None else str(f.seed), f.point_label or "-", f.error] for f in results.failed]
    return f"{len(results.failed)} failed trial(s), excluded from contrasts:\n" + _table(["arm", "seed", "point", "error"], lines)


def render_claims(claims: Sequence[ClaimResult], invalid: bool) -> str:
    lines = [
        [
            claim.contrast,
            claim.point or "-",
            claim.key,
            claim.statement,
            str(claim.n),
            "-" if claim.estimate is None else fmt(claim.estimate, signed=claim.claim["test"] != "ratio"),
            "-" if claim.interval is None or claim.interval.degenerate else _bounds(claim.interval, claim.claim["test"] != "ratio"),
            f"{claim.status.upper()}{' (INVALID)' if invalid else ''}",
            claim.detail,
        ]
        for claim in claims
    ]
    return "claims:\n" + _table(["contrast", "point", "metric", "test", "n", "estimate", "95% CI", "result", "why"], lines)


def summary(analysis: RunAnalysis, plots: Sequence[str]) -> dict[str, Any]:
    """The machine-readable report: every contrast row (informational ones too), claims, arms."""
    results = analysis.results
    validity = analysis.validity
    return {
        "schema": 1,
        "suite": results.suite,
        "profile": results.profile,
        "task": results.meta.get("task"),
        "device_class": results.device_class,
        "device_name": results.meta.get("device_name"),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "statistics": {"confidence": CONFIDENCE, "bootstrap_resamples": RESAMPLES, "bootstrap_seed": BOOTSTRAP_SEED,
                       "pairing": "seed within sweep point", "difference": "treatment - control"},
        "valid": validity.valid,
        "validity": {
            "metric": validity.metric,
            "control": validity.control,
            "problems": list(validity.problems),
            "checks": [
                {"role": c.role, "arm": c.arm_label, "point": c.point, "beats_control": c.beats_control, "ok": c.ok,
                 "reason": c.reason, **(_difference_json(c.difference) if c.difference else {})}
                for c in validity.checks
            ],
        },
        "failed_trials": [f.as_dict() for f in results.failed],
        "contrasts": [
            {
                "contrast": row.variant.name,
                "declared_contrast": row.variant.declared_name,
                "treatment": row.variant.treatment_label,
                "control": row.variant.control_label,
                "point": row.point,
                "metric": row.key,
                "direction": row.spec.direction,
                "kind": row.spec.kind,
                "unit": row.spec.unit,
                "margin": row.margin,
                "verdict": row.verdict,
                "counts": validity.valid is not False,
                **_difference_json(row.difference),
            }
            for row in analysis.rows
        ],
        "claims": [
            {
                **dict(claim.claim),
                "variant": claim.contrast,
                "point": claim.point,
                "key": claim.key,
                "result": claim.status,
                "n": claim.n,
                "estimate": claim.estimate,
                "ci_low": None if claim.interval is None else claim.interval.low,
                "ci_high": None if claim.interval is None else claim.interval.high,
                "detail": claim.detail,
                "counts": validity.valid is not False,
            }
            for claim in analysis.claims
        ],
        "arms": _arm_summaries(results),
        "plots": list(plots),
    }


def _arm_summaries(results: RunResults) -> dict[str, dict[str, dict[str, Any]]]:
    """Per arm label and point: n, mean, sd and the mean's 95% CI of every metric key."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label in results.arm_labels():
        for point in results.point_labels():
            metrics = {}
            for key in results.metric_keys(label, point):
                stats = summarize(list(results.values(label, point, key).values()))
                if stats is not None:
                    metrics[key] = {"n": stats.n, "mean": stats.mean, "sd": stats.sd,
                                    "ci_low": stats.interval.low, "ci_high": stats.interval.high}
            if metrics:
                out.setdefault(label, {})[point] = metrics
    return out


def _difference_json(difference: PairedDifference) -> dict[str, Any]:
    return {
        "n": difference.n,
        "seeds": list(difference.pair_keys),
        "control_mean": difference.control_mean,
        "treatment_mean": difference.treatment_mean,
        "differences": list(difference.differences),
        "mean_difference": difference.mean_difference,
        "relative_change": difference.relative_change,
        "ci_low": difference.interval.low,
        "ci_high": difference.interval.high,
        "ci_degenerate": difference.interval.degenerate,
    }


def fmt(value: float, signed: bool = False) -> str:
    """Compact numbers: integers exactly (bytes), everything else to four significant digits."""
    if float(value).is_integer() and abs(value) < 1e12:
        text = f"{int(value):d}"
        return f"+{text}" if signed and value > 0 else text
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def _percent(relative: float | None) -> str:
    return "-" if relative is None else f"{100 * relative:+.1f}%"


def _interval(difference: PairedDifference) -> str:
    return "- (1 pair)" if difference.interval.degenerate else _bounds(difference.interval, signed=True)


def _bounds(interval: Interval, signed: bool) -> str:
    return f"[{fmt(interval.low, signed=signed)}, {fmt(interval.high, signed=signed)}]"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])
