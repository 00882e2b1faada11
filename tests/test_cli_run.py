"""`harness run` end to end through the real CLI, the real results store and a real SQLite MLflow store.
Kills, interrupts and the first end-to-end run are real subprocesses; what a command stores and says
otherwise runs in this process (``harness_here``: the same click command, without a new interpreter)."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from harness.store import INCOMPLETE_FILE
from harness.tracking.mlflow_tracker import default_tracking_uri

from fault_injection import hang_guard, harness_here

pytestmark = pytest.mark.integration  # CLI subprocesses, real MLflow stores


def run_cli(harness_cmd, cli_env, *args, timeout=300):
    return subprocess.run([*harness_cmd, *args], env=cli_env, capture_output=True, text=True,
                          timeout=hang_guard(timeout))


def trial_files(results: Path, suite="toy", profile="smoke") -> list[Path]:
    return sorted((results / suite / profile / "trials").glob("*.json"))


def mlflow_trial_runs(results: Path, suite="toy"):
    import mlflow

    client = mlflow.MlflowClient(default_tracking_uri(results))
    experiment = client.get_experiment_by_name(suite)
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.`harness.kind` = 'trial'")
    return experiment, runs


def test_run_stores_logs_and_skips_on_rerun(tmp_path, toy_suite, harness_cmd, cli_env):
    results = tmp_path / "results"
    first = run_cli(harness_cmd, cli_env, "run", str(toy_suite), "--profile", "smoke", "--results", str(results))
    assert first.returncode == 0, first.stderr
    assert "momentum" in first.stdout and "accuracy" in first.stdout  # the arm table
    assert "harness ui --results" in first.stdout
    files = trial_files(results)
    assert len(files) == 3
    record = json.loads(files[0].read_text())
    assert record["status"] == "finished" and record["environment"]["device"] == "cpu"

    import mlflow

    client = mlflow.MlflowClient(default_tracking_uri(results))
    experiment = client.get_experiment_by_name("toy")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    parents = client.search_runs([experiment.experiment_id], filter_string="tags.`harness.kind` = 'suite'")
    assert len(parents) == 1
    tags = parents[0].data.tags  # the parent states how its verdicts were computed
    assert tags["harness.stats.method"] == "paired Student-t" and tags["harness.stats.confidence"] == "0.95"
    assert tags["harness.stats.seeds"] == "1" and tags["harness.validity"] == "undetermined"
    _, trials = mlflow_trial_runs(results)
    assert len(trials) == 3
    for run in trials:
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert run.data.params["steps"] == "20"
        assert {"accuracy", "loss", "train/loss", "wall_seconds"} <= set(run.data.metrics)
        for tag in ("harness.config_hash", "harness.git_commit", "harness.seed", "harness.arm", "harness.torch",
                    "harness.device_name", "harness.cpu_model"):
            assert tag in run.data.tags
    history = client.get_metric_history(trials[0].info.run_id, "train/loss")
    assert [m.step for m in history] == list(range(20))

    second = run_cli(harness_cmd, cli_env, "run", str(toy_suite), "--profile", "smoke", "--results", str(results))
    assert second.returncode == 0, second.stderr
    assert "0 ran, 3 already finished" in second.stdout
    assert len(mlflow_trial_runs(results)[1]) == 3


def test_failing_trial_is_recorded_others_finish_exit_nonzero(tmp_path, toy_suite):
    suite = tmp_path / "s.yaml"
    suite.write_text(toy_suite.read_text().replace("slow_lr: {lr: 0.001}", "slow_lr: {fail: true}"))
    results = tmp_path / "results"
    proc = harness_here("run", str(suite), "--profile", "smoke", "--results", str(results))
    assert proc.returncode == 1
    records = [json.loads(p.read_text()) for p in trial_files(results)]
    assert sorted(r["status"] for r in records) == ["failed", "finished", "finished"]
    assert "configured to fail" in proc.stdout
    assert "Traceback" not in proc.stderr

    # resume: the failed trial runs again, the finished ones are kept
    rerun = harness_here("run", str(suite), "--profile", "smoke", "--results", str(results))
    assert rerun.returncode == 1
    assert "1 ran, 2 already finished" in rerun.stdout


def test_sigkill_midway_then_rerun_runs_only_unfinished_without_duplicates(tmp_path, toy_suite, harness_cmd, cli_env):
    suite = tmp_path / "slow.yaml"
    suite.write_text(toy_suite.read_text().replace("params: {steps: 60}", "params: {steps: 60, seconds_per_step: 0.01}"))
    results = tmp_path / "results"
    args = ["run", str(suite), "--seeds", "0,1", "--results", str(results)]  # 3 arms x 2 seeds x 2 points
    proc = subprocess.Popen([*harness_cmd, *args], env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while len(trial_files(results, profile="default")) < 3 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survivors = {p.name: p.read_text() for p in trial_files(results, profile="default")}
    assert 3 <= len(survivors) < 12
    for text in survivors.values():
        assert json.loads(text)["status"] == "finished"  # never half-written
    partial = harness_here("report", str(results))
    assert partial.returncode == 1 and "INCOMPLETE RUN" in partial.stderr  # the killed run never reads as a result

    rerun = harness_here(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{12 - len(survivors)} ran, {len(survivors)} already finished" in rerun.stdout
    files = trial_files(results, profile="default")
    assert len(files) == 12 and not (results / "toy" / "default" / INCOMPLETE_FILE).exists()
    for path in files:
        if path.name in survivors:
            assert path.read_text() == survivors[path.name]  # finished results untouched
    experiment, runs = mlflow_trial_runs(results)
    ids = [r.data.tags["harness.trial_id"] for r in runs]
    assert len(ids) == 12 and len(set(ids)) == 12  # none lost, none duplicated
    import mlflow

    parents = mlflow.MlflowClient(default_tracking_uri(results)).search_runs(
        [experiment.experiment_id], filter_string="tags.`harness.kind` = 'suite'")
    assert sorted(p.info.status for p in parents) == ["FINISHED", "KILLED"]  # the killed invocation is closed


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_interrupt_keeps_finished_trials_and_exits_130(stop, tmp_path, toy_suite, harness_cmd, cli_env):
    suite = tmp_path / "slow.yaml"
    suite.write_text(toy_suite.read_text().replace("params: {steps: 60}", "params: {steps: 60, seconds_per_step: 0.01}"))
    results = tmp_path / "results"
    # A shell without job control starts background jobs with SIGINT ignored (CI does): restore it.
    proc = subprocess.Popen([*harness_cmd, "run", str(suite), "--results", str(results), "--no-mlflow"],
                            env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while len(trial_files(results, profile="default")) < 2 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(stop)
    out, err = proc.communicate(timeout=hang_guard(60))
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert all(json.loads(p.read_text())["status"] == "finished" for p in trial_files(results, profile="default"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_tracking_server_fails_before_training(tmp_path, toy_suite):
    results = tmp_path / "results"
    proc = harness_here("run", str(toy_suite), "--profile", "smoke", "--results", str(results),
                        "--tracking-uri", f"http://127.0.0.1:{free_port()}")
    assert proc.returncode == 2
    assert "unreachable" in proc.stderr and "Traceback" not in proc.stderr
    assert not trial_files(results)


def test_user_mistakes_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("suite: x\ntask: nosuch\nseeds: [0]\narms: {a: {}}\n")
    proc = harness_here("validate", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown task 'nosuch'" in proc.stderr
    missing = harness_here("run", str(tmp_path / "none.yaml"))
    assert missing.returncode == 2 and "cannot read suite file" in missing.stderr


def test_list_shows_tasks_params_and_metrics():
    proc = harness_here("list")
    assert proc.returncode == 0, proc.stderr
    for task in ("routing", "vocab", "er2"):
        assert f"{task}  (v" in proc.stdout
    assert "higher is better" in proc.stdout and "lower is better" in proc.stdout
