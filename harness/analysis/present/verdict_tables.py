"""The run's verdicts as text tables: the arm table, validity, failed trials, primary claims first,
then the exploratory rows (key metrics only unless ``full``)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from harness.analysis.claim_status import FUTILE, VACUOUS
from harness.analysis.decide.claims import IDENTICAL_ARMS, ClaimResult, claim_alpha
from harness.analysis.decide.fairness import AT_BOUND_PREFIX
from harness.analysis.decide.premises import PremiseResult
from harness.analysis.decide.run_decisions import RunAnalysis
from harness.analysis.decide.verdicts import (
    BETTER,
    INVALID,
    UNDECLARED,
    UNDETERMINED,
    VALID,
    WORSE,
    ContrastRow,
    Validity,
)
from harness.analysis.present.claim_interval import decided_interval
from harness.analysis.run_results import RunResults
from harness.analysis.stats.number_format import fmt
from harness.analysis.stats.paired_stats import METHOD, Interval, PairedDifference
from harness.core.terminal import format_table, format_value

ARM_TABLE_COLUMNS = 6


def render_arm_table(results: RunResults, full: bool = False) -> str:
    """Arms x key metrics (``full``: every directed metric) and the fractions of bounded parameters at
    their bound, mean ± sd over seeds, per sweep point: the first table after a run."""
    keys = results.metric_keys()
    if full:
        columns = [k for k in keys if results.spec_for(k).direction != "none"]
    else:
        columns = [k for k in keys if results.spec_for(k).key] or [
            k for k in keys if results.spec_for(k).kind == "quality"
        ]
        columns = columns[:ARM_TABLE_COLUMNS]
    columns += [k for k in keys if k.startswith(AT_BOUND_PREFIX) and k not in columns]  # fair-arm facts
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


def render_report(analysis: RunAnalysis, full: bool = False) -> str:
    """Heading, validity, failed trials, the primary claims, then the exploratory table (its rows
    on key metrics; ``full``: every row)."""
    results = analysis.results
    parts = [
        f"== {results.suite} / {results.profile}  ({results.stored.device_name or results.device_class})",
        results.incomplete,
        render_validity(analysis.validity),
    ]
    if results.speed_under_load:
        parts.append(f"speed figures were measured with up to {results.speed_under_load} trials running at once "
                     "(side by side or on Ray): compare speed only between serial runs")
    parts.append(results.stale_note)
    parts.extend(f"warning: {budget.text()}" for budget in analysis.unequal_budgets)
    if analysis.premises:
        parts.append(render_premises(analysis.premises))
    if results.failed:
        parts.append(render_failed(results))
    if analysis.claims:
        parts.append(render_claims(analysis.claims, analysis.validity, results.confidence, results.stored.mechanism))
    if analysis.cost is not None:
        parts.append(analysis.cost.line())
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
        if row.verdict in (BETTER, WORSE) and difference.t_only:
            shown += " (t only)"  # the sign-flip test disagrees: heavy-tailed differences
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
    return title + format_table(header, lines) + note + _other_seed_counts(analysis.claims, rows)


def _other_seed_counts(claims: Sequence[ClaimResult], rows: Sequence[ContrastRow]) -> str:
    """Where a claimed contrast's row reads more pairs than its claim (a sequential design decided the
    claim at an earlier look, then ran on for others): both counts, so two intervals are not a puzzle."""
    pairs = {(row.variant.name, row.point, row.key): row.difference.n for row in rows}
    notes = [f"{claim.contrast} {claim.key}{f' at {claim.point}' if claim.point else ''}: the row reads "
             f"{pairs[(claim.contrast, claim.point, claim.key)]} pairs, its claim {claim.n} (look {claim.look}, "
             f"where it stopped)"
             for claim in claims if claim.sequential and pairs.get((claim.contrast, claim.point, claim.key),
                                                                  claim.n) != claim.n]
    return "\nclaimed rows at another seed count than their claim:\n  " + "\n  ".join(notes) if notes else ""


def render_validity(validity: Validity) -> str:
    """The status, then each control's margin over the control with its interval."""
    if validity.status == UNDECLARED:
        return "validity: no positive/negative controls declared"
    heading = {
        VALID: "validity: OK",
        INVALID: "validity: INVALID, the claims below do not count: " + "; ".join(validity.problems),
        UNDETERMINED: "validity: UNDETERMINED (too few seeds to show the controls work), the claims below do not count",
    }[validity.status]
    lines = [heading]
    for check in validity.checks:
        difference = check.difference
        figures = "no pairs" if difference is None else (
            f"{fmt(difference.mean_difference, signed=True)} {_interval(difference.interval, signed=True)} "
            f"n={_pairs(difference)}"
        )
        mark = "TOO WEAK" if check.too_weak else {True: "ok", False: "FAILS", None: "undetermined"}[check.ok]
        mark += "; CANNOT FAIL: at the metric's ceiling on every seed" if check.cannot_fail else ""
        where = f" @ {check.point}" if check.point else ""
        lines.append(f"  {check.role:<8} {check.arm_label} - {validity.control} on {validity.metric}{where}: "
                     f"{figures}  [{mark}]")
    return "\n".join(lines)


