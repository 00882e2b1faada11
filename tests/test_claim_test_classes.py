"""One class per claim test: each test's module registers the one class that owns its statement,
decision rule, family, which-way reading, plot marks and power; the suite's table of what each test
needs names the same tests; and no module outside the test classes compares a test's name, so a new
test is one module (and its row in the table), not an edit in every report that shows a claim."""
from __future__ import annotations

import ast
import importlib
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fault_injection import hang_guard
from test_strict_claims import claim, two_arm_run

from harness.analysis.claim_tests import claim_test
from harness.analysis.claim_tests.contract import REGISTERED, ClaimTest, ClaimTestOutcome, register
from harness.analysis.decide.claims import INCONCLUSIVE, evaluate_claims
from harness.analysis.stats.paired_stats import mean_estimate
from harness.core.metrics import Metric
from harness.suite.claim_needs import CLAIM_TEST_NEEDS, reads_ratios
from harness.suite.schema import ClaimSpec

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"
CLAIM_TESTS = PACKAGE / "analysis" / "claim_tests"
NAMES = frozenset(CLAIM_TEST_NEEDS)


def _is_name(node: ast.AST) -> bool:
    """A test name written as a literal, alone or inside a tuple, list or set literal."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_name(element) for element in node.elts)
    return False


def _reads_test(node: ast.AST) -> bool:
    """``x.test``, ``x["test"]`` or ``x.get("test")``: a claim's test name read for a comparison."""
    if isinstance(node, ast.Attribute):
        return node.attr == "test"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "test"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "test"
    return False


def name_comparisons(source: str) -> list[int]:
    """Lines that compare (==, !=, in, match) a claim test's name."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_is_name(o) or _reads_test(o) for o in (node.left, *node.comparators)):
            lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and _is_name(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Match) and _reads_test(node.subject):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("snippet", [
    'if claim.claim.test == "ratio":\n    pass\n',
    'ok = spec.test in ("non_inferior", "equivalent")\n',
    'ok = "equal" != test\n',
    'ok = row.get("test") == RATIO\n',
    'ok = claim["test"] is not None and claim["test"] == name\n',
    'match test:\n    case "superior":\n        pass\n',
])
def test_the_scan_finds_a_name_comparison(snippet):
    assert name_comparisons(snippet)


def test_the_scan_leaves_other_strings_and_lookups_alone():
    source = ('EQUIVALENT = "equivalent"\nCOLOURS = {"equivalent": "#4575b4"}\ntest = claim_test(spec.test)\n'
              'if verdict == EQUIVALENT and test.needs.ratio:\n    pass\n')
    assert name_comparisons(source) == []


def test_no_module_outside_the_test_classes_compares_a_claim_tests_name():
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if CLAIM_TESTS not in path.parents for line in name_comparisons(path.read_text(encoding="utf-8"))]
    assert not found, f"compare a claim test's name only inside harness/analysis/claim_tests/: {found}"


def test_every_row_of_the_table_has_one_class_in_a_module_of_its_own():
    assert set(REGISTERED) == NAMES
    modules = [type(test).__module__ for test in REGISTERED.values()]
    assert len(set(modules)) == len(modules)  # one test per module
    for name, test in REGISTERED.items():
        assert claim_test(name) is test and test.name == name
        defined = [v for v in vars(importlib.import_module(type(test).__module__)).values()
                   if isinstance(v, type) and issubclass(v, ClaimTest) and "name" in v.__dict__]
        assert defined == [type(test)]  # and nothing defines a test it forgot to register


def test_a_test_without_a_row_in_the_table_is_refused():
    with pytest.raises(TypeError, match="no row"):
        register(type("Unlisted", (ClaimTest,), {"name": "unlisted", "decide": lambda *args: None}))
    with pytest.raises(TypeError, match="defined twice"):
        register(type("Again", (ClaimTest,), {"name": "superior", "decide": lambda *args: None}))
    assert "unlisted" not in REGISTERED and type(claim_test("superior")).__name__ == "Superior"


def test_only_the_ratio_test_reads_ratios_and_an_unknown_name_reads_none():
    assert [name for name in NAMES if reads_ratios(name)] == ["ratio"]
    assert not reads_ratios("no_such_test") and not reads_ratios(None)


HIGHER = Metric(name="acc", direction="higher", unit="fraction", kind="quality")
SPEED = Metric(name="seconds", direction="lower", unit="s", kind="speed")
NO_DIRECTION = Metric(name="size", direction="none", unit="", kind="quality")


@pytest.mark.parametrize("test, spec, member", [
    ("superior", HIGHER, True), ("superior", NO_DIRECTION, False),  # a one-sided test needs a direction
    ("equivalent", NO_DIRECTION, True), ("ratio", NO_DIRECTION, True),
    ("equal", HIGHER, False),  # an exact check has no sampling error
])
def test_holm_family_membership_is_the_tests_own(test, spec, member):
    assert claim_test(test).in_holm_family(spec) is member


def test_timing_claims_are_planned_in_a_family_of_their_own():
    assert claim_test("superior").family(SPEED) != claim_test("superior").family(HIGHER)


@pytest.mark.parametrize("spec, statement, marks, bounds", [
    (ClaimSpec(contrast="a", metric="m", test="superior"), "superior", (), (0.0,)),
    (ClaimSpec(contrast="a", metric="m", test="superior", margin=0.02), "superior (by more than 0.02)",
     (-0.02,), (-0.02, 0.0)),
    (ClaimSpec(contrast="a", metric="m", test="non_inferior", margin=0.1, reference="r"), "non_inferior (margin 0.1)",
     (0.1,), (0.1, 0.0)),
    (ClaimSpec(contrast="a", metric="m", test="equivalent", relative_margin=0.5, reference="r"),
     "equivalent (margin 0.5 x r)", (-0.1, 0.1), (-0.1, 0.1)),
    (ClaimSpec(contrast="a", metric="m", test="equal"), "equal", (), ()),
    (ClaimSpec(contrast="a", metric="m", test="ratio", max=1.2), "ratio in [-, 1.2]", (1.2,), (1.2,)),
])
def test_each_test_states_itself_and_marks_its_bounds(spec, statement, marks, bounds):
    """Lower is better here (sign -1), the reference-resolved margin is 0.1 where the test reads one."""
    test = claim_test(spec.test)
    assert test.statement(spec) == statement
    assert test.plot_marks(spec, -1, 0.1 if test.needs.reference else None) == marks
    assert test.decision_bounds(spec, -1, 0.1 if test.needs.reference else float(spec.margin or 0.0)) == bounds


def test_a_superiority_margin_is_added_to_what_the_claim_could_detect():
    estimate = mean_estimate([0.01, 0.02, 0.015, 0.012], 0.95)
    plain = claim_test("superior").mde(ClaimSpec(contrast="a", metric="m", test="superior"), estimate, 0.025)
    margined = claim_test("superior").mde(ClaimSpec(contrast="a", metric="m", test="superior", margin=0.05),
                                          estimate, 0.025)
    assert plain > 0 and margined == pytest.approx(plain + 0.05)
    assert claim_test("non_inferior").mde(ClaimSpec(contrast="a", metric="m", test="non_inferior", margin=0.05,
                                                    reference="r"), estimate, 0.025) == plain


def test_the_exact_test_decides_every_pair_and_the_ratio_reads_both_bounds():
    spec = ClaimSpec(contrast="a", metric="m", test="equal")
    equal = claim_test("equal")
    assert equal.decide(spec, mean_estimate([0.0], 0.95), (0.0,), 1, 0.0).status == "pass"
    assert equal.decide(spec, mean_estimate([0.0, 1.0], 0.95), (0.0, 1.0), 1, 0.0).status == "fail"
    inside = mean_estimate([1.0, 1.01, 0.99, 1.0, 1.02, 0.98], 0.95)
    ratio = claim_test("ratio").decide(ClaimSpec(contrast="a", metric="m", test="ratio", min=0.9, max=1.1), inside,
                                       (), 0, math.nan)
    assert ratio == ClaimTestOutcome(INCONCLUSIVE, ratio.detail, ratio.p_value, ratio.p_fail)  # no sign-flip check
    assert ratio.p_value < 0.001 < 0.5 < ratio.p_fail  # surely inside [0.9, 1.1], surely not outside


def test_a_ratio_claim_whose_control_is_zero_on_every_seed_is_inconclusive():
    control = {"acc": [0.0, 0.0, 0.0]}
    treat = {"acc": [0.1, 0.2, 0.3]}
    (result,) = evaluate_claims(two_arm_run(control, treat, [claim("acc", "ratio", max=2.0)]))
    assert result.status == INCONCLUSIVE and result.detail == "no pair with a non-zero control value"
    assert result.in_family  # untested, it stays in its Holm family at p = 1


def _example_blocks() -> tuple[str, str]:
    """The table row and the module docs/architecture.md adds a claim test with."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("### Claim tests", 1)[1]
    row, module = [block.split("\n", 1)[1] for block in section.split("```python\n")[1:3]]
    return row.split("```", 1)[0], module.split("```", 1)[0]


