"""`harness run` ends with the summary: the last 40 lines give every suite's validity and claim results."""
from __future__ import annotations

import pytest

from fault_injection import harness_here

pytestmark = pytest.mark.integration  # whole runs with their reports (in this process: the output is the point)


def test_the_last_40_lines_of_a_run_are_the_summary_also_in_summary_md_and_the_job_summary(
    tmp_path, toy_suite
):
    results = tmp_path / "results"
    step = tmp_path / "step.md"
    command = ["run", str(toy_suite), "--results", str(results), "--no-mlflow"]
    first = harness_here(*command, GITHUB_STEP_SUMMARY=str(step))
    assert first.returncode == 0, first.stderr
    tail = first.stdout.splitlines()[-40:]
    assert tail.count("## harness summary") == 1
    (heading,) = [line for line in tail if line.startswith("toy (default) ")]
    claims = [line for line in tail if "momentum-vs-sgd · " in line]
    assert len(claims) == 4  # 2 claims x 2 sweep points, each with its result
    assert all(any(result in line for result in ("PASS", "FAIL", "INCONCLUSIVE", "VACUOUS")) for line in claims)
    assert tail[-2].startswith("**The mechanism against its controls:** ")
    assert tail[-1].startswith("**Totals:** checks ") and "suites valid " in tail[-1]
    written = (results / "summary.md").read_text()  # the full summary: the terminal's is its compact form
    assert "### toy (default): validity " in written and written.splitlines()[-1] == tail[-1]
    assert step.read_text().strip() == written.strip()
    assert "samples_per_s" not in first.stdout  # quiet: a non-key metric stays in verdicts.txt
    assert "samples_per_s" in (results / "toy" / "default" / "report" / "verdicts.txt").read_text()

    verbose = harness_here(*command, "--verbose", GITHUB_STEP_SUMMARY=str(step))
    assert verbose.returncode == 0, verbose.stderr
    assert "0 ran, 18 already finished" in verbose.stdout and "samples_per_s" in verbose.stdout
    assert any(line.startswith("toy (default) ") for line in verbose.stdout.splitlines()[-40:])
