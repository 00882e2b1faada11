"""`harness export`: stored trials as one long table (CSV or Parquet), and its refusals."""
from __future__ import annotations

import io
import os

import pandas
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.store import RunFolder
from records import make_record

METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
    "bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"},
}
COMMIT = "ab" * 20


def stored_run(root, suite="synth", profile="default") -> dict[str, dict]:
    """A results folder with two arms, two seeds and one failed trial; returns the finished records."""
    folder = RunFolder(root, suite, profile)
    folder.save_suite({"schema": 1, "suite": suite, "profile": profile, "task": "synth", "task_version": "1",
                       "seeds": [0, 1], "sweep": {}, "metrics": METRICS, "contrasts": [], "claims": []})
    finished = {}
    for n, (arm, seed) in enumerate([("control", 0), ("treat", 0), ("control", 1), ("treat", 1)]):
        record = make_record(f"{suite}{n}", arm, seed, suite=suite, profile=profile, point={"width": 4},
                             metrics={"acc": 0.5 + 0.01 * n + seed / 3, "bytes": 1024.0 * (n + 1)},
                             environment={"git_commit": COMMIT})
        folder.save_trial(record)
        finished[record.trial_id] = record
    folder.save_trial(make_record(f"{suite}-failed", "treat", 2, suite=suite, profile=profile, status="failed",
                                  error="boom"))
    return finished


def export(*args: str):
    return CliRunner().invoke(main, ["export", *map(str, args)])


def test_csv_has_a_row_per_trial_and_metric_with_its_values(tmp_path):
    finished = {**stored_run(tmp_path / "r"), **stored_run(tmp_path / "r", suite="other")}
    out = tmp_path / "all.csv"
    result = export(tmp_path / "r", "--format", "csv", "--out", out)
    assert result.exit_code == 0, result.output
    frame = pandas.read_csv(out, keep_default_na=False)
    assert {"suite", "profile", "point", "arm", "seed", "metric", "value", "unit", "trial_id", "git_commit"} <= set(frame)
    assert len(frame) == 2 * len(finished)  # the failed trials have no values, so no rows
    for row in frame.itertuples():
        record = finished[row.trial_id]
        assert (row.suite, row.arm, row.seed, row.point) == (record.suite, record.arm, record.seed, "width=4")
        assert row.value == record.metrics[row.metric]  # exact: CSV keeps a float's shortest round-trip repr
        assert row.unit == METRICS[row.metric]["unit"] and row.git_commit == COMMIT
    assert sorted(frame["suite"].unique()) == ["other", "synth"]


def test_parquet_holds_the_same_table_and_stdout_gets_csv(tmp_path):
    stored_run(tmp_path / "r")
    out = tmp_path / "t.parquet"
    assert export(tmp_path / "r", "--format", "parquet", "--out", out).exit_code == 0
    printed = export(tmp_path / "r")
    assert printed.exit_code == 0
    from_csv = pandas.read_csv(io.StringIO(printed.stdout), keep_default_na=False, dtype={"task_version": str})
    pandas.testing.assert_frame_equal(pandas.read_parquet(out), from_csv, check_dtype=False)


@pytest.mark.parametrize("case", ["folder", "missing folder", "read-only folder", "format", "binary to stdout",
                                  "no runs"])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    stored_run(tmp_path / "r")
    out, args = tmp_path / "out.csv", []
    if case == "folder":
        out = tmp_path / "r"
    elif case == "missing folder":
        out = tmp_path / "nowhere" / "out.csv"
    elif case == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        out = tmp_path / "ro" / "out.csv"
        out.parent.mkdir()
        out.parent.chmod(0o555)
    elif case == "format":
        args = ["--format", "xlsx"]
    elif case == "binary to stdout":
        args, out = ["--format", "parquet"], None
    results = tmp_path / "empty" if case == "no runs" else tmp_path / "r"
    (tmp_path / "empty").mkdir()
    before = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    result = export(results, *args, *(["--out", out] if out is not None else []))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == before


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_escaped_and_numbers_stay_numbers(tmp_path):
    """OWASP's CSV-injection guidance: a text cell starting with = + - @, a tab or a carriage return gets a
    leading single quote; a negative value is a number, not text, and stays one."""
    hostile = {"arm": "@SUM(1+1)*cmd|' /C calc'!A0", "metric": "-2+3", "unit": "+1", "label": "\t=1",
               "commit": '=HYPERLINK("http://example.invalid","x")'}
    folder = RunFolder(tmp_path / "r", "synth", "default")
    folder.save_suite({"schema": 1, "suite": "synth", "profile": "default", "task": "synth", "task_version": "\r=2",
                       "seeds": [0], "sweep": {}, "contrasts": [], "claims": [],
                       "metrics": {hostile["metric"]: {"direction": "higher", "unit": hostile["unit"], "kind": "quality"}}})
    folder.save_trial(make_record("t1", hostile["arm"], 0, arm_label=hostile["label"], task_version="\r=2",
                                  metrics={hostile["metric"]: -0.5}, environment={"git_commit": hostile["commit"]}))
    out = tmp_path / "t.csv"
    assert export(tmp_path / "r", "--out", out).exit_code == 0
    printed = export(tmp_path / "r")
    assert printed.stdout == out.read_bytes().decode("utf-8")
    assert '"\'\r=2"' in printed.stdout  # quoted: its carriage return cannot start a row
    [row] = pandas.read_csv(out, keep_default_na=False).to_dict("records")
    assert row["arm"] == "'" + hostile["arm"] and row["arm_label"] == "'" + hostile["label"]
    assert row["metric"] == "'" + hostile["metric"] and row["unit"] == "'" + hostile["unit"]
    assert row["git_commit"] == "'" + hostile["commit"] and row["task_version"] == "'\r=2"
    assert row["value"] == -0.5 and row["seed"] == 0  # numbers, unescaped
    assert row["suite"] == "synth"  # a harmless cell is as it was
