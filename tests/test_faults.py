"""Interrupts at named points, broken and moved stores, corrupt trial files, concurrent runs.

Each interrupt is a real SIGKILL of a real `harness run` (the HARNESS_FAULT hook, harness/core/faults.py)
followed by a normal run that must repair everything: nothing lost, nothing duplicated
(``fault_injection.check_results``). Runs whose process is not what the test is about (setting a
folder up, repairing it, refusing it) run in this process (``run_here``); kills and concurrent runs are
real subprocesses (``run``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from harness.core.locks import LockBusy, lock_writer

from fault_injection import (
    check_results, cli_env, hang_guard, harness, harness_here, mlflow_runs, slow_suite, start, trial_records,
)

pytestmark = pytest.mark.integration  # CLI subprocesses, real MLflow stores

SMOKE = ("--profile", "smoke")


def run(suite: Path, results: Path, *extra: str, **env: str):
    return harness("run", str(suite), *SMOKE, "--results", str(results), *extra, env=cli_env(**env))


def run_here(suite: Path, results: Path, *extra: str):
    return harness_here("run", str(suite), *SMOKE, "--results", str(results), *extra)


def one_line_error(proc, exit_code: int = 2) -> str:
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


# -- interrupts at named points ------------------------------------------------------------------
@pytest.mark.parametrize("point", [
    pytest.param("schema:1", marks=pytest.mark.slow),  # the first statement of the new store's schema
    "schema:800",                                      # halfway through MLflow's migrations
    "trial-run-created:2",                             # the 2nd trial's MLflow run exists, empty and RUNNING
    pytest.param("trial-run-logged:1", marks=pytest.mark.slow),  # metrics logged, never marked FINISHED
    pytest.param("trial-mirrored:3", marks=pytest.mark.slow),  # run complete, its marker not written
    "report:1",                                        # mid-upload of the report to the parent run
])
def test_sigkill_at_a_named_point_then_rerun_repairs_everything(point, tmp_path, toy_suite):
    results = tmp_path / "results"
    own_tmp = {}
    if point.startswith("schema"):  # a temp dir of its own: MLflow's migrations run (no schema template yet)
        (tmp_path / "tmp").mkdir(mode=0o700)
        own_tmp["TMPDIR"] = str(tmp_path / "tmp")
    killed = run(toy_suite, results, HARNESS_FAULT=point, **own_tmp)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    survivors = {p.name: p.read_bytes() for p in (results / "toy" / "smoke" / "trials").glob("*.json")}

    # a temp dir of its own is a process-wide setting (tempfile caches it), so that rerun is a process too
    rerun = run(toy_suite, results, **own_tmp) if own_tmp else run_here(toy_suite, results)
    assert rerun.returncode == 0, rerun.stderr
    assert "Traceback" not in rerun.stderr
    assert check_results(results) == []
    for name, data in survivors.items():  # stored results are never rewritten
        assert (results / "toy" / "smoke" / "trials" / name).read_bytes() == data
    if point.startswith(("trial-mirrored", "report")):
        _, parents = mlflow_runs(results)
        assert sorted(p.info.status for p in parents) == ["KILLED"]  # closed; nothing left to mirror

    if point == "trial-run-created:2":  # the repaired state is stable (once: every point repairs the same way)
        again = run_here(toy_suite, results)
        assert "0 ran, 3 already finished" in again.stdout
        assert check_results(results) == []


# -- broken, missing, old, newer, moved stores ---------------------------------------------------
def half_migrated(db: Path) -> None:
    connection = sqlite3.connect(db)
    connection.executescript("CREATE TABLE experiments (experiment_id INTEGER); "
                             "CREATE TABLE _alembic_tmp_experiments (x INTEGER);")
    connection.close()


def test_broken_or_missing_store_is_rebuilt_and_remirrored(tmp_path, toy_suite):
    results = tmp_path / "results"
    assert run_here(toy_suite, results).returncode == 0
    db = results / "mlflow.db"
    for damage in ("garbage", "half-migrated", "deleted"):
        db.unlink()
        if damage == "garbage":
            db.write_bytes(b"this is not a database\n" * 100)
        elif damage == "half-migrated":  # what an interrupt of the old in-place creation left
            half_migrated(db)
        rerun = run_here(toy_suite, results)
        assert rerun.returncode == 0, (damage, rerun.stderr)
        assert "0 ran, 3 already finished" in rerun.stdout
        assert check_results(results) == [], damage  # every trial mirrored again from the JSON store
        warnings = [line for line in rerun.stderr.splitlines() if line.startswith("warning: ")]
        if damage == "deleted":
            assert warnings == []
        else:
            assert len(warnings) == 1 and "unusable" in warnings[0] and "mirrored again" in warnings[0], warnings
    assert len(list(results.glob("mlflow.db.broken-*"))) == 2


def test_older_schema_is_upgraded_aside(tmp_path, toy_suite):
    from alembic import command
    from alembic.script import ScriptDirectory
    from mlflow.store.db import utils
    from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase
    from sqlalchemy import create_engine

    results = tmp_path / "results"
    results.mkdir()
    uri = f"sqlite:///{results / 'mlflow.db'}"
    revisions = [r.revision for r in ScriptDirectory.from_config(utils._get_alembic_config("")).walk_revisions()]
    engine = create_engine(uri)
    InitialBase.metadata.create_all(engine)
    config = utils._get_alembic_config(uri)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revisions[3])  # a few migrations behind the installed MLflow
    engine.dispose()

    proc = run_here(toy_suite, results)
    assert proc.returncode == 0, proc.stderr
    assert "upgraded the schema" in proc.stderr
    assert check_results(results) == []


def test_schema_newer_than_mlflow_is_a_one_line_error(tmp_path, toy_suite):
    results = tmp_path / "results"
    assert run_here(toy_suite, results, "--arms", "sgd").returncode == 0
    connection = sqlite3.connect(results / "mlflow.db")
    with connection:
        connection.execute("UPDATE alembic_version SET version_num = 'f00dfeedbeef'")
    connection.close()
    before = (results / "mlflow.db").read_bytes()
    line = one_line_error(run_here(toy_suite, results))
    assert "f00dfeedbeef" in line and "upgrade mlflow" in line
    assert (results / "mlflow.db").read_bytes() == before  # left as it was


def test_copied_results_folder_writes_its_own_artifacts(tmp_path, toy_suite):
    original = tmp_path / "original"
    assert run_here(toy_suite, original, "--arms", "sgd").returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    before = sorted(p.relative_to(original) for p in (original / "mlartifacts").rglob("*"))

    proc = run_here(toy_suite, copy)  # the two other arms' trials, logged into the copy
    assert proc.returncode == 0, proc.stderr
    assert "2 ran, 1 already finished" in proc.stdout
    assert sorted(p.relative_to(original) for p in (original / "mlartifacts").rglob("*")) == before
    runs, _ = mlflow_runs(copy)
    assert len(runs) == 3
    for r in runs:  # old runs and new point into the copy, whose mlartifacts holds their files
        assert r.info.artifact_uri.startswith((copy / "mlartifacts").resolve().as_uri() + "/")
    assert check_results(original, trials=1) == []


# -- corrupt trial files, stray temporary files --------------------------------------------------
def test_corrupt_trial_files_and_stray_temporary_files_are_cleaned_up(tmp_path, toy_suite):
    results = tmp_path / "results"
    assert run_here(toy_suite, results).returncode == 0
    run_dir = results / "toy" / "smoke"
    victims = dict(zip(sorted((run_dir / "trials").glob("*.json")), [b"[]", b"null", b"\xff\xfe\x00garbage"]))
    for path, content in victims.items():
        path.write_bytes(content)
    strays = [run_dir / "trials" / ".a.json.x1.tmp", run_dir / "mlflow" / ".b.json.x2.tmp",
              run_dir / ".suite.json.x3.tmp", results / "cache" / "toy" / ".c.pt.x4.tmp",
              results / ".mlflow.db.x5.tmp", results / ".mlflow.db.x5.tmp-journal"]
    for path in strays:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left by a crash")

    proc = run_here(toy_suite, results)
    assert proc.returncode == 0, proc.stderr
    assert "3 ran, 0 already finished" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "corrupt" in line]
    assert len(warnings) == 3
    for path, content in victims.items():  # each named once, kept aside as it was
        assert sum(path.name in line for line in warnings) == 1
        assert path.with_name(path.name + ".corrupt").read_bytes() == content
    assert check_results(results) == []  # includes: no temporary file left


@pytest.mark.integration
def test_hand_edited_records_never_break_the_mirror(tmp_path, toy_suite):
    """A NaN curve point (stored as null) mirrors without it; a record whose metrics are not numbers is
    corrupt (moved aside, its trial reruns) instead of counting as finished and crashing every rerun."""
    results = tmp_path / "results"
    assert run_here(toy_suite, results).returncode == 0
    nan_point, oops = sorted((results / "toy" / "smoke" / "trials").glob("*.json"))[:2]
    record = json.loads(nan_point.read_text())
    record["curves"]["train/loss"][1][1] = None
    nan_point.write_text(json.dumps(record))
    record = json.loads(oops.read_text())
    record["metrics"] = "oops"
    oops.write_text(json.dumps(record))
    (results / "mlflow.db").unlink()  # the store moved aside: every trial is mirrored again

    rerun = run_here(toy_suite, results)
    assert rerun.returncode == 0, rerun.stderr
    assert "1 ran, 2 already finished" in rerun.stdout
    expected = (f"warning: {oops} is corrupt (not a trial record (metrics: expected a mapping of numbers, got 'oops')): moved to "
                f"{oops.name}.corrupt; its trial reruns")
    assert [line for line in rerun.stderr.splitlines() if "corrupt" in line] == [expected]
    oops.with_name(oops.name + ".corrupt").unlink()
    assert check_results(results) == []


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KB tmpfs: room for a few trial files, not for the store or the report."""
    import subprocess

    folder = tmp_path / "small"
    folder.mkdir()
    if os.getuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                                          capture_output=True, check=False).returncode != 0:
        pytest.skip("a full disk is simulated with a small tmpfs, which needs root and mount")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.integration
