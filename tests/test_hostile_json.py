"""Hostile JSON in a stored document is one line naming the file: an integer of thousands of digits (Python
refuses to convert it with a bare ValueError) or an array nested 100,000 deep (a RecursionError) is refused
by the one parser every reader uses (``harness.store.parse_json``), never a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_gating_baseline import invoke, make_run

from harness.store import MAX_INT_DIGITS, MAX_JSON_DEPTH, RunFolder, parse_json, read_trial, CorruptTrial
from harness.suite.design import UnreadableDesign, stored_design
from harness.suite.resolved_suite import SuiteError
from harness.suite.tuning_lock import TuningLock

HOSTILE = {
    "digits": ('{"schema": 1, "n": 1' + "0" * 5000 + "}", "an integer of 5001 digits"),
    "depth": ("[" * 100_000 + "]" * 100_000, f"nested deeper than {MAX_JSON_DEPTH} levels"),
}


@pytest.fixture(params=sorted(HOSTILE))
def hostile(request) -> tuple[str, str]:
    return HOSTILE[request.param]


def one_error_line(result, path: Path, says: str) -> None:
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ") and str(path) in line and says in line, line


def test_the_parser_refuses_what_no_stored_document_holds_and_reads_the_rest():
    assert parse_json('{"a": [1, -2, 3.5, {"b": null}], "n": ' + "9" * MAX_INT_DIGITS + "}")["a"][3] == {"b": None}
    assert parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    for text, says in HOSTILE.values():
        with pytest.raises(json.JSONDecodeError, match=says):
            parse_json(text)
    with pytest.raises(json.JSONDecodeError, match="nested deeper"):
        parse_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))


def test_a_hostile_baseline_is_one_line(tmp_path, hostile):
    text, says = hostile
    baseline = tmp_path / "synth-smoke-cpu.json"
    baseline.write_text(text)
    one_error_line(invoke("gate", make_run(tmp_path / "r"), "--baseline", baseline), baseline, says)


def test_a_hostile_suite_json_is_one_line(tmp_path, hostile):
    text, says = hostile
    run = make_run(tmp_path / "r")
    (run / "suite.json").write_text(text)
    one_error_line(invoke("report", run), run / "suite.json", says)
    with pytest.raises(UnreadableDesign, match=f"{run / 'suite.json'} is not JSON \\({says}"):
        stored_design(RunFolder(tmp_path / "r", "synth", "smoke"))


def test_a_hostile_trial_file_is_a_corrupt_trial_and_the_report_goes_on(tmp_path, hostile):
    text, says = hostile
    run = make_run(tmp_path / "r")
    trial = run / "trials" / "treat-1.json"
    trial.write_text(text)
    with pytest.raises(CorruptTrial, match=f"not JSON \\({says}"):
        read_trial(trial)
    reported = invoke("report", run)
    assert "Traceback" not in reported.output and "treat-1" in reported.output, reported.output


def test_a_hostile_tuning_lock_is_one_line(tmp_path, hostile):
    text, says = hostile
    lock = tmp_path / "s.tuned.json"
    lock.write_text(text)
    with pytest.raises(SuiteError, match=f"^{lock}: not a readable tuning lock \\({says}") as refused:
        TuningLock.read(lock, tmp_path / "s.yaml")
    assert "\n" not in str(refused.value)
