"""The end-of-run summary: every suite's validity and primary claims, in one Markdown block.

It is the last thing ``harness run`` prints, the content of ``results/summary.md``, of
``harness report --markdown PATH`` and of GitHub's job summary, so a reader (or a CI page)
sees in a few lines whether each mechanism beat its control and whether the testbed could
tell. One heading per suite carries its validity (naming the control that failed) and its time;
one table row per primary claim follows; a last line counts the claim results, the valid suites
and the failed trials. The full tables stay in ``report/verdicts.txt`` and ``summary.json``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from harness.analysis.decide.claims import AGAINST, FOR, IDENTICAL_ARMS, ClaimResult
from harness.analysis.decide.run_decisions import RunAnalysis
from harness.analysis.decide.verdicts import INVALID, UNDECLARED, UNDETERMINED, VALID, Validity
from harness.analysis.present.markdown_tables import escape, inline, plain, table
from harness.analysis.stats.number_format import fmt

TITLE = "## harness summary"
SUMMARY_MARKDOWN_FILE = "summary.md"  # in the results folder, beside the suites
RESULT_ORDER = ("pass", "fail", "short of margin", "inconclusive", "vacuous", "futile", "insufficient pairs")
ALWAYS_COUNTED = ("pass", "fail", "inconclusive", "vacuous")  # in the totals line even at 0
ESTIMATE_COLUMN = "estimate [{confidence:g}% CI]"
CLAIM_HEADER = ("contrast", "metric", "point", "test", ESTIMATE_COLUMN, "result", "seeds")
REPEATED_CI_NOTE = ("repeated CI: the interval at the level the look that decided the claim tested it (the "
                    "design's spent level), as in the claims table: it holds whichever look stopped the run, "
                    "so it is wider than a single-look CI")


@dataclass(frozen=True)
class SuiteSummary:
    """What the summary says about one ``<suite>/<profile>`` run."""

    analysis: RunAnalysis
    wall_seconds: float | None = None  # the run's wall time; None when rebuilt from stored results

    @property
    def counted(self) -> bool:
        return self.analysis.validity.claims_count

    def heading(self) -> str:
        results = self.analysis.results
        seeds = f"{len(results.seeds)} seed{'s' if len(results.seeds) != 1 else ''}"
        if self.wall_seconds is not None:
            time = f"wall {_seconds(self.wall_seconds)}"
        else:
            time = f"trial time {_seconds(sum(t.wall_seconds for t in results.finished))}"
        failed = f", {len(results.failed)} FAILED trial(s)" if results.failed else ""
        failed += ", INCOMPLETE RUN (ended before every trial was stored; results partial)" if results.incomplete else ""
        cost = self.analysis.cost
        if cost is not None:
            seeds += f" of up to {cost.design.max_seeds} (sequential"
            seeds += f"; fixed design of equal power: {cost.fixed_seeds})" if cost.fixed_seeds else ")"
        return (f"### {inline(results.suite)} ({inline(results.profile)}): "
                f"validity {inline(validity_text(self.analysis.validity))}; {seeds}, {time}{failed}")

    def claim_rows(self) -> list[list[str]]:
        suffix = "" if self.counted else f" (not counted: {self.analysis.validity.status})"
        return [
            [inline(claim.contrast), inline(claim.key), inline(claim.point or "-"), plain(claim.statement),
             estimate_text(claim),
             plain(", ".join(filter(None, (claim.result_text, claim.favours(self.mechanism))))) + suffix
             + (" (arms identical)" if claim.identical_arms else ""), _seeds(claim)]
            for claim in self.analysis.claims
        ]

    @property
    def mechanism(self) -> str | None:
        return self.analysis.results.stored.mechanism

    def render(self) -> str:
        heading = self.heading() + "".join(f"\n\nwarning: {escape(b.text())}" for b in self.analysis.unequal_budgets)
        if not self.analysis.claims:
            return heading + "\n\nno primary claims declared\n"
        confidence = 100 * self.analysis.results.confidence
        sequential = any(c.sequential for c in self.analysis.claims)
        header = ["estimate [repeated CI]" if sequential and column == ESTIMATE_COLUMN
                  else column.format(confidence=confidence) for column in CLAIM_HEADER]
        identical = sorted({f"{c.contrast} {c.point}".strip() for c in self.analysis.claims if c.identical_arms})
        note = f"\n\n**{', '.join(identical)}:** {IDENTICAL_ARMS}" if identical else ""
        note += f"\n\n{REPEATED_CI_NOTE}" if sequential else ""
        return heading + ("\n\n" if self.analysis.unequal_budgets else "\n") + table(header, self.claim_rows()) + note


def validity_text(validity: Validity) -> str:
    """OK, or INVALID naming each control that failed and where, or why it is undetermined."""
    if validity.status == VALID:
        stuck = sorted({check.arm_label for check in validity.cannot_fail})
        return f"OK (but positive control {', '.join(stuck)} cannot fail)" if stuck else "OK"
    if validity.status == UNDECLARED:
        return "no controls declared"
    if validity.status == UNDETERMINED:
        return "UNDETERMINED (too few seeds to show the controls work)"
    weak = [check for check in validity.checks if check.too_weak]
    if weak and len(weak) == sum(check.ok is False for check in validity.checks):
        return f"{INVALID.upper()} (positive control too weak: " + "; ".join(
            f"{check.arm_label}{f' at {check.point}' if check.point else ''} {check.too_weak}" for check in weak) + ")"
    failing: dict[str, list[str]] = {}
    for check in validity.checks:
        if check.ok is False:
            if check.too_weak:
                what = f"positive control {check.arm_label} too weak: {check.too_weak}"
            elif check.difference is None:
                what = f"{check.role} control {check.arm_label} has no pairs with {validity.control}"
            else:
                verb = "beats" if check.beats_control else "does not beat"
                what = f"{check.role} control {check.arm_label} {verb} {validity.control} on {validity.metric}"
            failing.setdefault(what, []).append(check.point)
    reasons = [what + (f" at {', '.join(p for p in points if p)}" if any(points) else "")
               for what, points in failing.items()]
    if not validity.checks:  # the declaration itself is unusable (e.g. a metric without a direction)
        reasons = list(validity.problems)
    return f"{INVALID.upper()}: " + "; ".join(reasons)


def estimate_text(claim: ClaimResult) -> str:
    """'+0.03 [+0.01, +0.05]' in the metric's units (a ratio for ratio claims), with the interval the
    claims table shows: the repeated CI (the one the decision read) in a sequential design."""
    if claim.estimate is None:
        return "-"
    signed = not claim.test.needs.ratio
    interval = claim.decision_interval if claim.sequential else claim.interval
    if interval is None:
        return f"{fmt(claim.estimate, signed)} (no CI)"
    low, high = fmt(interval.low, signed), fmt(interval.high, signed)
    return f"{fmt(claim.estimate, signed)} [{low}, {high}]"


def totals_line(summaries: Sequence[SuiteSummary]) -> str:
    """Claim results of the suites whose claims count, valid suites, failed trials."""
    counted = Counter(c.status for s in summaries if s.counted for c in s.analysis.claims)
    uncounted = sum(len(s.analysis.claims) for s in summaries if not s.counted)
    order = [*RESULT_ORDER, *sorted(set(counted) - set(RESULT_ORDER))]
    claims = ", ".join(f"{counted[status]} {status.upper()}" for status in order if counted[status] or status in
                       ALWAYS_COUNTED)
    if uncounted:
        claims += f" (+{uncounted} not counted: suite not valid)"
    sides = Counter(c.polarity(s.mechanism) for s in summaries if s.counted for c in s.analysis.claims)
    if any(s.mechanism for s in summaries):
        claims += f"; for the mechanism {sides[FOR]}, against {sides[AGAINST]}"
    valid = sum(1 for s in summaries if s.analysis.validity.status in (VALID, UNDECLARED))
    failed = sum(len(s.analysis.results.failed) for s in summaries)
    incomplete = sum(1 for s in summaries if s.analysis.results.incomplete)
    partial = f"; INCOMPLETE runs {incomplete}" if incomplete else ""
    return f"**Totals:** claims {claims}; suites valid {valid} of {len(summaries)}; failed trials {failed}{partial}"


def render_summary(summaries: Sequence[SuiteSummary]) -> str:
    """The whole summary: a title, one block per suite, the totals line.

    A heading ends the table above it in GFM, so blocks need no blank line between them: with
    every suite of ``suites/all.yaml`` the summary fits in the last 40 lines of a terminal.
    """
    blocks = "\n".join(summary.render() for summary in summaries)
    return f"{TITLE}\n\n{blocks}\n\n{totals_line(summaries)}\n"


def _seeds(claim: ClaimResult) -> str:
    look = f" (look {claim.look})" if claim.sequential else ""
    return str(claim.n) + (f" (-{claim.dropped})" if claim.dropped else "") + look


def _seconds(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"
