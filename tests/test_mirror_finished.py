"""The MLflow mirror closes its own parent run when told the run finished: KILLED with nothing concluded,
a tuning run with its wall time and lock, nothing at all when no parent was opened."""
from __future__ import annotations

from pathlib import Path

from harness.listeners import FINISHED, KILLED, RunEnd
from harness.tracking.mirror import MlflowMirror


class Tracker:
    """Keeps what the mirror asks of MLflow when it closes a parent."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.closed: list[tuple] = []

    def finish_parent(self, run_id, status, metrics, artifacts=(), tags=None) -> None:
        self.closed.append((run_id, status, dict(metrics), list(artifacts), tags))


def opened(tracker: Tracker) -> MlflowMirror:
    mirror = MlflowMirror(tracker)  # type: ignore[arg-type]
    mirror.run_id = "parent"
    return mirror


def test_an_interrupted_run_closes_its_parent_killed_with_nothing_concluded():
    tracker = Tracker()
    opened(tracker).finished(RunEnd(KILLED, wall_seconds=3.0, failed=1))
    assert tracker.closed == [("parent", KILLED, {}, [], None)]


def test_a_tuning_run_closes_its_parent_with_its_wall_time_and_lock(tmp_path):
    tracker, lock = Tracker(), tmp_path / "s.tuned.json"
    opened(tracker).finished(RunEnd(FINISHED, wall_seconds=2.5, artifacts=(lock,)))
    assert tracker.closed == [("parent", FINISHED, {"harness.wall_seconds": 2.5}, [lock], None)]


def test_a_mirror_that_opened_no_parent_closes_nothing():
    tracker = Tracker()
    MlflowMirror(tracker).finished(RunEnd(FINISHED, wall_seconds=1.0, artifacts=(Path("x"),)))  # type: ignore[arg-type]
    assert tracker.closed == []
