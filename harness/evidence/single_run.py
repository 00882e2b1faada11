"""The audit's ``single_run`` check: a bundle's trials come from one run.

Two honest runs of one registered design draw the same seeds, so trials picked from each (the faster
timing of each seed, the better accuracy) make a bundle whose every record is real and whose verdict
neither run gave. A run is a results folder's: every trial records the run id its folder keeps
(``run_id``, harness.tracking.run_identity), which a resumed run and the later looks of a sequential
design keep. A bundle sealed before run ids were recorded is read by what its trials do record: the
trials of one invocation of ``harness run`` share its command line, commit, executor and machine, and
one invocation's trials span a time no other invocation's trials fall in.

- Trials of two run ids fail.
- Invocations without a run id (or beside one) pass as a resume only when they follow one another (the
  time from a group's first start to its last trial's end overlaps no other group's, to the second the
  records keep) and ran at one commit.
- A design that declares a top-up (``sequential: {top_up: true}``, locked with the design, so the suite
  file at the trials' commit declares it too) may hold several runs, when they follow one another and no
  seed of one is a seed of another (a top-up adds seeds; it never picks among two runs of one seed).
"""
from __future__ import annotations

from dataclasses import astuple, dataclass, field
from datetime import datetime, timezone
from typing import Any, Sequence

from harness.core.record import TrialRecord
from harness.core.stored_fields import STRING, from_stored, stored
from harness.core.trial_environment import TrialEnvironment
from harness.suite.schema import StoredSequential


@dataclass(frozen=True)
class _Invocation:
    """What one invocation records alike in every trial's environment ("" where a trial records none), for
    trials that record no run id (a batched trial's seed_batch, and any later per-trial key, is left out)."""

    argv: str = stored(STRING, missing="")
    git_commit: str = stored(STRING, missing="")
    git_diff_sha256: str = stored(STRING, missing="")
    executor: str = stored(STRING, missing="")
    device_name: str = stored(STRING, missing="")
    platform: str = stored(STRING, missing="")
    packages_sha256: str = stored(STRING, missing="")
    harness_version: str = stored(STRING, missing="")

_TOLERANCE = 1.0  # seconds: a start is kept to the second
_SHOWN = 3


@dataclass
class _Run:
    """The trials of one run id, or of one invocation that recorded none."""

    run_id: str | None
    commit: str
    trials: list[TrialRecord] = field(default_factory=list)
    first: float | None = None  # the earliest start (POSIX seconds)
    last: float | None = None  # the latest end

    def add(self, record: TrialRecord) -> None:
        self.trials.append(record)
        started = _seconds(record.started_at)
        if started is None:  # an unreadable start fails ``dated``; it cannot be placed in time here
            return
        self.first = started if self.first is None else min(self.first, started)
        end = started + record.wall_seconds
        self.last = end if self.last is None else max(self.last, end)

    @property
    def seeds(self) -> set[int]:
        return {record.seed for record in self.trials}

    def name(self) -> str:
        who = f"run {self.run_id[:12]}" if self.run_id else f"an invocation at {self.commit[:12] or 'no commit'}"
        when = (f", {_iso(self.first)} to {_iso(self.last)}" if self.first is not None and self.last is not None
                else "")
        return f"{who} ({len(self.trials)} trial(s){when})"


def runs_of(trials: Sequence[TrialRecord]) -> list[_Run]:
    """The bundle's trials by run, the earliest first."""
    runs: dict[Any, _Run] = {}
    for record in trials:
        env = TrialEnvironment.of(record.environment)
        run_id = env.run_id or None
        key = ("id", run_id) if run_id else ("invocation", astuple(from_stored(_Invocation, record.environment)))
        runs.setdefault(key, _Run(run_id, env.git_commit)).add(record)
    return sorted(runs.values(), key=lambda run: (run.first is None, run.first or 0.0, run.run_id or ""))


def top_up(sequential: StoredSequential | None) -> bool:
    """Whether a stored design declares a top-up (``sequential.top_up`` true)."""
    return sequential is not None and sequential.spec.top_up


def spliced(trials: Sequence[TrialRecord], sequential: StoredSequential | None = None) -> str | None:
    """Why the trials are not one run's (one line), or None when they are (or a declared top-up's)."""
    runs = runs_of(trials)
    if len(runs) < 2:
        return None
    named = "; ".join(run.name() for run in runs[:_SHOWN]) + (f"; and {len(runs) - _SHOWN} more" if len(runs) > _SHOWN
                                                              else "")
    overlapping = _interleaved(runs)
    if overlapping:
        a, b = overlapping
        return (f"the trials of {len(runs)} runs interleave in time ({a.name()} and {b.name()}): trials spliced "
                "from runs made side by side, not one run resumed")
    if top_up(sequential):
        shared = sorted({seed for n, run in enumerate(runs) for other in runs[n + 1:] for seed in run.seeds & other.seeds})
        if shared:
            return (f"seed(s) {','.join(map(str, shared[:10]))} ran in more than one of {len(runs)} runs ({named}): a "
                    "top-up adds seeds, it never picks among two runs of one seed")
        return None
    ids = [run.run_id for run in runs if run.run_id]
    if len(ids) > 1:
        return (f"trials of {len(runs)} runs ({named}) in one bundle: a resumed run keeps its run id, so these "
                "are trials of other results folders; a design whose later seeds come from other runs declares "
                "sequential: {top_up: true}")
    commits = sorted({run.commit for run in runs})
    if len(commits) > 1:
        return (f"trials of {len(runs)} invocations at {len(commits)} commits ({named}): a resume reruns the "
                "commit it started at")
    return None


def _interleaved(runs: list[_Run]) -> tuple[_Run, _Run] | None:
    """Two runs whose time spans overlap by more than the records' precision, the earlier first."""
    placed = [run for run in runs if run.first is not None and run.last is not None]
    for n, run in enumerate(placed):
        for other in placed[n + 1:]:
            if other.first < run.last - _TOLERANCE and run.first < other.last - _TOLERANCE:
                return run, other
    return None


def _seconds(started_at: str) -> float | None:
    try:
        started = datetime.fromisoformat(started_at)
    except (TypeError, ValueError):
        return None
    if started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    return started.timestamp()


def _iso(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
