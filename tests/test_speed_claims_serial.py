"""Under ``--executor auto`` a suite that claims a speed metric runs its trials one at a time: a
confirmatory claim on timings taken beside another trial would measure the machine's load."""
from __future__ import annotations

import io

from harness import api
from harness.execution.executor import SerialExecutor
from harness.execution.parallel import ProcessExecutor
from harness.terminal import Console


def suite_with_claims(tmp_path, toy_suite, extra_claim: str):
    text = toy_suite.read_text().replace(
        "claims:\n", f"claims:\n{extra_claim}")
    path = tmp_path / "toy.yaml"
    path.write_text(text)
    return api.load_suites(path)[0]


def test_a_speed_claim_runs_serially_under_auto(tmp_path, toy_suite):
    suite = suite_with_claims(tmp_path, toy_suite,
                              "  - {contrast: momentum-vs-sgd, metric: samples_per_s, test: non_inferior, margin: 0.5,"
                              " reference: sgd-vs-slow_lr}\n")
    assert suite.speed_claims == ["samples_per_s"]
    stream = io.StringIO()
    side_by_side = ProcessExecutor(2)
    chosen = api.suite_executor(suite, api.RunOptions(), side_by_side, Console(stream))
    assert isinstance(chosen, SerialExecutor)
    assert "samples_per_s" in stream.getvalue() and "one at a time" in stream.getvalue()
    # asked for by name, the executor is the user's to choose: no silent override
    assert api.suite_executor(suite, api.RunOptions(executor="parallel"), side_by_side, Console(stream)) \
        is side_by_side


def test_quality_claims_keep_trials_side_by_side(toy_suite):
    suite = api.load_suites(toy_suite)[0]
    assert suite.speed_claims == []
    side_by_side = ProcessExecutor(2)
    assert api.suite_executor(suite, api.RunOptions(), side_by_side, Console(io.StringIO())) is side_by_side
