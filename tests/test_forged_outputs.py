"""Outputs that cannot be forged: a claim metric with markup, escapes or a newline is refused at load
(one line, file:line, exit 2); two claims that would share one MLflow tag are refused; names read back
from a results folder (a received one may say anything) reach the Markdown summary, the gate's
Markdown, its JUnit XML and the terminal as themselves, never as markup, escapes or extra lines."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from harness.analysis.present.markdown_tables import inline, plain
from harness.cli import main
from harness.cli.outputs import append_step_summary, output_problem
from harness.gating.gate import GateCheck, GateResult
from harness.gating.gate_report import junit_xml, render_markdown
from harness.core.metrics import metric_key_problem, tracking_name
from test_hostile_input import TOY, refused, write

FORGED = "acc\n**Totals:** claims 9 PASS\x1b[2J<img src=x onerror=alert(1)>]]>\x00"


@pytest.mark.parametrize("metric, fragment", [
    ('"accuracy@<b>1</b>"', "is not a word"),
    ('"accuracy@1\\n**Totals:** forged"', "is not a word"),
    ('"accuracy\\e[31m"', "is not a word"),
    ('"accuracy@' + "x" * 6000 + '"', "is not a word"),
])
def test_a_claim_metric_that_is_not_a_plain_name_is_refused_at_load(tmp_path, metric, fragment):
    suite = write(tmp_path, TOY + f"claims:\n  - {{contrast: momentum-vs-sgd, metric: {metric}, test: superior}}\n")
    line = refused(CliRunner().invoke(main, ["validate", str(suite)]), fragment, f"{suite}:14:")
    assert "\x1b" not in line and len(line) < 400


def test_a_margin_named_with_markup_is_refused_at_load(tmp_path):
    text = TOY.replace("{treatment: momentum, control: sgd}", '{treatment: momentum, control: sgd, margins: {"a<b>": 1}}')
    refused(CliRunner().invoke(main, ["validate", str(write(tmp_path, text))]), "contrasts.0.margins", "is not a word")


def test_two_claims_that_would_share_an_mlflow_tag_are_refused(tmp_path):
    suite = write(tmp_path, TOY + "claims:\n"
                  "  - {contrast: momentum-vs-sgd, metric: accuracy@1, test: superior}\n"
                  "  - {contrast: momentum-vs-sgd, metric: accuracy@1, test: ratio, min: 1.0}\n")
    refused(CliRunner().invoke(main, ["validate", str(suite)]), f"{suite}:15:", "one claim per contrast and metric")
    assert tracking_name("acc@1") == tracking_name("acc_at_1")  # what the check compares: MLflow's spelling


def hostile_result() -> GateResult:
    check = GateCheck("quality", FORGED, FORGED, FORGED, 0.9, 0.8, False, "worse by 0.1 > 0.05")
    return GateResult(FORGED, "smoke", "cpu", Path("baselines/x`y.json"), (check,), (FORGED,), (), (FORGED,))


def test_the_gate_markdown_and_junit_hold_stored_names_as_text():
    markdown = render_markdown([hostile_result()])
    assert not any(line.startswith("**Totals") for line in markdown.splitlines())
    assert not re.search(r"(?<!\\)<", markdown) and "\x1b" not in markdown and "\x00" not in markdown
    assert "\\<img src=x onerror=alert(1)\\>" in markdown  # shown, escaped
    root = ElementTree.fromstring(junit_xml([hostile_result()]).encode())  # well formed
    case = root.find("testsuite/testcase")
    assert "<img src=x" in case.get("name") and "\x1b" not in case.get("name")
    assert "\n" not in case.get("name")
    text = hostile_result().render()
    assert "\x1b" not in text and len(text.splitlines()) == 4  # header, regression, failed trial, missing value


def test_inline_and_plain_keep_a_name_to_one_line_of_text():
    assert plain("a\nb\x1b[31m\u202ec\td") == "ab[31mc d".replace("ab", "a b")
    assert inline("[x](http://e) *y* <b>") == "\\[x\\](http://e) \\*y\\* \\<b\\>"


def test_the_step_summary_never_waits_on_a_fifo_and_output_paths_must_be_regular(tmp_path, monkeypatch, capsys):
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    append_step_summary("text")  # returns at once (no reader): a warning, not a hang
    assert "cannot append" in capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert "not a regular file" in output_problem(fifo, "--markdown")
    link = tmp_path / "link.md"
    link.symlink_to("/proc/self/fd/1")
    assert "a link" in output_problem(link, "--junit")
    regular = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(regular))
    append_step_summary("one")
    append_step_summary("two")
    assert regular.read_text() == "one\n\ntwo\n\n"


@pytest.mark.parametrize("key", ["budget/steps", "at_bound/gain", "nmse@1024", "layer_auroc@1"])
def test_namespaced_and_qualified_metric_names_are_plain_names(key):
    assert metric_key_problem(key) is None


@pytest.mark.parametrize("key", ["/steps", "budget/steps@a/b", "a b", "budget\\steps"])
def test_a_name_that_only_looks_namespaced_is_refused(key):
    assert metric_key_problem(key) is not None