@pytest.mark.parametrize("mirror", [(), ("--no-mlflow",)], ids=["mlflow", "no-mlflow"])
def test_a_full_disk_is_one_line_and_keeps_what_was_stored(full_disk, toy_suite, mirror):
    proc = run_here(toy_suite, full_disk / "results", *mirror)
    assert proc.returncode == 2, proc.stderr
    # progress, and the line that says how the run counts (exploratory here)
    lines = [line for line in proc.stderr.splitlines() if not line.startswith(("[toy] ", "device: ", "toy (smoke): "))]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "no space left" in lines[0].lower() or "disk is full" in lines[0], lines[0]
    trial_records(full_disk / "results")  # what was stored before the disk filled is intact


# -- --results that cannot hold results ----------------------------------------------------------
def test_unusable_results_folder_is_a_one_line_error(tmp_path, toy_suite):
    (tmp_path / "file").write_text("not a folder")
    for target in (tmp_path / "file", tmp_path / "file" / "results", Path("/proc/harness-results")):
        line = one_line_error(run_here(toy_suite, target))
        assert str(target) in line


def test_results_path_special_in_a_uri_is_refused_not_misread(tmp_path, toy_suite):
    for name in ("a?b", "a#b", "50%"):
        line = one_line_error(run_here(toy_suite, tmp_path / name))
        assert "SQLite URI" in line
    assert list(tmp_path.iterdir()) == []  # nothing written, beside or inside
    assert run_here(toy_suite, tmp_path / "a?b", "--no-mlflow").returncode == 0  # without the store it is fine


