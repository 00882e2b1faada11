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


# --- what the gate decides and names, value by value (mutation survivors of gating/gate) --------------

import json  # noqa: E402

from harness.gating.gate import gate as gate_results  # noqa: E402
from test_gating_baseline import MIXED_ENVIRONMENT, mixed_run, one_line_usage_error, scale, set_trial  # noqa: E402

BASELINE = "synth-smoke-cpu.json"


def test_the_gates_first_line_names_the_baseline_file_it_compared_with(tmp_path, baselines):
    result = gate(tmp_path, baselines)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"gate synth/smoke/cpu vs {baselines / BASELINE}: PASS (")


def test_a_value_missing_from_the_run_is_named_once(tmp_path, baselines):
    run = make_run(tmp_path / "current", lambda values: values["treat"].pop("err"))
    result = gate_results(run, baselines / BASELINE)
    assert sorted(result.missing_in_run) == ["contrast treat-vs-control err", "quality treat err"]
    assert not result.passed and not result.dropped_seeds


def test_a_baseline_contrast_the_run_does_not_have_is_missing_and_the_rest_is_still_checked(tmp_path, baselines):
    path = baselines / BASELINE
    stored = json.loads(path.read_text())
    values = stored["values"]
    renamed = next(i for i, v in enumerate(values) if v["check"] == "contrast")
    assert renamed < len(values) - 1  # values after it are still gated
    values[renamed]["subject"] = "ghost-vs-control"
    path.write_text(json.dumps(stored))
    result = gate_results(make_run(tmp_path / "current"), path)
    assert result.missing_in_run == (f"contrast ghost-vs-control {values[renamed]['metric']}",)
    assert len(result.checks) == len(values) - 1 and not result.regressions


def test_a_speed_ratio_over_a_control_that_measured_zero_is_dropped_and_says_why(tmp_path, baselines):
    result = gate(tmp_path, baselines, edit=scale("control", "qps", 0.0))
    assert result.exit_code == 1, result.output
    assert [line for line in result.output.splitlines() if line.startswith("  DROPPED")] == [
        "  DROPPED SEED (no finite value in this run; not compared): speed_ratio treat-vs-control qps: the control's "
        "mean is 0 in this run, no ratio"]
    assert "MISSING" not in result.output  # named once, as dropped


def test_seeds_without_a_finite_value_are_listed_by_number_once(tmp_path):
    seeds = (0, 1, 2)
    out = tmp_path / "baselines"
    assert CliRunner().invoke(main, ["baseline", "save", str(make_run(tmp_path / "reference", seeds=seeds)),
                                     "--out", str(out)]).exit_code == 0
    run = make_run(tmp_path / "current", seeds=seeds)
    for seed in (0, 1):
        set_trial(run, f"treat-{seed}", metrics={"acc": None})  # NaN is stored as null
    result = gate_results(run, out / BASELINE)
    assert sorted(result.dropped_seeds) == ["contrast treat-vs-control acc: seed(s) 0, 1 missing or not finite",
                                            "quality treat acc: seed(s) 0, 1 missing or not finite"]
    assert result.missing_in_run == () and not result.passed  # named once, as dropped


def test_the_gate_says_when_stored_trials_of_other_seeds_were_set_aside(tmp_path, baselines):
    run = make_run(tmp_path / "current")
    record = json.loads((run / "trials" / "treat-1.json").read_text())
    (run / "trials" / "treat-7.json").write_text(json.dumps({**record, "trial_id": "treat-7", "seed": 7}))
    result = CliRunner().invoke(main, ["gate", str(run), "--baselines-dir", str(baselines)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == (
        f"  warning: 1 stored trial(s) in {run} are not of this suite's expansion and seeds (a param, sweep, arm or "
        "seed changed since they ran): set aside, not analysed")


def test_a_run_of_other_seed_batches_is_refused_naming_the_baseline_and_the_same_mix_passes(tmp_path):
    out = tmp_path / "baselines"
    assert CliRunner().invoke(main, ["baseline", "save", str(mixed_run(tmp_path / "mixed")), "--out",
                                     str(out)]).exit_code == 0
    again = CliRunner().invoke(main, ["gate", str(mixed_run(tmp_path / "again")), "--baselines-dir", str(out)])
    assert again.exit_code == 0, again.output
    alone = make_run(tmp_path / "alone")
    for trial_id, environment in MIXED_ENVIRONMENT.items():
        set_trial(alone, trial_id, environment={k: v for k, v in environment.items() if k != "seed_batch"})
    refused = CliRunner().invoke(main, ["gate", str(alone), "--baselines-dir", str(out)])
    one_line_usage_error(refused, f"trained in seed batches of 1, baseline {out / BASELINE}'s in 1 | 2; ")
