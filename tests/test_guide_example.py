"""The guide's worked non-inferiority example (docs/new-task.md), run as written: the suite text is
read from the guide, its task is `tests/char_lm_task.py`, and the summary row the guide prints comes back."""
from __future__ import annotations

import re
from pathlib import Path

from fault_injection import harness_here

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "new-task.md"


def _section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    return text[text.index("### Worked example: a non-inferiority claim and its reference"):text.index("## 7. ")]


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_the_guides_non_inferiority_example_runs_to_the_row_it_shows(tmp_path):
    section = _section()
    suite_text, shown = re.findall(r"```(?:yaml)?\n(.*?)```", section, re.S)
    suite = tmp_path / "hashed_context.yaml"
    suite.write_text(suite_text.replace("task: char_lm\n", "task: char_lm_task:CharLMTask\n"))
    done = harness_here("run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow", "--threads", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    written = (tmp_path / "r" / "summary.md").read_text()  # the terminal prints its compact form
    assert "### hashed_context (default): validity OK;" in written
    (row,) = [line for line in written.splitlines() if line.startswith("| hashed-vs-full ")]
    expected = _cells(shown)
    assert _cells(row)[:4] == expected[:4] and _cells(row)[5] == expected[5] == "PASS"
    estimate = float(_cells(row)[4].split()[0])
    assert abs(estimate - float(expected[4].split()[0])) < 0.005  # the same stretch of the standard library


def test_the_example_without_its_reference_is_refused(tmp_path):
    suite_text = re.findall(r"```yaml\n(.*?)```", _section(), re.S)[0]
    suite = tmp_path / "no_reference.yaml"
    suite.write_text(suite_text.replace("task: char_lm\n", "task: char_lm_task:CharLMTask\n")
                     .replace(", reference: full-vs-unigram", ""))
    refused = harness_here("validate", str(suite))
    assert refused.returncode == 2 and "reference" in refused.stderr and "Traceback" not in refused.stderr


def test_the_guides_too_weak_positive_control_stops_at_the_first_look(tmp_path):
    section = _section()
    suite_text = re.findall(r"```yaml\n(.*?)```", section, re.S)[0]
    weak = re.search(r"`more_data:\s*\{eval_chars: 4001\}`", section)
    assert weak is not None
    suite = tmp_path / "weak.yaml"
    suite.write_text(suite_text.replace("task: char_lm\n", "task: char_lm_task:CharLMTask\n")
                     .replace("more_data: {train_chars: 80000}", "more_data: {eval_chars: 4001}"))
    done = harness_here("run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow", "--threads", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    written = (tmp_path / "r" / "summary.md").read_text()
    heading = next(line for line in written.splitlines() if line.startswith("### hashed_context"))
    assert "validity INVALID (positive control too weak: more_data " in heading
    assert "at n=3, conditional power 0.00 \\< 0.1 to beat it by 8 seeds" in heading and "3 seeds of up to 8" in heading
