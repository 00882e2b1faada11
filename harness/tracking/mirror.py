"""MLflow's copy of a run, as a listener of the run loop (harness.listeners): one parent run per
invocation and one child run per stored trial. The results store stays the source of truth.

``MlflowMirror`` follows a suite's own results folder, which a run resumes: it opens the parent only
when something is to be logged and reconciles MLflow with the store (see ``mlflow_tracker``).
``ReproductionMirror`` follows a reproduction's fresh folder and links its runs to the original's.
``MlflowMirror`` closes its parent itself when told the run ``finished``, with the metrics and tags it
reads off the run's analysis (KILLED when the run was interrupted); a reproduction closes its own
with its comparison (``finish``).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from harness.listeners import KILLED, RunEnd, RunStart
from harness.core.record import TrialRecord
from harness.suite.stored import StoredSuite
from harness.tracking.claim_metrics import VERDICT_TAG, claim_tags, parent_metrics, tracking_tags
from harness.tracking.environment import provenance_texts
from harness.tracking.mlflow_tracker import (
    RESULTS_ID_TAG,
    MlflowTracker,
    TrialRun,
    is_mirrored,
    marker_path,
    open_parents,
    results_id,
)
from harness.tracking.trial_view import TrialView

RUN_NAME_TAG = "mlflow.runName"


class _ParentRun:
    """The parent run's lifecycle, shared by both mirrors: open, log each trial under it, close."""

    def __init__(self, tracker: MlflowTracker) -> None:
        self.tracker = tracker
        self.run_id: str | None = None  # the parent, once opened
        self.run: RunStart | None = None
        self.suite = StoredSuite()  # the suite at the latest look (its seeds grow with a sequential design)
        self.view = TrialView()
        self._seconds_at_start = 0.0
        self.name = ""  # the parent run's name as opened

    @property
    def seconds(self) -> float:
        """Time spent in MLflow since the run started."""
        return self.tracker.seconds - self._seconds_at_start

    def started(self, run: RunStart) -> None:
        self.run, self.suite = run, run.suite
        self.view = TrialView.of(run.suite)
        self._seconds_at_start = self.tracker.seconds

    def _open(self, run_name: str, tags: Mapping[str, str], marked: bool) -> None:
        """Start the parent run; ``marked``: a marker in the folder says it is open until ``finish``."""
        run = self._started()
        self.name = f"{run_name} {time.strftime('%Y-%m-%d %H:%M:%S')}"
        self.run_id = self.tracker.start_parent(
            self.suite, run.environment, self.name,
            run.folder.path if marked else None, extra_tags=tags, texts=provenance_texts(),
        )

    def _log(self, record: TrialRecord, path: Path, tags: Mapping[str, str]) -> None:
        folder = self._started().folder.path
        self.tracker.log_trial(self.run_id, record, path, marker_path(folder, record.trial_id), view=self.view,
                               work_dir=folder / "work" / record.trial_id, extra_tags=tags)

    def _started(self) -> RunStart:
        if self.run is None:
            raise RuntimeError("the mirror has not been told the run started")
        return self.run

    def finish(self, status: str, metrics: Mapping[str, float | Sequence[float]], artifacts: Iterable[Path] = (),
               tags: Mapping[str, str] | None = None) -> None:
        """Close the parent with ``status`` (FINISHED, FAILED, KILLED) and what the run concluded; nothing
        when no parent was opened (nothing was to be logged)."""
        if self.run_id is not None:
            self.tracker.finish_parent(self.run_id, status, metrics, artifacts, tags)