# -- concurrent runs -----------------------------------------------------------------------------
def test_writer_lock_refuses_a_second_writer_of_the_suite_only(tmp_path):
    first = lock_writer(tmp_path, "toy")
    with pytest.raises(LockBusy, match=re.escape(f"writing suite 'toy' into {tmp_path} (pid {os.getpid()} on ")):
        lock_writer(tmp_path, "toy")
    lock_writer(tmp_path, "other").release()  # another suite into the same folder is fine
    first.release()
    lock_writer(tmp_path, "toy").release()  # and the suite is free again once the first is gone


# -- concurrent runs (processes) ----------------------------------------------------------------
def wait_all(procs, timeout=300):
    return [(p.wait(timeout=hang_guard(timeout)), *p.communicate()) for p in procs]


@pytest.mark.parametrize("existing", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["new-folder", "existing-folder"])
def test_same_suite_twice_at_once_one_refuses(existing, tmp_path, toy_suite):
    suite = slow_suite(tmp_path, toy_suite, seconds_per_step=0.05)  # ~1 s per trial
    results = tmp_path / "results"
    if existing:
        assert run(suite, results, "--arms", "sgd,momentum").returncode == 0
    args = ("run", str(suite), *SMOKE, "--results", str(results))
    first = start(*args)
    if existing:  # the second starts once the first holds the lock
        lock = results / "toy" / ".writer.lock"
        deadline = time.time() + 60
        while time.time() < deadline and str(first.pid) not in (lock.read_text() if lock.exists() else ""):
            time.sleep(0.05)
    second = start(*args)
    outcomes = wait_all([first, second])
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 2], outcomes
    refused = next(err for code, _, err in outcomes if code == 2)
    assert refused.strip().count("\n") == 0 and "another harness run is writing suite 'toy'" in refused
    assert check_results(results, trials=3) == []


