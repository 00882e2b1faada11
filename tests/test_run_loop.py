"""The run loop that run, tune and reproduce share: what its listeners are told and when (each trial
only once its record is in the store), resumption from the store, and Ctrl-C stopping it with what
finished stored."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Iterator, Sequence

import torch

from harness.api import RunOptions, load_suites
from harness.execution.executor import TrialJob
from harness.execution.serial import SerialExecutor
from harness.execution.loop import JobSettings, Look, run_trials
from harness.execution.trials import expand_trials
from harness.listeners import RunStart
from harness.core.record import TrialRecord
from harness.store import RunFolder, read_trial
from harness.suite.stored import StoredSuite
from harness.core.terminal import Console

TOY = Path(__file__).resolve().parent / "suites" / "toy.yaml"  # smoke: 3 trials of 20 steps


class Recorder:
    """A listener that keeps what it was told, checking each trial against the store as it arrives."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def started(self, run: RunStart) -> None:
        self.events.append(("started", run.suite.suite, run.environment["executor"]))

    def look(self, suite: StoredSuite, done: Sequence[TrialRecord], pending: int) -> None:
        self.events.append(("look", sorted(r.trial_id for r in done), pending))

    def trial_stored(self, record: TrialRecord, path: Path) -> None:
        assert read_trial(path) == record  # the store first: a listener only follows it
        self.events.append(("trial", record.trial_id))


class InterruptedAfterOneTrial(SerialExecutor):
    """Runs the first trial for real, then Ctrl-C arrives."""

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        yield next(iter(super().run(jobs, console)))
        raise KeyboardInterrupt


def _run(results: Path, executor: SerialExecutor, stored: dict[str, TrialRecord] | None = None):
    (suite,) = load_suites(TOY, RunOptions(profile="smoke"))
    trials = expand_trials(suite)
    folder = RunFolder(results, suite.name, suite.profile)
    listener = Recorder()
    ran = run_trials([Look(trials, suite.stored())], executor, folder, [listener], Console(io.StringIO()),
                     JobSettings(torch.device("cpu"), results, {"git_commit": "test"}), stored)
    return trials, folder, listener, ran


def test_listeners_follow_the_store_and_a_resumed_run_runs_nothing_stored(tmp_path: Path) -> None:
    trials, folder, listener, ran = _run(tmp_path, SerialExecutor())
    ids = [t.trial_id for t in trials]
    assert listener.events == [("started", "toy", "serial"), ("look", [], 3)] + [("trial", i) for i in ids]
    assert ran.complete and not ran.interrupted and ran.ran == 3
    assert [r.trial_id for r in ran.records] == ids and all(r.finished for r in ran.records)
    assert all(r.environment["executor"] == "serial" for r in ran.records)

    stored, _ = folder.load_trials()
    _, _, listener, again = _run(tmp_path, SerialExecutor(), stored)
    assert listener.events == [("started", "toy", "serial"), ("look", sorted(ids), 0)]
    assert again.complete and again.ran == 0 and [r.trial_id for r in again.records] == ids


def test_ctrl_c_stops_the_loop_with_the_finished_trial_stored(tmp_path: Path) -> None:
    trials, folder, listener, ran = _run(tmp_path, InterruptedAfterOneTrial())
    assert ran.interrupted and not ran.complete and ran.ran == 1
    assert listener.events[-1] == ("trial", trials[0].trial_id)
    assert [p.stem for p in folder.trials_dir.glob("*.json")] == [trials[0].trial_id]
