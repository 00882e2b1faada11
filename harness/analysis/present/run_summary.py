"""The end-of-run summary: every suite's validity and primary claims, in one Markdown block.

It is the last thing ``harness run`` prints, the content of ``results/summary.md``, of
``harness report --markdown PATH`` and of GitHub's job summary, so a reader (or a CI page)
sees in a few lines whether each mechanism beat its control and whether the testbed could
tell. One heading per suite carries its validity (naming the control that failed), its time and a
link to its claims figure; one table row per primary claim follows; two last lines answer the
question (the mechanism against its controls: for, against, not shown) apart from the checks that
only keep the comparison honest (bytes, parameter counts, regimes), with the valid suites and the
failed trials. The terminal prints a compact form of it (``render_terminal_summary``) that fits in
40 lines for every suite of ``suites/all.yaml``. The full tables stay in ``report/verdicts.txt`` and
``summary.json``.
"""
from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Sequence
from urllib.parse import quote

from rich import box
from rich.console import Console as RichConsole
from rich.table import Table
from rich.text import Text

from harness.analysis.decide.claims import AGAINST, FOR, IDENTICAL_ARMS, ClaimResult
from harness.analysis.decide.run_decisions import RunAnalysis
from harness.analysis.decide.verdicts import INVALID, UNDECLARED, UNDETERMINED, VALID, Validity
from harness.analysis.present.claim_interval import decided_interval, has_spread, interval_names, is_repeated
from harness.analysis.present.forest_plots import CLAIMS_FILE
from harness.analysis.present.markdown_tables import escape, inline, plain, table
from harness.analysis.stats.number_format import fmt

TITLE = "## harness summary"
SUMMARY_MARKDOWN_FILE = "summary.md"  # in the results folder, beside the suites
RESULT_ORDER = ("pass", "fail", "short of margin", "inconclusive", "vacuous", "futile", "insufficient pairs")
ALWAYS_COUNTED = ("pass", "fail", "inconclusive", "vacuous")  # in the totals line even at 0
ESTIMATE_COLUMN = "estimate [{names} CI]"
CLAIM_HEADER = ("contrast", "metric", "point", "test", ESTIMATE_COLUMN, "result", "seeds")
REPEATED_CI_NOTE = ("repeated CI: the interval at the level its deciding look spent; it holds whichever look "
                    "stopped the run, so it is wider than a single-look CI")
TERMINAL_WIDTH = 200  # wide enough that no row wraps: the table is as wide as its longest row
REPEATED = "R"  # marks a repeated interval in a terminal table that also shows fixed ones
NOT_SHOWN = "not shown"


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
                f"validity {inline(validity_text(self.analysis.validity))}; {seeds}, {time}{failed}; "
                f"{inline(self.study())}")

    def study(self, short: bool = False) -> str:
        """'registered <id>' for a run of a registered design's seeds, else 'exploratory': how it counts
        (``short``: 'reg <8 digits>', the terminal's)."""
        registration = self.analysis.results.stored.registration
        if not registration:
            return "exploratory"
        return f"reg {registration[:8]}" if short else f"registered {registration[:12]}"

    def time_text(self) -> str:
        """The run's wall time, or its trials' when rebuilt from stored results (the terminal's short form)."""
        if self.wall_seconds is not None:
            return _seconds(self.wall_seconds)
        return f"trials {_seconds(sum(t.wall_seconds for t in self.analysis.results.finished))}"

    def figures(self) -> list[str]:
        """The suite's claims figure, relative to the results folder that holds summary.md."""
        results = self.analysis.results
        report = results.run_dir / "report"
        folder = PurePosixPath(results.suite, results.profile, "report")
        return [str(folder / CLAIMS_FILE)] if (report / CLAIMS_FILE).is_file() else []

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
        figures = self.figures()
        heading = self.heading() + (
            "\n\nclaims figure: " + ", ".join(f"[{inline(PurePosixPath(f).name)}]({quote(f)})" for f in figures)
            if figures else "")
        heading += "".join(f"\n\nwarning: {escape(b.text())}" for b in self.analysis.unequal_budgets)
        if not self.analysis.claims:
            return heading + "\n\nno primary claims declared\n"
        names = interval_names(self.analysis.claims, self.analysis.results.confidence)
        header = [column.format(names=names) for column in CLAIM_HEADER]
        note = self.identical_note()
        return heading + ("\n\n" if figures or self.analysis.unequal_budgets else "\n") \
            + table(header, self.claim_rows()) + (f"\n\n{note}" if note else "")

    def identical_note(self) -> str:
        identical = sorted({f"{c.contrast} {c.point}".strip() for c in self.analysis.claims if c.identical_arms})
        return f"**{', '.join(identical)}:** {IDENTICAL_ARMS}" if identical else ""

    @property
    def repeated(self) -> bool:
        """Whether a claim is shown with its repeated interval, which the summary's note then explains."""
        return any(is_repeated(c) for c in self.analysis.claims)

    def is_question(self, claim: ClaimResult) -> bool:
        """Whether the claim asks the suite's question, the mechanism against a control on quality; the
        others (bytes, parameter counts, timing, contrasts without the mechanism) are checks."""
        mechanism = self.mechanism
        return bool(mechanism) and claim.test.favours_an_arm() and mechanism in (claim.treatment_arm, claim.control_arm) \
            and self.analysis.results.spec_for(claim.key).kind == "quality"


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
    """'+0.03 [+0.01, +0.05]' in the metric's units (a ratio for ratio claims), with the interval every
    report shows: the repeated CI (the one the decision read) in a sequential design."""
    if claim.estimate is None:
        return "-"
    signed = not claim.test.needs.ratio
    interval = decided_interval(claim)
    if interval is None:
        return f"{fmt(claim.estimate, signed)} (no CI)"
    low, high = fmt(interval.low, signed), fmt(interval.high, signed)
    return f"{fmt(claim.estimate, signed)} [{low}, {high}]"


