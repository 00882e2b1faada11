"""A received folder is data, never a destination or a program.

A suite file inside a tree whose git configuration names commands (fsmonitor, hooks, textconv, an
external diff, a clean filter) runs none of them; a results folder whose MLflow store points artifact
locations at a server (a real HTTP server here, counting requests) or at another folder sends nothing
there: ``run`` and ``reproduce`` re-point the store at the folder's own ``mlartifacts`` (and say so), and
the tracker itself refuses a location outside the folder that no one named on the command line.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from harness import api
from harness.cli import main
from harness.execution.executor import execute_trial
from harness.execution.trials import Trial
from harness.core.record import to_json
from harness.tracking.environment import code_checkout, environment, git_diff, git_state
from harness.tracking.mlflow_tracker import MlflowTracker, TrackingError, results_id
from records import make_record
from toy_task import ToyTask

SUITES = Path(__file__).parent / "suites"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


def hostile_checkout(base: Path) -> tuple[Path, Path]:
    """A git tree holding the toy suite whose own configuration names a program at every place git
    could run one while reading it; each program leaves a file in ``ran/`` when it runs."""
    repo, ran = base / "received", base / "ran"
    repo.mkdir()
    ran.mkdir()
    shutil.copy(SUITES / "toy.yaml", repo / "toy.yaml")
    (repo / "notes.txt").write_text("first\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "received")
    program = repo / "planted.sh"
    program.write_text(f"#!/bin/sh\ntouch {ran}/\"$(basename \"$0\")-$$\"\ncat\n")
    program.chmod(0o755)
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "pre-commit", "post-checkout"):
        (hooks / hook).symlink_to(program)
    for key, value in (("core.fsmonitor", program), ("diff.planted.textconv", program),
                       ("diff.external", program), ("core.pager", program),
                       ("filter.planted.clean", program), ("filter.planted.smudge", program)):
        git(repo, "config", key, str(value))
    (repo / ".gitattributes").write_text("* diff=planted filter=planted\n")
    (repo / "notes.txt").write_text("first\nchanged\n")  # a dirty tree: status and diff must compare
    return repo, ran


@pytest.fixture(autouse=True)
def keep_signals():
    """The commands install SIGINT/SIGTERM handlers (a kill stops them like Ctrl-C); restore pytest's."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def test_a_suite_in_a_tree_whose_git_config_names_programs_runs_none_of_them(tmp_path):
    repo, ran = hostile_checkout(tmp_path)
    result = api.run(repo / "toy.yaml", api.RunOptions(profile="smoke", results=tmp_path / "results", mlflow=False,
                                                        threads=1))
    assert result.exit_code == 0
    assert list(ran.iterdir()) == []
    record = next((tmp_path / "results" / "toy" / "smoke" / "trials").glob("*.json")).read_text()
    assert git_state(code_checkout())[0] in record  # the harness checkout's commit, not the received tree's


def test_reading_a_hostile_checkout_runs_no_fsmonitor_hook_pager_or_textconv(tmp_path):
    """The hardened git reads a tree whose configuration names programs (all but a clean filter,
    which is why a suite's own tree is never read) without running one."""
    repo, ran = hostile_checkout(tmp_path)
    (repo / ".gitattributes").write_text("* diff=planted\n")
    git(repo, "config", "--unset", "filter.planted.clean")
    commit, dirty = git_state(repo)
    diff = git_diff(repo)
    assert len(commit) == 40 and dirty
    assert diff is not None and "+changed" in diff  # the real diff, not a textconv's or an external one
    assert list(ran.iterdir()) == []


def test_the_environment_names_the_harness_checkout():
    env = environment(torch.device("cpu"))
    assert env["git_commit"] == git_state(code_checkout())[0]
    assert (code_checkout() / "__init__.py").is_file()


class _Counting(BaseHTTPRequestHandler):
    requests: list[str] = []

    def _any(self) -> None:
        type(self).requests.append(f"{self.command} {self.path}")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_POST = do_HEAD = do_PATCH = do_DELETE = _any

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def collector():
    """A real HTTP server on 127.0.0.1 standing for the sender's: it records every request."""
    _Counting.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Counting.requests
    server.shutdown()
    server.server_close()


def point_store_at(results: Path, location: str) -> None:
    """What a sender can do to the folder they send: every location in its store names theirs."""
    connection = sqlite3.connect(results / "mlflow.db")
    with connection:
        connection.execute("UPDATE experiments SET artifact_location = ? || '/' || name", (location,))
        connection.execute("UPDATE runs SET artifact_uri = ? || '/' || run_uuid", (location,))
    connection.close()