@pytest.mark.parametrize("existing", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["new-folder", "existing-folder"])
def test_different_suites_at_once_both_succeed(existing, tmp_path, toy_suite):
    suites = [slow_suite(tmp_path, toy_suite, name) for name in ("toy", "toy2")]
    results = tmp_path / "results"
    if existing:
        assert run(suites[0], results, "--arms", "sgd,momentum").returncode == 0
    procs = [start("run", str(s), *SMOKE, "--results", str(results)) for s in suites]
    outcomes = wait_all(procs)
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert check_results(results, "toy", trials=3) == []
    assert check_results(results, "toy2") == []
    assert len(trial_records(results, "toy2")) == 3
    for name in ("toy", "toy2"):
        _, parents = mlflow_runs(results, name)
        assert all(p.info.status == "FINISHED" for p in parents)


@pytest.mark.integration
def test_folders_sharing_a_tracking_store_never_touch_each_others_runs(tmp_path, toy_suite):
    """Two users, two results folders, one --tracking-uri: the same trial ids, yet each folder finds,
    replaces and deletes only the runs it logged, and its markers keep naming its own runs."""
    import mlflow

    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    client = mlflow.MlflowClient(shared)

    def trial_runs() -> dict[str, set[str]]:
        experiment = client.get_experiment_by_name("toy").experiment_id
        runs = client.search_runs([experiment], "tags.`harness.kind` = 'trial'", max_results=1000)
        found: dict[str, set[str]] = {}
        for r in runs:
            found.setdefault(r.data.tags.get("harness.results_id", ""), set()).add(r.info.run_id)
        return found

    def markers(results: Path) -> set[str]:
        return {json.loads(p.read_text())["run_id"] for p in (results / "toy" / "smoke" / "mlflow").glob("*.json")}

    assert run_here(toy_suite, mine, "--tracking-uri", shared, "--arms", "sgd,momentum").returncode == 0
    (my_id,) = trial_runs()
    my_runs = trial_runs()[my_id]
    assert run_here(toy_suite, theirs, "--tracking-uri", shared).returncode == 0
    assert trial_runs()[my_id] == my_runs and len(trial_runs()) == 2  # their run deleted none of mine
    their_runs = next(runs for folder, runs in trial_runs().items() if folder != my_id)

    again = run_here(toy_suite, mine, "--tracking-uri", shared)  # a new trial (slow_lr): every trial checked
    assert again.returncode == 0, again.stderr
    assert my_runs < trial_runs()[my_id] and markers(mine) == trial_runs()[my_id]
    assert markers(theirs) == their_runs == next(runs for f, runs in trial_runs().items() if f != my_id)


def test_marker_of_a_trial_is_not_trusted_over_mlflow(tmp_path, toy_suite):
    """A marker naming this store, but whose run is gone from MLflow, is repaired when MLflow is touched."""
    results = tmp_path / "results"
    assert run_here(toy_suite, results, "--arms", "sgd,momentum").returncode == 0
    runs, _ = mlflow_runs(results)
    import mlflow

    mlflow.MlflowClient(f"sqlite:///{(results / 'mlflow.db').resolve()}").set_terminated(runs[0].info.run_id, "RUNNING")
    proc = run_here(toy_suite, results)  # a new trial (slow_lr): MLflow is touched, every trial checked
    assert proc.returncode == 0, proc.stderr
    assert check_results(results, trials=3) == []
    marker = json.loads((results / "toy" / "smoke" / "mlflow" / f"{runs[0].data.tags['harness.trial_id']}.json").read_text())
    assert marker["run_id"] != runs[0].info.run_id
