"""The embedded MLflow store, RESULTS/mlflow.db: made aside, checked on every run, never half-made.

MLflow creates its SQLite schema in some sixty migrations; an interrupt among them used to leave a
half-migrated file that every later run tripped over. Here the schema is built (or upgraded) in a
temporary file next to the store and moved into place with one rename, under an exclusive lock on
``.mlflow.db.lock``: the store is either absent, or complete. Every ``harness run`` holds that lock
shared while it uses the store, checks the file (SQLite header, schema revision, tables) and:

- creates it when it is missing;
- moves a broken one aside (``mlflow.db.broken-<time>``) and builds a new one: the JSON trial files
  are the source of truth, and every trial is mirrored again, each suite on its next run;
- upgrades an older schema (made by an older MLflow) on a copy, then swaps the copy in;
- refuses, in one line, a schema newer than the installed MLflow knows;
- points every artifact location at this folder's ``mlartifacts`` (a copied or moved folder, or a
  received store naming a server or another folder), so nothing is written outside the folder.
"""
from __future__ import annotations

import importlib.metadata
import os
import random
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.core.files import linked_entry, open_trusted, private_folder, unused_path
from harness.core.locks import FileLock
from harness.store import _UMASK, read_json, write_checksum, write_json_atomic
from harness.tracking.mlflow_tracker import MlflowTracker, TrackingError, quiet_mlflow, redacted

DB_FILE = "mlflow.db"
LOCK_FILE = ".mlflow.db.lock"
SCHEMA_CACHE = ".mlflow-schema.json"  # the installed MLflow's head revision and tables (import-free check)
ARTIFACTS_DIR = "mlartifacts"
SCHEMA_FOLDER = "harness-mlflow-schema"  # this user's schema template and facts, per MLflow version (temp dir)
URI_SPECIAL = "?#%"  # SQLAlchemy reads these in a sqlite:/// URI as query, fragment or escape
_HEADER = b"SQLite format 3\x00"


def unsafe_path(results_root: Path) -> str | None:
    """Why results_root cannot hold the embedded store (a character the SQLite URI misreads), or None."""
    text = str(Path(results_root).resolve())
    bad = sorted({c for c in text if c in URI_SPECIAL or c in "\n\r\0"})
    if bad:
        return (f"--results {results_root} contains {' '.join(repr(c) for c in bad)}, which the SQLite URI of "
                "the MLflow store would misread; choose a folder without it, or pass --no-mlflow or --tracking-uri")
    return None


def store_uri(results_root: Path) -> str:
    return f"sqlite:///{(Path(results_root) / DB_FILE).resolve()}"


def artifact_location(results_root: Path, experiment: str) -> str:
    """Where an experiment of this results folder keeps its artifacts (a file:// URI)."""
    return (Path(results_root) / ARTIFACTS_DIR / experiment).resolve().as_uri()


