"""What was recorded: the trial records behind a results folder, a trial JSON or an MLflow run.

Every target becomes one ``Original``: the records to rerun (each carries its task, version,
arm, seed, resolved params, environment and package lock), the suite's resolved metadata when
it is known, and where the original lives (its MLflow runs, its results root), so the
reproduction can be written next to it and linked to it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.record import RecordError, TrialRecord, from_json
from harness.store import SUITE_FILE, TRIALS_DIR, incomplete_note, iter_runs, iter_trial_files, read_json
from harness.suite.stored import StoredSuite, StoredSuiteError
from harness.tracking.mlflow_tracker import marker_path


class ReproduceError(ValueError):
    """A target that cannot be reproduced as given: one line for the user (exit 2)."""


@dataclass
class Original:
    """The recorded trials of one suite and profile, and where they were found."""

    description: str
    records: list[TrialRecord]
    suite_meta: dict[str, Any] | None
    results_root: Path | None = None  # the results root the target lies in (reproductions go there)
    tracking_uri: str | None = None  # where the original was mirrored, when known
    run_ids: dict[str, str] = field(default_factory=dict)  # trial id -> the original's nested MLflow run
    parent_run_ids: tuple[str, ...] = ()  # the original suite run(s), when known
    target_run_id: str | None = None  # the MLflow run named on the command line
    skipped: int = 0  # failed trials of the record: nothing to reproduce
    stale: int = 0  # stored trials outside the suite's expansion and seeds: set aside, not rerun
    incomplete: str = ""  # store.incomplete_note of the original's folder: its last run ended early

    @property
    def linked_runs(self) -> str:
        """The original MLflow run(s) a reproduction links to: the named run, else the suite
        run(s), else the one trial run; '' when the original was never mirrored."""
        if self.target_run_id:
            return self.target_run_id
        if self.parent_run_ids:
            return ",".join(self.parent_run_ids)
        return ",".join(self.run_ids.values()) if len(self.run_ids) == 1 else ""

    @property
    def suite(self) -> str:
        return str(self.records[0].suite)

    @property
    def profile(self) -> str:
        return str(self.records[0].profile)


def check_record(record: Any, where: str) -> TrialRecord:
    """A harness trial record, or a one-line error naming what is wrong with it."""
    try:
        return from_json(record)
    except RecordError as exc:
        raise ReproduceError(f"{where}: not a harness trial record ({exc})") from None


def load_path(path: Path) -> Original:
    """A ``<suite>/<profile>`` results folder (every trial in it) or one trial JSON."""
    if path.is_file():
        return _load_trial_file(path)
    runs = iter_runs(path)
    if not runs:
        raise ReproduceError(f"{path}: no stored results here (expected <suite>/<profile>/{SUITE_FILE})")
    if len(runs) > 1:
        raise ReproduceError(f"{path} holds {len(runs)} runs; give one <suite>/<profile> folder or a trial JSON")
    run_dir = runs[0]
    files = list(iter_trial_files(run_dir))
    if not files:
        raise ReproduceError(f"{run_dir}: no trial records under {TRIALS_DIR}/")
    meta = _read(run_dir / SUITE_FILE)
    try:
        suite = StoredSuite.read(run_dir / SUITE_FILE, meta)
    except StoredSuiteError as exc:
        raise ReproduceError(str(exc)) from None
    stored = [check_record(_read(p), str(p)) for p in files]
    records = sorted((r for r in stored if suite.includes(r.trial_id, r.seed)), key=_run_order)
    if not records:
        raise ReproduceError(f"{run_dir}: none of its {len(stored)} trial record(s) is of the suite's expansion and seeds")
    suites = {(r.suite, r.profile) for r in records}
    if len(suites) > 1:
        raise ReproduceError(f"{run_dir}: trial records of {len(suites)} suites/profiles in one folder")
    original = Original(f"results folder {run_dir}", records, meta, run_dir.parent.parent,
                        stale=len(stored) - len(records))
    _read_markers(original, run_dir)
    return original


def _load_trial_file(path: Path) -> Original:
    record = check_record(_read(path), str(path))
    run_dir = path.parent.parent if path.parent.name == TRIALS_DIR else None
    meta = None
    if run_dir is not None and (run_dir / SUITE_FILE).is_file():
        meta = _read(run_dir / SUITE_FILE)
    root = run_dir.parent.parent if meta is not None else None
    original = Original(f"trial {path}", [record], meta, root)
    if run_dir is not None:
        _read_markers(original, run_dir)
    return original


def _read_markers(original: Original, run_dir: Path) -> None:
    """The MLflow runs the results folder says its trials were mirrored to, and whether its last run
    ended before every trial was stored."""
    original.incomplete = incomplete_note(run_dir)
    for record in original.records:
        marker = marker_path(run_dir, record.trial_id)
        if not marker.is_file():
            continue
        try:
            entry = read_json(marker)
        except (OSError, ValueError):
            continue
        if original.tracking_uri is None:
            original.tracking_uri = entry.get("tracking_uri")
        if entry.get("tracking_uri") == original.tracking_uri and entry.get("run_id"):
            original.run_ids[record.trial_id] = str(entry["run_id"])


def _run_order(record: TrialRecord) -> tuple[Any, ...]:
    """Seeds outermost as the runner orders them, then as they ran."""
    return record.seed, record.started_at, record.trial_id


def _read(path: Path) -> Any:
    try:
        return read_json(path)
    except FileNotFoundError:
        raise ReproduceError(f"{path}: missing") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ReproduceError(f"{path}: cannot be read as JSON ({exc})") from None
