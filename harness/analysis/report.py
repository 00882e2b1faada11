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

from harness.analysis.claims import ClaimResult, claim_alpha, evaluate_claims
from harness.analysis.forest import write_forest_plots
from harness.analysis.plots import write_plots
from harness.analysis.results import RunResults, load_results
from harness.analysis.stats import METHOD, MIN_PAIRS, POWER, Interval, PairedDifference, summarize
from harness.analysis.verdicts import (
    BETTER,
    INVALID,
    UNDECLARED,
    UNDETERMINED,
    VALID,
    WORSE,
    ContrastRow,
    Validity,
    evaluate_contrasts,
    evaluate_validity,
)
from harness.store import REPORT_DIR, SUITE_FILE, iter_trial_files, write_json_atomic, write_text_atomic
from harness.terminal import format_table, format_value

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

    ``text`` is the terminal report (validity, failed trials, claims, exploratory rows on key
    metrics), ``full_text`` the one in ``verdicts.txt`` (every row); ``summary_path`` the
    machine-readable summary; ``forest_paths`` the forest plots (first) and ``plot_paths`` every
    other PNG, so the spine can log ``artifact_paths`` to MLflow.
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
    tags: dict[str, str]  # the statistics used and the outcome, for the parent MLflow run
    analysis: RunAnalysis
    forest_paths: tuple[Path, ...] = ()
    full_text: str = ""

    @property
    def artifact_paths(self) -> tuple[Path, ...]:
        return (*self.forest_paths, self.summary_path, self.text_path, *self.plot_paths)


def analyse(results: RunResults) -> RunAnalysis:
    return RunAnalysis(
        results=results,
        rows=tuple(evaluate_contrasts(results)),
        validity=evaluate_validity(results),
        claims=tuple(evaluate_claims(results)),
    )


def build_report(run_dir: Path) -> RunReport:
    """Analyse one run folder and write ``report/`` (summary.json, verdicts.txt, forest plots,
    plots/*.png)."""
    results = load_results(Path(run_dir))
    analysis = analyse(results)
    report_dir = results.run_dir / REPORT_DIR
    summary_path = report_dir / SUMMARY_FILE
    text_path = report_dir / TEXT_FILE
    text_path.unlink(missing_ok=True)  # written last: a report killed while drawing is then redrawn by the next run
    forest_paths = write_forest_plots(analysis, report_dir)
    plot_paths = write_plots(results, report_dir / PLOTS_DIR)
    text = render_report(analysis)
    full_text = render_report(analysis, full=True)
    relative = [p.relative_to(report_dir).as_posix() for p in plot_paths]
    write_json_atomic(summary_path, summary(analysis, relative, [p.name for p in forest_paths]))
    write_text_atomic(text_path, full_text + "\n")
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
        tags=tracking_tags(analysis),
        analysis=analysis,
        forest_paths=tuple(forest_paths),
        full_text=full_text,
    )


ARM_TABLE_COLUMNS = 6


def render_arm_table(results: RunResults, full: bool = False) -> str:
    """Arms x key metrics (``full``: every directed metric), mean ± sd over seeds, per sweep point:
    the first table after a run."""
    keys = results.metric_keys()
    if full:
        columns = [k for k in keys if results.spec_for(k).direction != "none"]
    else:
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


def render_report(analysis: RunAnalysis, full: bool = False) -> str:
    """Heading, validity, failed trials, the primary claims, then the exploratory table (its rows
    on key metrics; ``full``: every row)."""
    results = analysis.results
    parts = [
        f"== {results.suite} / {results.profile}  ({results.meta.get('device_name') or results.device_class})",
        render_validity(analysis.validity),
    ]
    if results.speed_under_load:
        parts.append(f"speed figures were measured with up to {results.speed_under_load} trials running at once "
                     "(Ray): compare speed only between serial runs")
    if results.failed:
        parts.append(render_failed(results))
    if analysis.claims:
        parts.append(render_claims(analysis.claims, analysis.validity, results.confidence))
    parts.append(render_verdict_table(analysis, full))
    return "\n\n".join(part for part in parts if part)


def statistics_line(confidence: float, n_seeds: int) -> str:
    """The method, n and confidence, stated above every table."""
    return f"({METHOD} on seed-paired differences, {100 * confidence:g}% confidence, {n_seeds} seed(s) per arm)"


