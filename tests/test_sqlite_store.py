"""The embedded MLflow store made from this user's schema template: the same store MLflow's migrations
make, each with its own identity and artifact location, and never from a template that is not ours."""
from __future__ import annotations

import importlib.metadata
import os
import sqlite3
import tempfile
from pathlib import Path

import pytest

from harness.tracking import sqlite_store


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """A temp dir of this test's own, so the template is built here and nowhere else."""
    root = tmp_path / "tmp"
    root.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root / f"harness-mlflow-schema-{os.getuid()}" / f"mlflow-{importlib.metadata.version('mlflow')}.db"


def made(results: Path) -> Path:
    store = sqlite_store.open_store(results)
    store.lock.release()
    return results / sqlite_store.DB_FILE


def dump(db: Path) -> list[str]:
    """Every statement that recreates db, with the Default experiment's times and location blanked. Sorted,
    and each table's columns and constraints sorted: MLflow's migrations create indexes, and rebuild
    tables with their constraints, in an order that varies from one run of them to the next."""
    connection = sqlite3.connect(db)
    try:
        connection.execute("UPDATE experiments SET creation_time = 0, last_update_time = 0, artifact_location = '' "
                           "WHERE experiment_id = 0")
        return sorted(_unordered(statement) for statement in connection.iterdump())
    finally:
        connection.close()


def _unordered(statement: str) -> str:
    """A CREATE TABLE statement with the items of its definition sorted; any other statement as it is."""
    if not statement.startswith("CREATE TABLE"):
        return statement
    head, body = statement[:statement.index("(")], statement[statement.index("(") + 1:statement.rindex(")")]
    items, depth, start = [], 0, 0
    for at, char in enumerate(body):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(body[start:at].strip())
            start = at + 1
    items.append(body[start:].strip())
    return f"{head}({', '.join(sorted(items))})"


def test_a_store_from_the_template_is_the_store_the_migrations_make(private_tmp, tmp_path, monkeypatch):
    first = made(tmp_path / "a")
    assert private_tmp.is_file() and private_tmp.stat().st_mode & 0o077 == 0
    quiet = sqlite_store.quiet_mlflow

    def schema_code_used() -> None:
        raise AssertionError("a second new store ran MLflow's schema code")

    monkeypatch.setattr(sqlite_store, "quiet_mlflow", schema_code_used)  # called before any of it runs
    second = made(tmp_path / "b")  # the template copied, checked against the cached schema facts
    monkeypatch.setattr(sqlite_store, "quiet_mlflow", quiet)
    monkeypatch.setattr(sqlite_store, "_schema_template", lambda: None)
    migrated = made(tmp_path / "c")
    assert dump(second) == dump(migrated) == dump(first)
    assert sqlite_store._identity(first) != sqlite_store._identity(second)  # a replaced store is noticed
    location = sqlite3.connect(second).execute(
        "SELECT artifact_location FROM experiments WHERE experiment_id = 0").fetchone()[0]
    assert location == (tmp_path / "b" / "mlartifacts").resolve().as_uri() + "/0"


@pytest.mark.parametrize("tamper", ["bytes", "mode"])
def test_a_template_altered_or_writable_by_others_is_rebuilt_not_copied(tamper, private_tmp, tmp_path):
    made(tmp_path / "a")
    if tamper == "bytes":  # e.g. a trigger planted in it: the recorded hash no longer matches
        connection = sqlite3.connect(private_tmp)
        connection.execute("CREATE TABLE planted (x INTEGER)")
        connection.commit()
        connection.close()
    else:
        private_tmp.chmod(0o666)
    db = made(tmp_path / "b")
    tables = {row[0] for row in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "planted" not in tables and "experiments" in tables
    assert private_tmp.stat().st_mode & 0o077 == 0


def test_a_template_folder_others_can_write_is_not_used(private_tmp, tmp_path):
    private_tmp.parent.mkdir(mode=0o700)
    private_tmp.parent.chmod(0o777)
    db = made(tmp_path / "a")  # the store is made by the migrations instead
    assert db.is_file() and not private_tmp.exists()


def test_a_store_made_anew_in_a_running_process_is_the_one_mlflow_writes_to(tmp_path):
    """MLflow keeps its engine per URI for the whole process: when a run in this process replaces a
    deleted or broken store, the next client must write to the new file, not to the old one's inode."""
    import mlflow

    results = tmp_path / "results"
    db = made(results)
    uri = sqlite_store.store_uri(results)
    mlflow.MlflowClient(uri).create_experiment("before")  # MLflow now holds a pooled connection to db
    db.unlink()
    assert made(results) == db  # made anew: the template's store, a new file
    mlflow.MlflowClient(uri).create_experiment("after")  # on the old pool: "attempt to write a readonly database"
    names = {e.name for e in mlflow.MlflowClient(uri).search_experiments()}
    assert "after" in names and "before" not in names