def mechanism_line(summaries: Sequence[SuiteSummary]) -> str:
    """The answer: claims of the mechanism against its controls that favour it, that favour the control,
    and that show neither (undecided, or in a suite whose controls did not show it could tell)."""
    if not any(s.mechanism for s in summaries):
        return "**The mechanism against its controls:** no suite names its mechanism"
    return f"**The mechanism against its controls:** {verdict_text(sum((_sides(s) for s in summaries), Counter()))}"


def verdict_text(sides: Counter[str]) -> str:
    """'for 1 · against 2 · not shown 3', the answer in a few words (MLflow's run name shows it too)."""
    return f"{FOR} {sides[FOR]} · {AGAINST} {sides[AGAINST]} · {NOT_SHOWN} {sides[NOT_SHOWN]}"


def suite_verdict(summary: SuiteSummary) -> str:
    """One suite's answer, as ``verdict_text`` writes it."""
    return verdict_text(_sides(summary))


def _sides(summary: SuiteSummary) -> Counter[str]:
    sides: Counter[str] = Counter()
    for claim in summary.analysis.claims:
        if summary.is_question(claim):
            side = claim.polarity(summary.mechanism) if summary.counted and not claim.identical_arms else ""
            sides[side or NOT_SHOWN] += 1
    return sides


def totals_line(summaries: Sequence[SuiteSummary]) -> str:
    """The checks' results (bookkeeping, regimes, suites without a mechanism) in the suites whose claims
    count, valid suites, failed trials."""
    checks = [(s, c) for s in summaries for c in s.analysis.claims if not s.is_question(c)]
    counted = Counter(c.status for s, c in checks if s.counted)
    uncounted = sum(1 for s, _ in checks if not s.counted)
    order = [*RESULT_ORDER, *sorted(set(counted) - set(RESULT_ORDER))]
    claims = ", ".join(f"{counted[status]} {status.upper()}" for status in order if counted[status] or status in
                       ALWAYS_COUNTED)
    if uncounted:
        claims += f" (+{uncounted} not counted: suite not valid)"
    valid = sum(1 for s in summaries if s.analysis.validity.status in (VALID, UNDECLARED))
    failed = sum(len(s.analysis.results.failed) for s in summaries)
    incomplete = sum(1 for s in summaries if s.analysis.results.incomplete)
    partial = f"; INCOMPLETE runs {incomplete}" if incomplete else ""
    return (f"**Totals:** checks (bookkeeping, regimes) {claims}; suites valid {valid} of {len(summaries)}; "
            f"failed trials {failed}{partial}")