def render_verdict_table(analysis: RunAnalysis, full: bool = False) -> str:
    """Secondary rows: one per contrast x sweep point x key metric (``full``: every metric); the
    others are in verdicts.txt and summary.json."""
    results = analysis.results
    rows = [row for row in analysis.rows if full or results.is_key_metric(row.key)]
    hidden = len(analysis.rows) - len(rows)
    note = (f"\n({hidden} more rows, non-key or informational metrics, are in report/verdicts.txt and summary.json; "
            "--verbose prints them)") if hidden else ""
    if not rows:
        return ("no contrast has paired results" if not analysis.rows else "no key metrics to compare") + note
    not_counted = not analysis.validity.claims_count
    with_points = any(row.point for row in rows)
    with_margins = any(row.margin for row in rows)
    ci = f"{100 * results.confidence:g}% CI of diff"
    header = ["contrast", *(["point"] if with_points else []), "metric", "better", "n", "control", "treatment",
              "diff", "rel", ci, "p", "q (BH)", "sign-flip p", *(["margin"] if with_margins else []), "verdict"]
    lines = []
    for row in rows:
        difference = row.difference
        shown = row.verdict.upper() if row.verdict in (BETTER, WORSE) else row.verdict
        lines.append([
            row.variant.name,
            *([row.point] if with_points else []),
            f"{row.key} [{row.spec.unit}]" if row.spec.unit else row.key,
            row.spec.direction,
            _pairs(difference),
            fmt(difference.control_mean),
            fmt(difference.treatment_mean),
            fmt(difference.mean_difference, signed=True),
            _percent(difference.relative_change),
            _interval(difference.interval, signed=True),
            _p(difference.estimate.p_value),
            _p(row.q_value),
            _p(difference.sign_flip_p),
            *([f"+-{row.margin:g}" if row.margin else "-"] if with_margins else []),
            f"{shown} ({analysis.validity.status.upper()})" if not_counted else shown,
        ])
    title = (
        f"exploratory contrasts (secondary: each row is one test at its level, not corrected for the "
        f"{len(analysis.rows)} rows; q = Benjamini-Hochberg over the run's directed rows)\n"
        f"{statistics_line(results.confidence, len(results.seeds))}\n"
    )
    return title + format_table(header, lines) + note


def render_validity(validity: Validity) -> str:
    """The status, then each control's margin over the control with its interval."""
    if validity.status == UNDECLARED:
        return "validity: no positive/negative controls declared"
    heading = {
        VALID: "validity: OK",
        INVALID: "validity: INVALID, the claims below do not count: " + "; ".join(validity.problems),
        UNDETERMINED: "validity: UNDETERMINED (too few pairs to show the controls work), the claims below do not count",
    }[validity.status]
    lines = [heading]
    for check in validity.checks:
        difference = check.difference
        figures = "no pairs" if difference is None else (
            f"{fmt(difference.mean_difference, signed=True)} {_interval(difference.interval, signed=True)} "
            f"n={_pairs(difference)}"
        )
        mark = {True: "ok", False: "FAILS", None: "undetermined"}[check.ok]
        where = f" @ {check.point}" if check.point else ""
        lines.append(f"  {check.role:<8} {check.arm_label} - {validity.control} on {validity.metric}{where}: "
                     f"{figures}  [{mark}]")
    return "\n".join(lines)


def render_failed(results: RunResults) -> str:
    lines = [[f.arm_label, "" if f.seed is None else str(f.seed), f.point_label or "-", f.error] for f in results.failed]
    return f"{len(results.failed)} failed trial(s), excluded from contrasts:\n" + format_table(["arm", "seed", "point", "error"], lines)


def render_claims(claims: Sequence[ClaimResult], validity: Validity, confidence: float) -> str:
    """The primary hypotheses, Holm-corrected, with the effect each could have detected."""
    not_counted = "" if validity.claims_count else f" ({validity.status.upper()})"
    lines = []
    for claim in claims:
        signed = claim.claim["test"] != "ratio"
        lines.append([
            claim.contrast,
            claim.point or "-",
            claim.key,
            claim.statement,
            str(claim.n) + (f" (-{claim.dropped})" if claim.dropped else ""),
            "-" if claim.estimate is None else fmt(claim.estimate, signed=signed),
            _interval(claim.interval, signed=signed),
            _p(claim.p_value),
            _p(claim.p_adjusted),
            "-" if claim.mde is None else fmt(claim.mde),
            f"{claim.status.upper()}{not_counted}",
            claim.reference.reason if claim.reference and claim.status != "vacuous" else claim.detail,
        ])
    alpha = claim_alpha(confidence)
    title = (
        f"primary claims (one-sided t at {alpha:g} each, Holm-corrected across the {len(claims)} claim rows; "
        f"MDE = effect found with 80% power at this n and spread)\n"
        f"{statistics_line(confidence, max((c.n for c in claims), default=0))}\n"
    )
    ci = f"{100 * confidence:g}% CI"
    return title + format_table(
        ["contrast", "point", "metric", "test", "n", "estimate", ci, "p", "p (Holm)", "MDE", "result", "why"], lines
    )


def statistics_summary(confidence: float) -> dict[str, Any]:
    """How every number in the report was computed (summary.json and MLflow)."""
    return {
        "method": METHOD,
        "confidence": confidence,
        "min_pairs": MIN_PAIRS,
        "pairing": "seed within sweep point",
        "difference": "treatment - control",
        "interval": "Student-t interval of the mean paired difference",
        "check": "exact two-sided sign-flip permutation test (Monte Carlo beyond 16 pairs)",
        "primary": f"claims: one-sided t at {claim_alpha(confidence):g}, Holm across the suite's claims; "
                   "non-inferiority/equivalence vacuous unless their reference effect is established",
        "secondary": "contrast rows: per-row verdict at the confidence level; Benjamini-Hochberg q over directed rows",
        "power": POWER,
    }


