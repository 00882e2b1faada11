"""The Python API runs a suite's whole lifecycle in-process: what the CLI prints, a caller gets as data."""
from __future__ import annotations

from pathlib import Path

import mlflow
import pytest

from harness import api
from harness.core.record import Status
from harness.store import iter_trial_files, read_trial

pytestmark = pytest.mark.integration  # trains the toy task and writes a real MLflow store


def test_run_stores_reports_and_mirrors_then_a_second_run_resumes(tmp_path, toy_suite):
    options = api.RunOptions(profile="smoke", results=tmp_path)
    seen: list[str] = []
    first = api.run(toy_suite, options, on_suite=lambda result: seen.append(result.outcome.suite.name))
    assert first.exit_code == 0 and seen == ["toy"]
    (suite,) = first.suites
    assert suite.outcome.ran == 3 and suite.report is not None
    trials = [read_trial(p) for p in iter_trial_files(suite.outcome.run_dir)]
    assert len(trials) == 3 and {t.status for t in trials} == {Status.FINISHED}
    assert "momentum-vs-sgd" in suite.text() and "## harness summary" in first.summary
    assert (tmp_path / "summary.md").read_text() == first.summary
    parent = mlflow.MlflowClient(first.tracker.uri).get_run(suite.outcome.parent_run_id)
    assert parent.info.status == "FINISHED"

    again = api.run(toy_suite, options)  # the locks of the first run were released when it returned
    assert again.exit_code == 0 and again.suites[0].outcome.ran == 0 and again.suites[0].outcome.skipped == 3
    assert again.suites[0].report is None  # nothing new: the stored report stands
    assert again.suites[0].outcome.parent_run_id is None  # nothing to mirror either


def test_a_rerun_that_only_mirrors_again_still_logs_the_claims(tmp_path, toy_suite):
    options = api.RunOptions(profile="smoke", results=tmp_path)
    first = api.run(toy_suite, options)
    parent = mlflow.MlflowClient(first.tracker.uri).get_run(first.suites[0].outcome.parent_run_id)
    other_store = api.RunOptions(profile="smoke", results=tmp_path, tracking_uri=f"sqlite:///{tmp_path / 'other.db'}")
    again = api.run(toy_suite, other_store)  # a store that lacks the trials: each is mirrored again, none reruns
    assert again.suites[0].outcome.ran == 0 and again.suites[0].report is None
    rerun = mlflow.MlflowClient(again.tracker.uri).get_run(again.suites[0].outcome.parent_run_id)
    claims = {k: v for k, v in rerun.data.metrics.items() if k.startswith("claim/")}
    assert claims and claims == {k: v for k, v in parent.data.metrics.items() if k.startswith("claim/")}
    assert rerun.data.tags["harness.validity"] == parent.data.tags["harness.validity"]


def test_baseline_and_gate_through_the_api(tmp_path, toy_suite):
    results = tmp_path / "results"
    api.run(toy_suite, api.RunOptions(profile="smoke", results=results, mlflow=False))
    (path,) = api.save_baselines(results, tmp_path / "baselines")
    assert path.name == "toy-smoke-cpu.json"
    (gated,) = api.gate(results, baselines_dir=tmp_path / "baselines")
    assert gated.passed and gated.checks
    (rebuilt,) = api.report(results)
    assert rebuilt.summary_path.is_file() and "toy (smoke)" in api.summary([rebuilt])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda tmp: api.run(Path(tmp) / "missing.yaml", api.RunOptions(results=Path(tmp))), "missing.yaml"),
        (lambda tmp: api.gate(Path(tmp) / "nothing-here"), "does not exist"),
        (lambda tmp: api.save_baselines(Path(tmp)), "no stored results"),
    ],
    ids=["unknown-suite-file", "gate-missing-folder", "baseline-of-nothing"],
)
def test_usage_errors_are_one_line_and_write_nothing(tmp_path, call, message):
    with pytest.raises(api.UsageError, match=message) as error:
        call(tmp_path)
    assert "\n" not in str(error.value)
    assert not list(tmp_path.rglob("*.json"))