def foreign_store_note(uri: str) -> str | None:
    """A warning for a ``--tracking-uri`` SQLite file another user owns or anyone can write (a team's store,
    or one a neighbour planted at the path a team agreed on), or None. Every run, param and artifact logged
    there, ``git.diff`` included, is readable by its owner and goes where its experiments say."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri[len("sqlite:///"):].split("?", 1)[0])
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_uid == os.getuid() and not info.st_mode & 0o002:
        return None
    owner = f"uid {info.st_uid}" + (" and writable by anyone" if info.st_mode & 0o002 else "")
    return (f"the MLflow store {path} is not yours ({owner}): what this run logs there, git.diff included, is "
            "theirs to read, and its artifacts go where its experiments say; --tracking-uri only a store you trust")


def prepare_named_store(uri: str) -> None:
    """Make (or upgrade) a ``--tracking-uri`` SQLite store one process at a time. MLflow builds a new store's
    schema on first use; two runs starting on one new file at once both migrate it and the loser fails
    ("duplicate column name", or alembic's "expected to match one row"). An flock on the file itself (SQLite
    locks with fcntl, which flock leaves alone) serializes that first use; a file we cannot open for writing
    is used as it is."""
    name = uri[len("sqlite:///"):].split("?", 1)[0] if uri.startswith("sqlite:///") else ""
    if name in ("", ":memory:"):  # a server, or no file to lock
        return
    lock = FileLock(Path(name).resolve())
    try:
        lock.acquire(exclusive=True)
    except OSError:
        return
    try:
        quiet_mlflow()
        import mlflow

        mlflow.MlflowClient(uri).search_experiments(max_results=1)  # builds or upgrades the schema
    except Exception as exc:  # noqa: BLE001 - MLflow and SQLAlchemy raise many kinds; one line for the user
        raise TrackingError(f"{redacted(uri)}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    finally:
        lock.release()


@dataclass
class Store:
    """The checked store: its URI, an identity that changes when the file is replaced, and the
    shared lock held until this process ends."""

    uri: str
    identity: str
    lock: FileLock
    notes: list[str] = field(default_factory=list)


def confined_tracker(results_root: Path, say: Callable[[str], None] = lambda _line: None) -> tuple[MlflowTracker, Store]:
    """The MLflow mirror of a results folder: its checked ``mlflow.db`` (``open_store``, whose shared
    lock the caller releases) with the folder's own artifacts, never the locations a copied or received
    store names."""
    store = open_store(results_root, say)
    tracker = MlflowTracker(store.uri, artifact_root=Path(results_root) / ARTIFACTS_DIR, identity=store.identity,
                            confined=True)
    return tracker, store


@dataclass
class _State:
    kind: str  # ok | missing | broken | old | unknown
    detail: str = ""
    revision: str | None = None


def open_store(results_root: Path, say: Callable[[str], None] = lambda _line: None) -> Store:
    """Check (and create, repair, upgrade or relocate) RESULTS/mlflow.db; raise TrackingError in one line."""
    root = Path(results_root).resolve()
    db = root / DB_FILE
    _refuse_links(db)
    lock = FileLock(root / LOCK_FILE)
    notes: list[str] = []
    waiting_since, told = time.monotonic(), False
    try:
        while True:
            lock.acquire(exclusive=False)  # waits while another process creates or repairs the store
            state = _inspect(root, db)
            if state.kind == "ok":
                break
            if state.kind == "unknown":
                _fix(root, db, state)  # raises: a newer MLflow's store is not ours to change
            # Converting to exclusive drops the shared lock first; it succeeds only while no other
            # process uses the store (a store in use is never replaced under it).
            if lock.acquire(exclusive=True, blocking=False):
                state = _inspect(root, db)
                if state.kind != "ok":
                    notes.extend(_fix(root, db, state))
                    state = _inspect(root, db)
                    if state.kind != "ok":
                        raise TrackingError(f"{db}: still unusable after repair ({state.detail})")
                lock.acquire(exclusive=False)  # back to shared: other suites may use the store now
                break
            if not told and time.monotonic() - waiting_since > 2:
                doing = {"missing": "creating", "old": "upgrading"}.get(state.kind, "repairing")
                say(f"waiting for the other runs using {db} to finish before {doing} it")
                told = True
            time.sleep(random.uniform(0.05, 0.3))  # jitter: two processes racing to create it take turns
        _clean_aside(root)
        notes.extend(_relocate(root, db))
        identity = _identity(db)
    except OSError as exc:  # a lock file that is a link, a read-only or full folder
        lock.release()
        raise TrackingError(f"{exc.filename or root}: {exc.strerror or exc}") from None
    except BaseException:
        lock.release()
        raise
    return Store(uri=store_uri(root), identity=identity, lock=lock, notes=notes)


# -- checking ------------------------------------------------------------------------------------
def _refuse_links(db: Path) -> None:
    """A received folder's ``mlflow.db`` (or its journal) that is a symbolic link would have this run write
    its runs into whatever store it points at, and re-point that store's artifact locations: refused."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        if path.is_symlink():
            raise TrackingError(f"{path} is a symbolic link: a results folder keeps its MLflow store in a file of "
                                "its own, never written through a link; remove the link and rerun")


