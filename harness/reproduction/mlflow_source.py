"""Trial records from an MLflow run: a suite (parent) run gives its nested trials, a trial run itself.

Each nested run holds its trial JSON as an artifact (``<trial id>.json``) and the parent holds
``suite.json``; both are read into memory through a temporary folder, so looking a run up
writes nothing the user keeps.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from harness.core.record import TrialRecord
from harness.reproduction.sources import Original, ReproduceError, check_record
from harness.store import SUITE_FILE, read_json
from harness.tracking.mlflow_tracker import TRIAL_ID_TAG, MlflowTracker, TrackingError, missing_store

RUN_ID = re.compile(r"[0-9a-f]{32}")
KIND_TAG = "harness.kind"
PARENT_TAG = "mlflow.parentRunId"
SUITE_KINDS = ("suite", "reproduction")
TRIAL_KINDS = ("trial", "reproduction_trial")
T = TypeVar("T")


def looks_like_run_id(text: str) -> bool:
    return RUN_ID.fullmatch(text) is not None


def check_store(uri: str) -> None:
    """A SQLite store must exist: MLflow would otherwise create an empty one to look the run up in."""
    missing = missing_store(uri)
    if missing is not None:
        raise ReproduceError(f"no MLflow store at {missing} (give --tracking-uri, or --results for the folder holding mlflow.db)")


def load_run(tracker: MlflowTracker, run_id: str) -> Original:
    """The trials of a harness suite run (its nested runs) or of one harness trial run."""
    check_store(tracker.uri)
    run = _query(tracker, lambda client: client.get_run(run_id), f"unknown MLflow run id {run_id}")
    kind = run.data.tags.get(KIND_TAG)
    if kind in TRIAL_KINDS:
        record = _trial_record(tracker, run)
        parent = run.data.tags.get(PARENT_TAG)
        return Original(
            f"MLflow trial run {run_id}", [record], _suite_meta(tracker, parent) if parent else None,
            tracking_uri=tracker.uri, run_ids={record.trial_id: run_id}, parent_run_ids=(parent,) if parent else (),
            target_run_id=run_id,
        )
    if kind in SUITE_KINDS:
        children = _children(tracker, run)
        if not children:
            raise ReproduceError(f"MLflow run {run_id} ({_name(run)}) has no nested trial runs to reproduce")
        records = [_trial_record(tracker, child) for child in children]
        return Original(
            f"MLflow suite run {run_id} ({_name(run)})", records, _suite_meta(tracker, run_id, required=True),
            tracking_uri=tracker.uri, run_ids={r.trial_id: c.info.run_id for r, c in zip(records, children)},
            parent_run_ids=(run_id,), target_run_id=run_id,
        )
    raise ReproduceError(f"MLflow run {run_id} ({_name(run)}) is not a harness run (no {KIND_TAG} tag of a suite or trial)")


def parents_of(tracker: MlflowTracker, run_ids: list[str]) -> tuple[str, ...]:
    """The suite runs that the given trial runs are nested in, in first-seen order (runs deleted
    since are skipped: the link is a courtesy, the results folder is the record)."""
    parents: list[str] = []
    for run_id in run_ids:
        try:
            run = _query(tracker, lambda client, rid=run_id: client.get_run(rid), f"unknown MLflow run id {run_id}")
        except ReproduceError:
            continue
        parent = run.data.tags.get(PARENT_TAG)
        if parent and parent not in parents:
            parents.append(parent)
    return tuple(parents)


def _children(tracker: MlflowTracker, run) -> list:
    def search(client) -> list:
        found, token = [], None
        while True:
            page = client.search_runs(
                [run.info.experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{run.info.run_id}'",
                max_results=1000, page_token=token,
            )
            found.extend(r for r in page if r.data.tags.get(KIND_TAG) in TRIAL_KINDS)
            token = page.token
            if not token:
                return sorted(found, key=lambda r: r.info.start_time)

    return _query(tracker, search, f"cannot list the trials of MLflow run {run.info.run_id}")


def _trial_record(tracker: MlflowTracker, run) -> TrialRecord:
    trial_id = run.data.tags.get(TRIAL_ID_TAG)
    if not trial_id:
        raise ReproduceError(f"MLflow run {run.info.run_id} ({_name(run)}) has no {TRIAL_ID_TAG} tag")
    name = f"{trial_id}.json"
    record = _artifact_json(tracker, run.info.run_id, name)
    if record is None:
        raise ReproduceError(f"MLflow run {run.info.run_id} ({_name(run)}) is missing its artifact {name}")
    return check_record(record, f"artifact {name} of MLflow run {run.info.run_id}")


def _suite_meta(tracker: MlflowTracker, run_id: str, required: bool = False) -> dict[str, Any] | None:
    meta = _artifact_json(tracker, run_id, SUITE_FILE)
    if meta is None and required:
        raise ReproduceError(f"MLflow run {run_id} is missing its artifact {SUITE_FILE}")
    return meta


def _artifact_json(tracker: MlflowTracker, run_id: str, name: str) -> Any | None:
    """A JSON artifact at the run's artifact root, or None when the run has no such file."""
    with tempfile.TemporaryDirectory(prefix="harness-reproduce-") as folder:
        def fetch(client) -> Path | None:
            if name not in {f.path for f in client.list_artifacts(run_id)}:
                return None
            return Path(client.download_artifacts(run_id, name, folder))

        try:
            path = _query(tracker, fetch, f"cannot read artifact {name} of MLflow run {run_id}")
        except ReproduceError:
            return None
        if path is None or not path.is_file():
            return None
        try:
            return read_json(path)
        except (OSError, ValueError) as exc:
            raise ReproduceError(f"artifact {name} of MLflow run {run_id} cannot be read as JSON ({exc})") from None


def _query(tracker: MlflowTracker, call: Callable[[Any], T], problem: str) -> T:
    """An MLflow call whose failure becomes one line naming the problem and MLflow's reason."""
    try:
        return call(tracker.client)
    except Exception as exc:
        if not exc.__class__.__module__.startswith("mlflow") and not isinstance(exc, (OSError, TrackingError)):
            raise
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReproduceError(f"{problem} in {tracker.uri} ({reason})") from None


def _name(run) -> str:
    return run.data.tags.get("mlflow.runName") or run.info.run_name or "unnamed"