class MlflowMirror(_ParentRun):
    """A suite's results folder in MLflow: exactly one complete child run per stored trial, under a
    parent run started only when something is to be logged. ``tags`` go on every run it logs."""

    def __init__(self, tracker: MlflowTracker, tags: Mapping[str, str] | None = None) -> None:
        super().__init__(tracker)
        self.extra_tags = dict(tags or {})
        self.tags: dict[str, str] = {}
        self.folder_id = ""
        self.unclosed: list[Path] | None = None
        self.present: dict[str, list[TrialRun]] | None = None
        self.reconciled: set[str] = set()

    def started(self, run: RunStart) -> None:
        super().started(run)
        self.folder_id = results_id(run.folder.path)
        self.tags = {**self.extra_tags, RESULTS_ID_TAG: self.folder_id}

    def look(self, suite: StoredSuite, done: Sequence[TrialRecord], pending: int) -> None:
        """Before a look runs: mirror its stored trials that MLflow lacks, start the parent if needed."""
        run, tracker = self._started(), self.tracker
        self.suite = suite
        name, profile = suite.suite, suite.profile
        if self.unclosed is None:
            self.unclosed = open_parents(run.folder.path, tracker)
        fresh = [r for r in done if r.trial_id not in self.reconciled]
        unmirrored = [r for r in fresh if not is_mirrored(run.folder.path, r.trial_id, tracker)]
        if not (pending or unmirrored or self.unclosed):  # else MLflow is not even imported
            self.reconciled.update(r.trial_id for r in fresh)
            return
        if self.present is None:
            tracker.close_parents(self.unclosed)
            tracker.close_stale_parents(name, profile, self.folder_id)
            self.present = tracker.trial_runs(name, profile, self.folder_id)
        if self.run_id is None and (pending or any(not _mirrored(r, self.present, self.view) for r in fresh)):
            self._open(f"{name}/{profile}", self.tags, marked=True)
        self._reconcile(fresh, self.present)
        self.reconciled.update(r.trial_id for r in fresh)

    def trial_stored(self, record: TrialRecord, path: Path) -> None:
        if self.run_id is None:
            return
        self.tracker.delete_runs(r.run_id for r in (self.present or {}).pop(record.trial_id, []))  # older attempts
        self._log(record, path, self.tags)
        self.reconciled.add(record.trial_id)

    def finished(self, end: RunEnd) -> None:
        """Close the parent with how the run ended: its wall time when trials ran, and when it was analysed
        its claims (``claim_metrics``) and, with trials run, the share of its time spent in MLflow."""
        metrics: dict[str, float | Sequence[float]] = {}
        tags: dict[str, str] = {}
        if end.status != KILLED and end.wall_seconds is not None:
            metrics["harness.wall_seconds"] = end.wall_seconds
        if end.status != KILLED and end.analysis is not None:
            if end.wall_seconds is not None:
                metrics.update({"harness.mlflow_seconds": self.seconds,
                                "harness.mlflow_share": self.seconds / max(end.wall_seconds, 1e-9),
                                "harness.failed_trials": end.failed})
            metrics.update(parent_metrics(end.analysis))
            tags = {**tracking_tags(end.analysis), **claim_tags(end.analysis)}
            if self.name:  # the runs table shows the answer in the run's name
                tags[RUN_NAME_TAG] = f"{self.name} · {tags[VERDICT_TAG]}"
        self.finish(end.status, metrics, end.artifacts, tags or None)

    def _reconcile(self, done: list[TrialRecord], present: dict[str, list[TrialRun]]) -> None:
        """Make MLflow hold exactly one complete run per stored finished trial: keep the first complete
        run, delete the others (left RUNNING or empty by a crash, or older attempts), log the missing."""
        folder = self._started().folder
        for record in done:
            runs = present.pop(record.trial_id, [])
            keep = next((run for run in runs if run.mirrors(record, self.view)), None)
            self.tracker.delete_runs(run.run_id for run in runs if run is not keep)
            marker = marker_path(folder.path, record.trial_id)
            if keep is not None:
                self.tracker.write_marker(marker, keep.run_id)
            else:
                self.tracker.log_trial(self.run_id, record, folder.trial_path(record.trial_id), marker,
                                       view=self.view, extra_tags=self.tags)


class ReproductionMirror(_ParentRun):
    """A reproduction in MLflow: its parent (tagged ``tags``) opened as it starts, closing first the
    reproductions of this suite whose process died; each rerun trial under it, tagged ``trial_tags``."""

    def __init__(self, tracker: MlflowTracker, tags: Mapping[str, str],
                 trial_tags: Callable[[TrialRecord], Mapping[str, str]]) -> None:
        super().__init__(tracker)
        self.tags, self.trial_tags = dict(tags), trial_tags

    def started(self, run: RunStart) -> None:
        super().started(run)
        suite, profile = run.suite.suite, run.suite.profile
        self.tracker.close_stale_parents(suite, profile, None, kind="reproduction")
        self._open(f"reproduce {suite}/{profile}", {"harness.kind": "reproduction", **self.tags}, marked=False)

    def look(self, suite: StoredSuite, done: Sequence[TrialRecord], pending: int) -> None:
        """A reproduction's folder is new: nothing stored to reconcile."""

    def trial_stored(self, record: TrialRecord, path: Path) -> None:
        self._log(record, path, {"harness.kind": "reproduction_trial", **self.trial_tags(record)})


def _mirrored(record: TrialRecord, present: dict[str, list[TrialRun]], view: TrialView) -> bool:
    return any(run.mirrors(record, view) for run in present.get(record.trial_id, []))