def _inspect(root: Path, db: Path) -> _State:
    if not db.exists():
        return _State("missing")
    try:
        with open(db, "rb") as handle:
            header = handle.read(len(_HEADER))
    except OSError as exc:
        raise TrackingError(f"cannot read {db}: {exc.strerror or exc}") from None
    if header != _HEADER:
        return _State("broken", "empty file" if not header else "not an SQLite database")
    try:
        connection = sqlite3.connect(str(db), timeout=60)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            half = sorted(t for t in tables if t.startswith("_alembic_tmp"))
            if half:
                return _State("broken", f"half-migrated schema ({half[0]})")
            if "alembic_version" not in tables:
                return _State("broken", "no schema version (schema creation was interrupted)")
            revisions = [row[0] for row in connection.execute("SELECT version_num FROM alembic_version")]
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        return _State("broken", str(exc))
    if len(revisions) != 1:
        return _State("broken", f"{len(revisions)} schema versions")
    revision = revisions[0]
    facts = _schema_facts(root)
    if revision == facts["head"]:
        missing = sorted(set(facts["tables"]) - tables)
        if missing:
            return _State("broken", f"tables missing: {', '.join(missing[:3])}", revision)
        return _State("ok", revision=revision)
    if revision in _schema_facts(root, full=True)["known"]:
        return _State("old", revision=revision)
    return _State("unknown", revision=revision)


def _schema_facts(root: Path, full: bool = False) -> dict:
    """The installed MLflow's schema head and tables, cached per MLflow version (in the results folder and
    in this user's private folder) so that a run whose store is fine does not import MLflow's schema code
    at all; ``full`` adds every known revision."""
    version = importlib.metadata.version("mlflow")
    caches = [root / SCHEMA_CACHE]
    try:
        caches.append(private_folder(SCHEMA_FOLDER) / f"mlflow-{version}.json")
    except OSError:
        pass
    if not full:
        for cache in caches:
            try:
                facts = read_json(cache)
            except (OSError, ValueError):
                continue
            if isinstance(facts, dict) and facts.get("mlflow") == version and facts.get("head") and facts.get("tables"):
                if cache != caches[0]:
                    _save_facts(caches[:1], facts)
                return facts
    quiet_mlflow()
    from alembic.script import ScriptDirectory
    from mlflow.store.db import utils
    from mlflow.store.db.base_sql_model import Base

    script = ScriptDirectory.from_config(utils._get_alembic_config(""))
    facts = {"mlflow": version, "head": utils._get_latest_schema_revision(), "tables": sorted(Base.metadata.tables)}
    _save_facts(caches, facts)
    if full:
        facts["known"] = [r.revision for r in script.walk_revisions()]
    return facts


def _save_facts(caches: list[Path], facts: dict) -> None:
    for cache in caches:
        try:
            write_json_atomic(cache, facts)
        except OSError:
            pass  # only a cache


def _identity(db: Path) -> str:
    """Changes when the store is replaced (deleted and remade, rebuilt, swapped for another)."""
    try:
        connection = sqlite3.connect(str(db), timeout=60)
        try:
            row = connection.execute("SELECT creation_time FROM experiments WHERE experiment_id = 0").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError:
        row = None
    return f"{DB_FILE}@{row[0]}" if row else f"{DB_FILE}#{db.stat().st_ino}"


# -- fixing (under the exclusive lock) -----------------------------------------------------------
def _fix(root: Path, db: Path, state: _State) -> list[str]:
    if state.kind == "missing":
        _build_aside(root, db, source=None)
        return []
    if state.kind == "broken":
        aside = unused_path(db.parent, f"{DB_FILE}.broken")
        for suffix in ("", "-journal", "-wal", "-shm"):
            if Path(f"{db}{suffix}").exists():
                os.replace(f"{db}{suffix}", f"{aside}{suffix}")
        _build_aside(root, db, source=None)
        return [f"{db} was unusable ({state.detail}): moved to {aside.name} and made anew; "
                "finished trials are mirrored again from the JSON store (each suite on its next run)"]
    if state.kind == "old":
        try:
            _build_aside(root, db, source=db)
        except TrackingError as exc:
            raise TrackingError(
                f"cannot upgrade {db} from MLflow schema {state.revision} ({exc}); move it aside "
                f"(mv {db} {db}.old) and rerun: a new store is mirrored from the JSON trial files"
            ) from None
        return [f"upgraded the schema of {db} from {state.revision} for MLflow {importlib.metadata.version('mlflow')}"]
    raise TrackingError(
        f"{db} has MLflow schema {state.revision}, unknown to the installed MLflow "
        f"{importlib.metadata.version('mlflow')} (made by a newer one?): upgrade mlflow, or give another --results"
    )


