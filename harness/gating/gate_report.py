"""What the gate found, for CI: a Markdown table of what moved and a JUnit XML file.

The gate's own text (``GateResult.render``) lists every regression for a terminal. CI pages want
two more views of the same ``GateResult`` objects: a Markdown table of every gated value that
moved or failed (for GitHub's job summary), and JUnit XML with one test case per gated check,
so that a CI system lists each failed check as a failed test; a failed or missing trial, a value
missing from the run, a dropped seed and a gate that compared nothing are failed test cases too. A
claim whose result changed near its boundary is a warning: a WARN row, and a passing test case that
says so in its output.
"""
from __future__ import annotations

from typing import Sequence
from xml.etree import ElementTree

from harness.analysis.compare.claim_moves import round_off
from harness.analysis.present.markdown_tables import inline, plain, printable, table
from harness.gating.gate import GateCheck, GateResult

TITLE = "## harness gate"
MOVED_HEADER = ("run", "check", "subject", "point", "metric", "baseline", "current", "change", "result", "rule")


def run_name(outcome: GateResult) -> str:
    """The run as one line of plain text (its names come from the results folder)."""
    return plain(f"{outcome.suite}/{outcome.profile}/{outcome.device_class}")


def problems(outcome: GateResult) -> list[tuple[str, str]]:
    """(kind, what) for everything that fails a gate besides a regressed check."""
    found = [("no checks", "nothing in this run could be compared with the baseline")] if not outcome.checks else []
    found += [("incomplete run", outcome.incomplete)] if outcome.incomplete else []
    found += [("failed trial", t) for t in outcome.failed_trials]
    found += [("missing trial", t) for t in outcome.missing_trials]
    found += [("missing value", m) for m in outcome.missing_in_run]
    found += [("dropped seed", d) for d in outcome.dropped_seeds]
    return found


def moved(check: GateCheck) -> bool:
    """A check worth a row: it failed, it warns (a claim's result changed near its boundary), or its
    value moved by more than float rounding. The same trials give means that differ in the last bit
    when summed in another order."""
    if not check.passed:
        return True
    return check.near_boundary or abs(check.current - check.baseline) > round_off(check.baseline)


def render_markdown(outcomes: Sequence[GateResult]) -> str:
    """A verdict line per run, then one table of every value that moved and every problem."""
    failed = sum(1 for o in outcomes if not o.passed)
    lines = [f"{TITLE}: {'FAIL' if failed else 'PASS'} ({len(outcomes) - failed} of {len(outcomes)} run(s) pass)", ""]
    for outcome in outcomes:
        within = len(outcome.checks) - len(outcome.regressions)
        path = plain(outcome.baseline_path).replace("`", "'")  # a code span: only a backtick could end it
        lines.append(f"- {inline(run_name(outcome))} vs `{path}`: "
                     f"**{'PASS' if outcome.passed else 'FAIL'}** "
                     f"({within} of {len(outcome.checks)} checks within tolerance"
                     f"{f', {len(outcome.warnings)} near the boundary' if outcome.warnings else ''})")
    rows = []
    for outcome in outcomes:
        checks = sorted((c for c in outcome.checks if moved(c)), key=lambda c: c.passed)
        rows += [_check_row(outcome, c) for c in checks]
        rows += [[inline(run_name(outcome)), kind, inline(what), "", "", "", "", "", "FAIL", ""]
                 for kind, what in problems(outcome)]
    lines.append("")
    lines.append(table(MOVED_HEADER, rows) if rows else "Nothing moved: every gated value equals its baseline.")
    return "\n".join(lines) + "\n"


def _check_row(outcome: GateResult, check: GateCheck) -> list[str]:
    result = "FAIL" if not check.passed else "WARN" if check.near_boundary else "PASS"
    names = [inline(run_name(outcome)), check.check, inline(check.subject), inline(check.point or "-"), inline(check.metric)]
    change = check.current - check.baseline
    return [*names, f"{check.baseline:.6g}", f"{check.current:.6g}", f"{change:+.3g}", result, check.rule]


def junit_xml(outcomes: Sequence[GateResult]) -> str:
    """JUnit XML: a test suite per gated run, a test case per check and per problem."""
    root = ElementTree.Element("testsuites", name="harness gate")
    total = failures = 0
    for outcome in outcomes:
        suite = ElementTree.SubElement(root, "testsuite", name=run_name(outcome))
        classname = plain(f"harness.gate.{outcome.suite}.{outcome.profile}")
        cases = 0
        failed = 0
        for check in outcome.checks:
            case = ElementTree.SubElement(suite, "testcase", classname=classname, name=plain(_case_name(check)))
            cases += 1
            if not check.passed:
                failed += 1
                failure = ElementTree.SubElement(case, "failure", message=plain(check.rule), type="regression")
                failure.text = printable(check.describe())
            elif check.near_boundary:
                ElementTree.SubElement(case, "system-out").text = printable(f"warning: {check.describe()}")
        for kind, what in problems(outcome):
            case = ElementTree.SubElement(suite, "testcase", classname=classname, name=plain(f"{kind}: {what}"))
            failure = ElementTree.SubElement(case, "failure", message=kind, type=kind.replace(" ", "_"))
            failure.text = printable(what)
            cases += 1
            failed += 1
        suite.set("tests", str(cases))
        suite.set("failures", str(failed))
        total += cases
        failures += failed
    root.set("tests", str(total))
    root.set("failures", str(failures))
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def _case_name(check: GateCheck) -> str:
    where = f" @ {check.point}" if check.point else ""
    return f"{check.check} {check.subject}{where} {check.metric}"