def summary(analysis: RunAnalysis, plots: Sequence[str], forest: Sequence[str] = ()) -> dict[str, Any]:
    """The machine-readable report: every contrast row (informational ones too), claims, arms."""
    results = analysis.results
    validity = analysis.validity
    counts = validity.claims_count
    return {
        "schema": 2,
        "suite": results.suite,
        "profile": results.profile,
        "task": results.meta.get("task"),
        "device_class": results.device_class,
        "device_name": results.meta.get("device_name"),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seeds": results.seeds,
        "statistics": statistics_summary(results.confidence),
        "valid": validity.valid,
        "validity": {
            "status": validity.status,
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
        "claims": [
            {
                **dict(claim.claim),
                "role": "primary",
                "variant": claim.contrast,
                "point": claim.point,
                "key": claim.key,
                "result": claim.status,
                "n": claim.n,
                "dropped": claim.dropped,
                "estimate": claim.estimate,
                **_interval_json(claim.interval),
                "p_value": claim.p_value,
                "p_holm": claim.p_adjusted,
                "mde_80": claim.mde,
                "reference_effect": None if claim.reference is None else {
                    "contrast": claim.reference.contrast, "estimate": claim.reference.estimate, "n": claim.reference.n,
                    **_interval_json(claim.reference.interval), "margin": claim.reference.margin,
                    "established": claim.reference.established,
                },
                "detail": claim.detail,
                "counts": counts,
            }
            for claim in analysis.claims
        ],
        "contrasts": [
            {
                "role": "secondary",
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
                "q_value": row.q_value,
                "counts": counts,
                **_difference_json(row.difference),
            }
            for row in analysis.rows
        ],
        "arms": _arm_summaries(results),
        "forest_plots": list(forest),
        "plots": list(plots),
    }


def tracking_tags(analysis: RunAnalysis) -> dict[str, str]:
    """What the parent MLflow run says about the statistics and the outcome."""
    results = analysis.results
    outcomes: dict[str, int] = {}
    for claim in analysis.claims:
        outcomes[claim.status] = outcomes.get(claim.status, 0) + 1
    return {
        "harness.stats.method": METHOD,
        "harness.stats.confidence": f"{results.confidence:g}",
        "harness.stats.seeds": str(len(results.seeds)),
        "harness.stats.primary": "one-sided t, Holm across claims",
        "harness.stats.secondary": "per-row t, Benjamini-Hochberg q",
        "harness.validity": analysis.validity.status,
        "harness.claims": ", ".join(f"{n} {status}" for status, n in sorted(outcomes.items())) or "none",
    }


def _arm_summaries(results: RunResults) -> dict[str, dict[str, dict[str, Any]]]:
    """Per arm label and point: n, mean, sd and the mean's t interval of every metric key."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label in results.arm_labels():
        for point in results.point_labels():
            metrics = {}
            for key in results.metric_keys(label, point):
                stats = summarize(list(results.values(label, point, key).values()), results.confidence)
                if stats is not None:
                    metrics[key] = {"n": stats.n, "mean": stats.mean, "sd": stats.sd,
                                    "ci_low": stats.interval.low, "ci_high": stats.interval.high}
            if metrics:
                out.setdefault(label, {})[point] = metrics
    return out


def _difference_json(difference: PairedDifference) -> dict[str, Any]:
    estimate = difference.estimate
    return {
        "n": difference.n,
        "seeds": list(difference.pair_keys),
        "dropped": len(difference.dropped),
        "dropped_seeds": list(difference.dropped),
        "control_mean": difference.control_mean,
        "treatment_mean": difference.treatment_mean,
        "differences": list(difference.differences),
        "mean_difference": difference.mean_difference,
        "sd": estimate.sd,
        "relative_change": difference.relative_change,
        "method": METHOD,
        "confidence": estimate.confidence,
        **_interval_json(estimate.interval),
        "insufficient_pairs": estimate.insufficient,
        "p_value": estimate.p_value,
        "sign_flip_p": difference.sign_flip_p,
    }


def _interval_json(interval: Interval | None) -> dict[str, float | None]:
    return {"ci_low": None if interval is None else interval.low, "ci_high": None if interval is None else interval.high}


def fmt(value: float, signed: bool = False) -> str:
    """Compact numbers: integers exactly (bytes), everything else to four significant digits."""
    if float(value).is_integer() and abs(value) < 1e12:
        text = f"{int(value):d}"
        return f"+{text}" if signed and value > 0 else text
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def _pairs(difference: PairedDifference) -> str:
    """n, with the pairs dropped for a missing or non-finite value."""
    return str(difference.n) + (f" (-{len(difference.dropped)})" if difference.dropped else "")


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _percent(relative: float | None) -> str:
    return "-" if relative is None else f"{100 * relative:+.1f}%"


def _interval(interval: Interval | None, signed: bool) -> str:
    if interval is None:
        return "- (insufficient pairs)"
    return f"[{fmt(interval.low, signed=signed)}, {fmt(interval.high, signed=signed)}]"