def _build_aside(root: Path, db: Path, source: Path | None) -> None:
    """A complete store in a temporary file next to db (new, or an upgraded copy of source), then
    one rename: an interrupt at any point leaves db as it was and a stray temporary file."""
    fd, name = tempfile.mkstemp(dir=root, prefix=f".{DB_FILE}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; the store is meant to be shared like the results
        artifacts = (root / ARTIFACTS_DIR).resolve().as_uri()
        if source is not None:
            _copy_sqlite(source, tmp)
            _make_schema(f"sqlite:///{tmp}", artifacts, upgrade=True)
        elif (template := _schema_template()) is not None:
            _new_from_template(template, tmp, artifacts)
        else:
            _make_schema(f"sqlite:///{tmp}", artifacts, upgrade=False)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, db)
        _fsync_dir(root)
        _reconnect(store_uri(root))
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _schema_template() -> bytes | None:
    """An empty store made by the installed MLflow, built once per MLflow version in this user's private
    temp folder; None where no such folder can be trusted (then each new store runs the migrations).

    Running MLflow's migrations costs seconds per new results folder; copying their result costs nothing.
    The template is used only when it is ours, writable only by us and hashes to what its build recorded
    (``files.open_trusted``): a store copied from a planted file would mirror into whatever it says.
    """
    try:
        folder = private_folder(SCHEMA_FOLDER)
    except OSError:
        return None
    name = f"mlflow-{importlib.metadata.version('mlflow')}.db"
    template, digest = folder / name, folder / f"{name}.sha256"
    try:
        trusted = open_trusted(template, digest)
        if trusted is None:
            lock = FileLock(folder / f"{name}.lock")
            lock.acquire(exclusive=True)  # one builder; the others wait, then read what it built
            try:
                trusted = open_trusted(template, digest)
                if trusted is None:
                    for stale in folder.glob(f"{name}.*.tmp"):  # left by a build that was killed
                        stale.unlink(missing_ok=True)
                    partial = folder / f"{name}.{os.getpid()}.tmp"
                    _make_schema(f"sqlite:///{partial}", (folder / ARTIFACTS_DIR).as_uri(), upgrade=False)
                    os.chmod(partial, 0o600)
                    write_checksum(partial, digest)
                    os.replace(partial, template)
                    trusted = open_trusted(template, digest)
            finally:
                lock.release()
    except OSError:
        return None
    if trusted is None:
        return None
    os.close(trusted[0])
    return trusted[1]


def _new_from_template(template: bytes, target: Path, artifact_root: str) -> None:
    """A new store in ``target`` from the template's bytes: its Default experiment gets this folder's
    artifact location and a creation time of now (the store's identity, ``_identity``)."""
    with open(target, "wb") as handle:
        handle.write(template)
    now = int(time.time() * 1000)
    connection = sqlite3.connect(str(target))
    try:
        with connection:
            connection.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                               "WHERE experiment_id = 0", (f"{artifact_root}/0", now, now))
    finally:
        connection.close()


def _reconnect(uri: str) -> None:
    """MLflow keeps one engine per database URI for the life of the process (and caches the stores
    holding it); once the file at that URI is replaced, its pooled connections still write to the old
    one ("attempt to write a readonly database"). Disposing the pool makes its next connection open the
    new file, so a second run in one process (the Python API) logs where the first left a new store."""
    sqlalchemy_store = sys.modules.get("mlflow.store.tracking.sqlalchemy_store")
    engine = sqlalchemy_store and sqlalchemy_store.SqlAlchemyStore._engine_map.get(uri)
    if engine is not None:
        engine.dispose()