@pytest.mark.integration
def test_the_documented_example_adds_a_test_with_one_row_and_one_module(tmp_path):
    """The example of docs/architecture.md, applied to a copy of the package: a suite file may declare the
    new test and its claims are decided, stated and plotted, with no other file touched."""
    row, module = _example_blocks()
    package = tmp_path / "harness"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    table = package / "suite" / "claim_needs.py"
    text = table.read_text(encoding="utf-8")
    last = '    "ratio": Needs(NO_MARGIN, bounds=True, ratio=True),\n'
    table.write_text(text.replace(last, last + row), encoding="utf-8")
    (package / "analysis" / "claim_tests" / "not_worse.py").write_text(module, encoding="utf-8")
    script = (
        "from test_strict_claims import claim, two_arm_run\n"
        "from harness.analysis.decide.claims import evaluate_claims\n"
        "from harness.analysis.decide.run_decisions import analyse\n"
        "from harness.analysis.present.forest_plots import claim_rows\n"
        "same = {'peak_bytes': [1024.0] * 4, 'acc': [0.8, 0.82, 0.79, 0.81]}\n"
        "more = {'peak_bytes': [2048.0, 2050.0, 2049.0, 2051.0], 'acc': same['acc']}\n"
        "tied = dict(same, acc=[0.81, 0.83, 0.78, 0.8])  # equal bytes, other arms (identical arms answer nothing)\n"
        "(tie,) = evaluate_claims(two_arm_run(same, tied, [claim('peak_bytes', 'not_worse')]))\n"
        "(worse,) = evaluate_claims(two_arm_run(same, more, [claim('peak_bytes', 'not_worse')]))\n"
        "(row,) = claim_rows(analyse(two_arm_run(same, more, [claim('peak_bytes', 'not_worse')])))\n"
        "print(tie.status, worse.status, tie.statement, tie.in_family, row.label, row.detail)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "tests")])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=hang_guard(300))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pass", "fail", "not_worse", "False", "treat-vs-control", "·", "peak_bytes",
                                   "not_worse"]
    scanned = [path for path in package.rglob("*.py") if package / "analysis" / "claim_tests" not in path.parents]
    assert not [path for path in scanned if name_comparisons(path.read_text(encoding="utf-8"))]
