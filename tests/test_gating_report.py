"""`harness gate` for CI: the Markdown table of what moved, $GITHUB_STEP_SUMMARY and `--junit`."""
from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from harness.cli import main
from test_gating_baseline import make_run, shift


@pytest.fixture
def baselines(tmp_path) -> Path:
    out = tmp_path / "baselines"
    result = CliRunner().invoke(main, ["baseline", "save", str(make_run(tmp_path / "reference")), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def gate(tmp_path: Path, baselines: Path, *extra: str, edit=None, env=None):
    results = make_run(tmp_path / "current", edit)
    return CliRunner().invoke(main, ["gate", str(results), "--baselines-dir", str(baselines), *extra], env=env)


def table_rows(markdown: str) -> list[list[str]]:
    rows = [line for line in markdown.splitlines() if line.startswith("| ")][1:]  # below the header
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not set(row) <= set("|- ")]


def test_a_regression_is_a_failed_row_of_the_markdown_table_and_of_the_step_summary(tmp_path, baselines):
    step = tmp_path / "step.md"
    result = gate(tmp_path, baselines, edit=shift("treat", "acc", -0.05), env={"GITHUB_STEP_SUMMARY": str(step)})
    assert result.exit_code == 1, result.output
    markdown = result.output[result.output.index("## harness gate"):]
    assert markdown.startswith("## harness gate: FAIL (0 of 1 run(s) pass)")
    assert "- synth/smoke/cpu vs `" in markdown and "**FAIL**" in markdown
    failed = {(row[1], row[2], row[4]) for row in table_rows(markdown) if row[8] == "FAIL"}
    assert failed == {("quality", "treat", "acc"), ("contrast", "treat-vs-control", "acc")}
    quality = next(row for row in table_rows(markdown) if row[1] == "quality" and row[2] == "treat")
    assert float(quality[5]) == pytest.approx(0.855) and float(quality[6]) == pytest.approx(0.805)
    assert float(quality[7]) == pytest.approx(-0.05)
    assert step.read_text().strip() == markdown.strip()


def test_an_unchanged_run_says_nothing_moved(tmp_path, baselines):
    result = gate(tmp_path, baselines)
    assert result.exit_code == 0, result.output
    assert "## harness gate: PASS (1 of 1 run(s) pass)" in result.output
    assert "Nothing moved: every gated value equals its baseline." in result.output


def test_junit_has_one_case_per_gated_check_and_a_failure_per_regression(tmp_path, baselines):
    junit = tmp_path / "gate.xml"
    result = gate(tmp_path, baselines, "--junit", str(junit), edit=shift("treat", "acc", -0.05))
    assert result.exit_code == 1
    checks = int(result.output.split(" checks within tolerance")[0].rsplit(" of ", 1)[1])
    root = ElementTree.parse(junit).getroot()
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("name") == "synth/smoke/cpu" and len(cases) == checks == int(root.get("tests"))
    failed = {case.get("name") for case in cases if case.find("failure") is not None}
    assert failed == {"quality treat acc", "contrast treat-vs-control acc"}
    assert root.get("failures") == suite.get("failures") == "2"
    assert all(case.get("classname") == "harness.gate.synth.smoke" for case in cases)


def test_junit_lists_a_failed_trial_as_a_failed_case(tmp_path, baselines):
    junit = tmp_path / "gate.xml"
    results = make_run(tmp_path / "current", failed=True)
    result = CliRunner().invoke(main, ["gate", str(results), "--baselines-dir", str(baselines), "--junit", str(junit)])
    assert result.exit_code == 1
    names = [case.get("name") for case in ElementTree.parse(junit).getroot().iter("testcase")
             if case.find("failure") is not None]
    assert any(name.startswith("failed trial: treat seed=1") for name in names)


@pytest.mark.parametrize("target", ["missing/gate.xml", "folder"])
def test_junit_to_an_unwritable_path_is_one_line_before_gating(tmp_path, baselines, target):
    (tmp_path / "folder").mkdir()
    result = gate(tmp_path, baselines, "--junit", str(tmp_path / target))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --junit") and len(result.stderr.strip().splitlines()) == 1
    assert "gate synth" not in result.output  # refused before anything was compared
    assert not (tmp_path / "missing").exists()


def test_a_value_that_moved_by_float_rounding_alone_is_not_a_row():
    from harness.gating.gate import GateCheck
    from harness.gating.gate_report import moved

    rounded = GateCheck("quality", "split", "", "acc1", 0.912689, 0.912689 - 1.11e-16, True, "mean")
    real = GateCheck("quality", "split", "", "acc1", 0.912689, 0.9126, True, "mean")
    assert not moved(rounded) and moved(real)