def render_premises(premises: Sequence[PremiseResult]) -> str:
    """What the claims rest on: each premise at each point, held, failed or still open."""
    rows = [[p.name, p.point or "-", p.subject, p.key, p.requirement.removeprefix("needs "), p.figures,
             p.status.upper(), ", ".join(p.premise.claims or ["all claims"])] for p in premises]
    title = "premises (a claim whose premise is not met, or not yet established, is VACUOUS)\n"
    return title + format_table(["premise", "point", "on", "metric", "needs", "estimate", "status", "for"], rows)


def render_failed(results: RunResults) -> str:
    lines = [[f.arm_label, "" if f.seed is None else str(f.seed), f.point_label or "-", f.error] for f in results.failed]
    return f"{len(results.failed)} failed trial(s), excluded from contrasts:\n" + format_table(["arm", "seed", "point", "error"], lines)


def render_claims(claims: Sequence[ClaimResult], validity: Validity, confidence: float,
                  mechanism: str | None = None) -> str:
    """The primary hypotheses, Holm-corrected, with the interval each decision read and the effect
    each claim could have detected; sequential runs add the look that decided and its boundary."""
    not_counted = "" if validity.claims_count else f" ({validity.status.upper()})"
    sequential = any(c.sequential for c in claims)
    lines = []
    for claim in claims:
        signed = not claim.test.needs.ratio
        head = [claim.contrast, claim.point or "-", claim.key, claim.statement,
                str(claim.n) + (f" (-{claim.dropped})" if claim.dropped else "")]
        if sequential:
            boundary = claim.boundary_t
            middle = [f"{claim.look} of {claim.looks}", "-" if claim.estimate is None else fmt(claim.estimate, signed=signed),
                      _interval(decided_interval(claim), signed=signed),
                      "-" if boundary is None else ("exact" if not np.isfinite(boundary) else f"{boundary:.3g}"),
                      _p(claim.p_value)]
        else:
            middle = ["-" if claim.estimate is None else fmt(claim.estimate, signed=signed),
                      _interval(claim.interval, signed=signed), _p(claim.p_value), _p(claim.p_adjusted),
                      _interval(claim.decision_interval, signed=signed)]
        why = _why(claim)
        result = ", ".join(filter(None, (claim.result_text, claim.favours(mechanism))))
        lines.append([*head, *middle, "-" if claim.mde is None else fmt(claim.mde), f"{result}{not_counted}",
                      f"{IDENTICAL_ARMS}; {why}" if claim.identical_arms else why])
    alpha = claim_alpha(confidence)
    family = sum(c.in_family for c in claims)
    title = (
        f"primary claims (one-sided t at {alpha:g} each, Holm across the {family} sampled claim rows for PASS and FAIL "
        f"alike, so a wrong-direction decision has at most 2x that level; claims of zero spread outside the family, untested ones in it at p = 1; MDE = effect found with 80% power at this n, spread and the "
        f"level tested)\n{statistics_line(confidence, max((c.n for c in claims), default=0))}\n"
    )
    if sequential:
        header = ["contrast", "point", "metric", "test", "n", "look", "estimate",
                  f"repeated {100 * confidence:g}% CI", "t boundary", "p", "MDE", "result", "why"]
    else:
        header = ["contrast", "point", "metric", "test", "n", "estimate", f"{100 * confidence:g}% CI", "p",
                  "p (Holm)", "Holm CI", "MDE", "result", "why"]
    return title + format_table(header, lines)


def _why(claim: ClaimResult) -> str:
    """What the result rests on: a FUTILE claim's conditional power and its margin's value, a vacuous
    one's detail, otherwise whether its reference effect is established."""
    if claim.status == FUTILE:
        margin = claim.reference.margin if claim.reference is not None else claim.claim.margin
        shown = f"; margin {fmt(margin)}" if margin is not None else ""
        return claim.detail.split("; ")[0] + shown
    return claim.reference.reason if claim.reference and claim.status != VACUOUS else claim.detail


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
