"""A received folder's links, a planted store, a neighbour's temp folder, a tampered pilot and a folder made
read-only mid-run: each is one line, and nothing is written where a link or a stranger's store points."""
from __future__ import annotations

import errno
import json
import os
import sqlite3
import tempfile

import pytest

from fault_injection import harness_here
from harness.store import RunFolder
from harness.tracking.mlflow_tracker import TrackingError
from harness.tracking.sqlite_store import DB_FILE, foreign_store_note, open_store, prepare_named_store


def test_a_store_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path):
    target = tmp_path / "elsewhere" / "team.db"
    target.parent.mkdir()
    sqlite3.connect(target).close()
    before = target.read_bytes()
    results = tmp_path / "received"
    results.mkdir()
    (results / DB_FILE).symlink_to(target)
    with pytest.raises(TrackingError, match="is a symbolic link"):
        open_store(results)
    assert target.read_bytes() == before and (results / DB_FILE).is_symlink()


def test_a_journal_that_is_a_link_is_refused(tmp_path):
    (tmp_path / f"{DB_FILE}-journal").symlink_to(tmp_path / "nowhere")
    with pytest.raises(TrackingError, match="journal is a symbolic link"):
        open_store(tmp_path)


def test_an_artifact_folder_that_is_a_link_is_refused_before_anything_is_logged(tmp_path, toy_suite, monkeypatch,
                                                                                 request):
    # the cold path: no cached schema yet (the store is built by MLflow itself), and MLflow imported before
    # harness could set its level, as in a test worker or a notebook; the refusal must still be one line
    import logging

    import mlflow  # noqa: F401

    (tmp_path / "temp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    monkeypatch.delenv("MLFLOW_LOGGING_LEVEL", raising=False)
    logger = logging.getLogger("mlflow")
    request.addfinalizer(lambda level=logger.level: logger.setLevel(level))
    logger.setLevel(logging.INFO)
    outside = tmp_path / "outside"
    outside.mkdir()
    results = tmp_path / "received"
    (results / "mlartifacts").mkdir(parents=True)
    (results / "mlartifacts" / "toy").symlink_to(outside, target_is_directory=True)
    run = harness_here("run", str(toy_suite), "--profile", "smoke", "--results", str(results), "--threads", "1")
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("error: ") and "mlartifacts/toy is a symbolic link" in line
    assert not list(outside.iterdir()) and not (results / "toy" / "smoke" / "trials").exists()


def test_a_store_another_user_could_have_planted_is_named_in_a_warning(tmp_path):
    store = tmp_path / "team.db"
    sqlite3.connect(store).close()
    os.chmod(store, 0o644)
    assert foreign_store_note(f"sqlite:///{store}") is None  # ours, writable by us alone
    os.chmod(store, 0o666)
    note = foreign_store_note(f"sqlite:///{store}")
    assert note and str(store) in note and "writable by anyone" in note and "git.diff" in note
    if os.geteuid() == 0:  # root can hand the file to a stranger, as a neighbour's own file would be
        os.chmod(store, 0o644)
        os.chown(store, 4242, 4242)
        assert "uid 4242" in foreign_store_note(f"sqlite:///{store}")
    assert foreign_store_note("http://127.0.0.1:5000") is None and foreign_store_note(f"sqlite:///{tmp_path}/none.db") is None


def test_a_run_into_a_planted_store_warns_before_it_logs(tmp_path, toy_suite, monkeypatch):
    store = tmp_path / "team.db"
    store.touch()
    os.chmod(store, 0o666)
    run = harness_here("run", str(toy_suite), "--profile", "smoke", "--results", str(tmp_path / "r"), "--threads", "1",
                       "--tracking-uri", f"sqlite:///{store}")
    assert run.returncode == 0, run.stderr
    assert f"warning: the MLflow store {store} is not yours" in run.stderr


def test_ray_refuses_a_session_folder_others_can_write(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from harness.execution.ray_executor import RAY_FOLDER, RayExecutor, RayUnavailable

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / f"{RAY_FOLDER}-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    with pytest.raises(RayUnavailable, match=RAY_FOLDER):
        RayExecutor(workers=1).start()
    assert list(planted.iterdir()) == []


@pytest.mark.parametrize("tamper", [
    lambda meta: meta["claims"][0].update(margin=None),
    lambda meta: meta.update(sequential={"a": 5}),
])
def test_plan_from_a_tampered_pilot_is_one_line(tmp_path, toy_suite, tamper):
    from test_summary_forest import toy_run

    run_dir = toy_run(tmp_path / "pilot")
    meta = json.loads((run_dir / "suite.json").read_text())
    tamper(meta)
    (run_dir / "suite.json").write_text(json.dumps(meta))
    planned = harness_here("plan", str(toy_suite), "--from", str(tmp_path / "pilot"))
    assert planned.returncode == 2, planned.stderr
    (line,) = planned.stderr.strip().splitlines()
    assert line.startswith("error: ") and "suite.json" in line


def test_a_trials_folder_made_read_only_mid_run_is_one_line_keeping_what_was_stored(tmp_path, toy_suite, monkeypatch):
    save = RunFolder.save_trial
    saved = []

    def read_only_after_one(folder, record):
        if saved:
            raise PermissionError(errno.EACCES, "Permission denied", str(folder.trial_path(record.trial_id)))
        saved.append(save(folder, record))
        return saved[-1]

    monkeypatch.setattr(RunFolder, "save_trial", read_only_after_one)
    run = harness_here("run", str(toy_suite), "--profile", "smoke", "--results", str(tmp_path), "--no-mlflow",
                       "--threads", "1")
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in run.stderr, run.stderr
    line = errors[0]
    assert line.startswith("error: cannot write ") and "Permission denied" in line and "make it writable" in line
    assert [p.name for p in (tmp_path / "toy" / "smoke" / "trials").glob("*.json")] == [saved[0].name]


def test_a_new_shared_store_is_made_under_an_flock_on_its_file(tmp_path, monkeypatch):
    """Two runs starting on one new --tracking-uri file would both run MLflow's migrations ("duplicate column
    name"): its first use holds an exclusive flock on the file, so the second waits for the first."""
    import fcntl

    import mlflow

    store = tmp_path / "team.db"
    held = []

    class Client:
        def __init__(self, uri):
            assert uri == f"sqlite:///{store}"

        def search_experiments(self, max_results):
            with open(store, "rb") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(True)
                else:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    monkeypatch.setattr(mlflow, "MlflowClient", Client)
    prepare_named_store(f"sqlite:///{store}")
    assert held == [True]
    with open(store, "rb") as handle:  # released once the schema is made
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