def render_summary(summaries: Sequence[SuiteSummary]) -> str:
    """The whole summary (summary.md): a title, one block per suite, the interval note once, the
    answer and the totals."""
    blocks = "\n".join(summary.render() for summary in summaries)
    note = f"\n\n{REPEATED_CI_NOTE}" if any(s.repeated for s in summaries) else ""
    return f"{TITLE}\n\n{blocks}{note}\n\n{mechanism_line(summaries)}\n{totals_line(summaries)}\n"


def render_terminal_summary(summaries: Sequence[SuiteSummary]) -> str:
    """What the terminal ends with: one table, each suite's name, validity, seeds and time in its first
    column beside its claims, results in a few words, so every suite of ``suites/all.yaml`` fits in 40
    lines; summary.md keeps the full text."""
    names = {interval_names([claim], s.analysis.results.confidence) for s in summaries for claim in s.analysis.claims
             if has_spread(claim)}
    uniform = len(names) <= 1  # else the repeated intervals are marked in their cells
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    grid.add_column("suite", no_wrap=True)
    grid.add_column("claim", no_wrap=True)
    grid.add_column("test", no_wrap=True)
    fixed = min(names, key=len, default="95%")
    estimate = f"estimate [{next(iter(names), fixed)} CI]" if uniform else f"estimate [{fixed} CI, {REPEATED} repeated]"
    grid.add_column(Text(estimate), no_wrap=True)
    grid.add_column("result", overflow="fold")
    grid.add_column("n", no_wrap=True, justify="right")
    for summary in summaries:
        results = summary.analysis.results
        about = [f"{plain(results.suite)} ({plain(results.profile)}) · {plain(summary.study(short=True))}",
                 f"{_short_validity(summary.analysis.validity)} · {len(results.seeds)} seeds · {summary.time_text()}"]
        if not summary.analysis.claims:
            grid.add_row(*_cells("\n".join(about), "no primary claims", "", "", "", ""))
            continue
        cells = about if len(summary.analysis.claims) > 1 else ["\n".join(about)]
        single_point = len(results.point_labels()) == 1
        for n, claim in enumerate(summary.analysis.claims):
            label = f"{claim.contrast} · {claim.key}" + (f" @ {claim.point}" if claim.point and not single_point else "")
            marked = not uniform and is_repeated(claim) and has_spread(claim)
            estimate = estimate_text(claim) + (f" {REPEATED}" if marked else "")
            grid.add_row(*_cells(cells[n] if n < len(cells) else "", plain(label), plain(claim.claim.test), estimate,
                                 plain(_short_result(summary, claim)), str(claim.n)))
    buffer = io.StringIO()
    RichConsole(file=buffer, width=TERMINAL_WIDTH, color_system=None, highlight=False, emoji=False).print(grid)
    notes = [note for s in summaries if (note := s.identical_note())]
    if any(s.repeated for s in summaries):
        notes.append(REPEATED_CI_NOTE)
    body = [line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines()]
    return "\n".join([TITLE, *body, *notes, mechanism_line(summaries), totals_line(summaries)]) + "\n"


def _cells(*texts: str) -> list[Text]:
    """Cells as literal text: a stored name with brackets is not read as rich markup."""
    return [Text(text) for text in texts]


def _short_result(summary: SuiteSummary, claim: ClaimResult) -> str:
    """The result word and whom it favours; a premise by its name only (summary.md says the rest)."""
    word = claim.status.upper()
    if claim.premise is not None:
        word += f" (premise {claim.premise.name})"
    side = claim.favours(summary.mechanism)
    word += f", {side}" if side else ""
    word += " (arms identical)" if claim.identical_arms else ""
    return word if summary.counted else f"{word} (not counted)"


def _short_validity(validity: Validity) -> str:
    if validity.status == VALID:
        return "OK" if not validity.cannot_fail else "OK (a control cannot fail)"
    if validity.status == UNDECLARED:
        return "no controls"
    return validity.status.upper()


def _seeds(claim: ClaimResult) -> str:
    look = f" (look {claim.look})" if claim.sequential else ""
    return str(claim.n) + (f" (-{claim.dropped})" if claim.dropped else "") + look


def _seconds(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"