def _make_schema(uri: str, artifact_root: str, upgrade: bool) -> None:
    quiet_mlflow()
    from mlflow.store.db import utils
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import Engine

    from harness.core import faults

    def kill_point(*_args) -> None:
        faults.fault("schema")

    if faults.armed("schema"):
        event.listen(Engine, "before_cursor_execute", kill_point)
    try:
        if upgrade:
            engine = create_engine(uri)
            try:
                utils._upgrade_db(engine)
            finally:
                engine.dispose()
        store = SqlAlchemyStore(uri, artifact_root)  # creates the tables and the Default experiment
        store.engine.dispose()
        SqlAlchemyStore._engine_map.pop(uri, None)
    except Exception as exc:  # noqa: BLE001 - MLflow and SQLAlchemy raise many kinds; one line for the user
        raise TrackingError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    finally:
        if faults.armed("schema"):
            event.remove(Engine, "before_cursor_execute", kill_point)


def _copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy even while other processes read or write source."""
    src = sqlite3.connect(str(source), timeout=60)
    dst = sqlite3.connect(str(target))
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clean_aside(root: Path) -> None:
    """Temporary stores left by an interrupted creation (they are made only under the exclusive
    lock, so none is in progress while this process holds the lock shared)."""
    for path in root.glob(f".{DB_FILE}.*.tmp*"):
        path.unlink(missing_ok=True)
    for path in root.glob(f".{SCHEMA_CACHE}.*.tmp"):
        if time.time() - path.stat().st_mtime > 60:
            path.unlink(missing_ok=True)


# -- a copied, moved or received results folder ---------------------------------------------------
def _relocate(root: Path, db: Path) -> list[str]:
    """Point every experiment (and its runs) at this folder's own ``mlartifacts``.

    MLflow stores absolute artifact locations: a results folder copied elsewhere would otherwise keep
    writing into the original, and a received folder's store may name a server or another user's
    folder (it would receive our artifacts and git diff). A location outside this folder is only
    used when named on the command line (``--tracking-uri``), never because a store says so.
    """
    artifacts = root / ARTIFACTS_DIR
    if artifacts.is_symlink() or (artifacts.exists() and not artifacts.is_dir()):
        raise TrackingError(f"{artifacts} is a link or not a folder: a results folder keeps its MLflow artifacts "
                            "in a folder of its own; remove it and rerun")
    linked = linked_entry(artifacts)
    if linked is not None:
        raise TrackingError(f"{linked} is a symbolic link: artifacts are never written through a link (it could "
                            "point at any folder); remove it and rerun")
    new_prefix = artifacts.resolve().as_uri()
    moved: set[str] = set()
    connection = sqlite3.connect(str(db), timeout=60)
    try:
        rows = connection.execute("SELECT experiment_id, name, artifact_location FROM experiments").fetchall()
        with connection:
            for experiment_id, name, location in rows:
                expected = f"{new_prefix}/0" if str(experiment_id) == "0" else artifact_location(root, name)
                if location == expected or not expected.startswith(new_prefix + "/"):
                    continue  # a name that leaves mlartifacts is refused by the tracker when it is used
                tail = expected[len(new_prefix):]  # "/<experiment>"
                copied = bool(location) and location.endswith(f"/{ARTIFACTS_DIR}{tail}")
                old_prefix = location[: -len(tail)] if copied else location or ""
                connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                                   (expected, experiment_id))
                if copied:
                    connection.execute(
                        "UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) "
                        "WHERE experiment_id = ? AND substr(artifact_uri, 1, ?) = ?",
                        (new_prefix, len(old_prefix) + 1, experiment_id, len(old_prefix) + 1, old_prefix + "/"),
                    )
                connection.execute(
                    "UPDATE runs SET artifact_uri = ? || '/' || run_uuid || '/artifacts' "
                    "WHERE experiment_id = ? AND substr(artifact_uri, 1, ?) != ?",
                    (expected, experiment_id, len(new_prefix) + 1, new_prefix + "/"),
                )
                moved.add(old_prefix or "no location")
    except sqlite3.DatabaseError as exc:
        raise TrackingError(f"{db}: {exc}; move it aside (mv {db} {db}.old) and rerun: a new store is "
                            "mirrored from the JSON trial files") from None
    finally:
        connection.close()
    if not moved:
        return []
    return [f"{db} named artifact locations outside this folder ({redacted(', '.join(sorted(moved)))}): "
            f"its artifacts now go to {new_prefix}"]