def artifact_locations(results: Path) -> list[str]:
    connection = sqlite3.connect(results / "mlflow.db")
    try:
        rows = connection.execute("SELECT artifact_location FROM experiments UNION ALL "
                                  "SELECT artifact_uri FROM runs").fetchall()
    finally:
        connection.close()
    return [row[0] for row in rows]


@pytest.fixture(scope="module")
def toy_results(tmp_path_factory) -> Path:
    """The toy suite run once (smoke, 3 trials) into a folder with its own MLflow store."""
    root = tmp_path_factory.mktemp("received") / "results"
    assert api.run(SUITES / "toy.yaml", api.RunOptions(profile="smoke", results=root, threads=1)).exit_code == 0
    return root


@pytest.mark.integration  # a toy run with MLflow (in process)
@pytest.mark.parametrize("command, where", [("reproduce", "server"), ("run", "folder")])
def test_a_received_store_never_sends_artifacts_outside_the_folder(toy_results, tmp_path, collector, command, where):
    results = tmp_path / "results"
    shutil.copytree(toy_results, results)
    neighbour = tmp_path / "neighbour"
    neighbour.mkdir()
    url, requests = collector
    point_store_at(results, url if where == "server" else neighbour.as_uri())

    if command == "reproduce":
        result = CliRunner().invoke(main, ["reproduce", str(results / "toy" / "smoke"), "--task-path", "toy_task:ToyTask"])
    else:
        next((results / "toy" / "smoke" / "trials").glob("*.json")).unlink()  # one trial reruns and is logged
        result = CliRunner().invoke(main, ["run", str(SUITES / "toy.yaml"), "--profile", "smoke",
                                           "--results", str(results), "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert "named artifact locations outside this folder" in result.output
    assert requests == [] and list(neighbour.iterdir()) == []
    own = (results / "mlartifacts").resolve().as_uri() + "/"
    assert all(location.startswith(own) for location in artifact_locations(results))
    assert any((results / "mlartifacts").rglob("toy/*/artifacts/*.json"))  # the new runs' files, here


def test_the_tracker_refuses_a_foreign_location_before_writing(tmp_path, collector):
    """The last line of defence, whatever the store holds: a confined tracker checks the experiment."""
    url, requests = collector
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowTracker(uri).client.create_experiment("toy", artifact_location=f"{url}/toy")
    tracker = MlflowTracker(uri, artifact_root=tmp_path / "mlartifacts", confined=True)
    with pytest.raises(TrackingError, match="outside"):
        tracker.experiment_id("toy")
    with pytest.raises(TrackingError, match="outside"):
        tracker.check_destination("toy")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "mlartifacts").mkdir()
    (tmp_path / "mlartifacts" / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TrackingError, match="outside"):
        tracker.experiment_id("linked")  # a link inside mlartifacts leads out of it
    assert requests == []
    named = MlflowTracker(uri, artifact_root=tmp_path / "mlartifacts")  # --tracking-uri: the user's choice
    assert named.experiment_id("toy")


def test_a_task_calling_os_exit_or_chdir_fails_its_trial_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    class Exits(ToyTask):
        def run(self, params, ctx):
            os.chdir(elsewhere)
            os._exit(0)

    params = ToyTask.validate_params({"steps": 2}).model_dump(mode="json")
    trial = Trial(suite="toy", profile="smoke", task="toy_task:ToyTask", task_version="1", arm="sgd", arm_label="sgd",
                  seed=0, point={}, params=params)
    record = execute_trial(Exits, trial, torch.device("cpu"), tmp_path / "cache", tmp_path / "work", {})
    assert not record.finished and "os._exit(0)" in record.error
    assert Path.cwd() == tmp_path  # the task's chdir is undone
    assert os._exit.__name__ == "_exit"  # the real one is back


def test_a_copied_folder_or_an_edited_results_id_gets_an_id_of_its_own(tmp_path):
    original = tmp_path / "original" / "toy" / "smoke"
    original.mkdir(parents=True)
    first = results_id(original)
    assert results_id(original) == first and len(first) == 32  # stable for the folder itself
    copy = tmp_path / "copy" / "toy" / "smoke"
    shutil.copytree(original, copy)
    assert results_id(copy) != first  # same stored value, another real path
    other = tmp_path / "other"
    other.mkdir()
    (other / "mlflow").mkdir()
    stored = (original / "mlflow" / "results-id").read_text()
    (other / "mlflow" / "results-id").write_text(stored)  # an id edited to the original's
    assert results_id(other) != first
    link = tmp_path / "link"
    link.symlink_to(original)
    assert results_id(link) == first  # the same folder under another name is the same folder


def test_the_mirror_on_a_shared_store_logs_again_the_runs_another_folder_deleted(tmp_path):
    """Every marker of the folder still names its runs, but they were deleted in the shared store (by a
    copy of the folder that carried the same id, or by hand): a rerun logs them again."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'shared.db'}"
    results = tmp_path / "results"
    args = ["run", str(SUITES / "toy.yaml"), "--profile", "smoke", "--results", str(results), "--threads", "1",
            "--tracking-uri", uri]
    client = mlflow.MlflowClient(uri)

    def trial_runs() -> list:
        (experiment,) = [e for e in client.search_experiments() if e.name == "toy"]
        return client.search_runs([experiment.experiment_id], filter_string="tags.`harness.kind` = 'trial'")

    assert CliRunner().invoke(main, args).exit_code == 0
    logged = trial_runs()
    assert len(logged) == 3
    for run in logged:
        client.delete_run(run.info.run_id)
    assert trial_runs() == [] and len(list((results / "toy" / "smoke" / "mlflow").glob("*.json"))) == 3

    rerun = CliRunner().invoke(main, args)
    assert rerun.exit_code == 0, rerun.output
    again = trial_runs()
    assert sorted(r.data.tags["harness.trial_id"] for r in again) == sorted(
        r.data.tags["harness.trial_id"] for r in logged)
    assert all(r.info.status == "FINISHED" and "accuracy" in r.data.metrics for r in again)
    assert {r.data.tags["harness.results_id"] for r in again} == {results_id(results / "toy" / "smoke")}

    third = CliRunner().invoke(main, args)  # nothing missing now: nothing logged twice
    assert third.exit_code == 0 and len(trial_runs()) == 3


@pytest.mark.parametrize("kind", ["fifo", "device", "link", "huge"])
def test_a_trial_file_that_is_no_regular_file_is_set_aside_without_reading_it(tmp_path, kind, monkeypatch):
    from harness import store

    trials = tmp_path / "toy" / "smoke" / "trials"
    trials.mkdir(parents=True)
    path = trials / "0123abcd.json"
    if kind == "fifo":
        os.mkfifo(path)  # reading would wait for a writer forever
    elif kind == "device":
        path.symlink_to("/dev/zero")  # reading would never end
    elif kind == "link":  # to a well-formed record of this very trial: only the link makes it unusable
        (tmp_path / "elsewhere.json").write_text(json.dumps(to_json(make_record("0123abcd"))))
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        monkeypatch.setattr(store, "MAX_READ_BYTES", 1000)
        path.write_text('{"x": "' + "y" * 2000 + '"}')
    records, corrupt = store.RunFolder(tmp_path, "toy", "smoke").load_trials()
    assert records == {} and len(corrupt) == 1
    assert not path.exists() and not path.is_symlink()  # moved aside: its trial reruns
    assert (tmp_path / "elsewhere.json").exists() or kind != "link"


@pytest.mark.parametrize("lock", [".mlflow.db.lock", "toy/.writer.lock"])
def test_a_lock_file_linked_outside_the_folder_is_refused_in_one_line(tmp_path, lock):
    results = tmp_path / "results"
    (results / "toy").mkdir(parents=True)
    target = tmp_path / "outside"
    (results / lock).symlink_to(target)
    result = CliRunner().invoke(main, ["run", str(SUITES / "toy.yaml"), "--profile", "smoke", "--results",
                                       str(results), "--threads", "1"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "symbolic link" in line and not target.exists()


@pytest.mark.parametrize("sequential", [
    {"first": 2, "max_seeds": 2**40, "batch": 1},  # a 146 TiB simulation
    {"first": "two", "max_seeds": 6},
    {"max_seeds": 6},
    {"first": 2, "max_seeds": 6, "futility": "high"},
    {"first": 9, "max_seeds": 6},
])
def test_a_tampered_design_in_suite_json_is_one_line(tmp_path, sequential):
    from test_summary_forest import toy_run

    run_dir = toy_run(tmp_path)
    meta = json.loads((run_dir / "suite.json").read_text())
    (run_dir / "suite.json").write_text(json.dumps({**meta, "sequential": sequential}))
    result = CliRunner().invoke(main, ["report", str(run_dir)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "suite.json" in line and "sequential design" in line


def test_a_non_finite_curve_step_makes_the_trial_file_corrupt(tmp_path):
    from test_summary_forest import toy_run

    from harness.store import CorruptTrial, read_trial

    path = next((toy_run(tmp_path) / "trials").glob("*.json"))
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "curves": {"loss": [[0, 1.0], [float("nan"), 0.5]]}}))
    with pytest.raises(CorruptTrial, match="step, value"):
        read_trial(path)
