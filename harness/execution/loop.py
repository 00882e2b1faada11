"""The run loop that ``harness run`` (each suite, each tuning grid) and ``harness reproduce`` share:
looks in, each trial executed, stored, shown and passed to the listeners (the MLflow mirror) as it lands;
Ctrl-C stops it with every finished trial stored."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import torch

from harness.execution.executor import Executor, TrialJob
from harness.tasks import load_task
from harness.execution.parallel import bounded
from harness.execution.trials import Trial
from harness.listeners import RunListener, RunStart
from harness.core.record import TrialRecord
from harness.store import RunFolder
from harness.suite.design import seeds_registered
from harness.suite.stored import StoredSuite
from harness.core.terminal import Console


@dataclass(frozen=True)
class Look:
    """One look's trials and the resolved suite at its seeds (what ``suite.json`` holds while it runs)."""

    trials: list[Trial]
    suite: StoredSuite


@dataclass(frozen=True)
class JobSettings:
    """How every trial of a run executes: where, with what recorded environment, its cached artifacts
    under ``<results_root>/cache/<suite>``."""

    device: torch.device
    results_root: Path
    environment: Mapping[str, str]
    timeout_s: float | None = None
    threads: Mapping[str, int] = field(default_factory=dict)  # trial id -> torch threads; else this process's
    quiet_timing: bool = False  # every timing alone, the trials side by side (a suite that claims a speed metric)
    seed_batch: int = 1  # seeds of one arm and point trained as one model, where the task can
    batches: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # trial id -> the batch it must rerun in


@dataclass
class TrialsRun:
    """What a run loop did: every trial of its looks now stored (found or run), in that order."""

    records: list[TrialRecord] = field(default_factory=list)
    ran: int = 0
    interrupted: bool = False
    complete: bool = False  # every trial of the last look is stored
    listener_seconds: float = 0.0  # spent telling the listeners (mirroring to MLflow)


def run_trials(
    looks: Iterable[Look],
    executor: Executor,
    folder: RunFolder,
    listeners: Sequence[RunListener],
    console: Console,
    settings: JobSettings,
    stored: dict[str, TrialRecord] | None = None,
) -> TrialsRun:
    """Run, look by look (one look, or those of a sequential design, drawn as each is due), every trial
    not in ``stored`` and store each in ``folder``. ``stored``: the finished trials already in the folder,
    by id, kept up to date (a look may set some aside before it runs). The listeners hear the run start
    with the first look's suite."""
    kept = stored if stored is not None else {}
    given, executor = executor, bounded(executor, settings.timeout_s)  # a trial past its timeout is killed
    folder.mark_incomplete()  # until every trial is stored: a process that ends early leaves a folder read as partial
    environment = {**settings.environment, "executor": executor.name}
    outcome = TrialsRun()
    trials: list[Trial] = []
    try:
        for number, look in enumerate(looks):
            trials = look.trials
            if number == 0:
                with _timed(outcome):
                    for listener in listeners:
                        listener.started(RunStart(folder, look.suite, environment))
            done = [kept[t.trial_id] for t in trials if t.trial_id in kept]
            pending = [t for t in trials if t.trial_id not in kept]
            counted = {r.trial_id for r in outcome.records}
            found = [r for r in done if r.trial_id not in counted]
            outcome.records += found
            if trials:
                console.look(trials[0].suite, len(trials), len(look.suite.seeds),
                             seeds_registered(look.suite.sequential, look.suite.seeds))
            console.stored(len(found))
            with _timed(outcome):
                for listener in listeners:
                    listener.look(look.suite, done, len(pending))
            for record in executor.run(_jobs(trials, pending, folder, settings, environment), console):
                path = folder.save_trial(record)
                kept[record.trial_id] = record
                outcome.records.append(record)
                outcome.ran += 1
                status = "ok" if record.finished else f"FAILED: {record.error}"
                index = next(i for i, t in enumerate(trials, 1) if t.trial_id == record.trial_id)
                console.trial_finished(record.suite, index, len(trials), record.title, status, record.wall_seconds)
                with _timed(outcome):
                    for listener in listeners:
                        listener.trial_stored(record, path)
        outcome.complete = {t.trial_id for t in trials} <= {r.trial_id for r in outcome.records}
        if outcome.complete:
            folder.mark_complete()  # only now may a reader take the folder for a result
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        console.close()
        if executor is not given:
            executor.close()
    return outcome


@contextmanager
def _timed(outcome: TrialsRun) -> Iterator[None]:
    """Time spent telling the listeners, added to ``outcome.listener_seconds``."""
    clock = time.perf_counter()
    try:
        yield
    finally:
        outcome.listener_seconds += time.perf_counter() - clock


def _jobs(trials: list[Trial], pending: list[Trial], folder: RunFolder, settings: JobSettings,
          environment: dict[str, str]) -> list[TrialJob]:
    """Pending trials as picklable jobs, each seed's first trial before any seed's second (``by_rank``);
    where the task trains seeds as one model, the pending seeds of each arm and point in batches of
    ``settings.seed_batch`` (or the batches ``settings.batches`` names: a rerun's)."""
    work_root = (folder.path / "work").absolute()
    position = {t.trial_id: i for i, t in enumerate(trials, 1)}
    threads = torch.get_num_threads()
    return [
        TrialJob(
            task=batch[0].task, trials=batch, device=str(settings.device),
            cache_dir=(settings.results_root / "cache" / batch[0].suite).absolute(),
            work_dir=work_root, environment=environment,
            torch_threads=settings.threads.get(batch[0].trial_id, threads),
            index=position[batch[0].trial_id], total=len(trials), timeout_s=settings.timeout_s,
            quiet_dir=work_root if settings.quiet_timing else None,
        )
        for batch in seed_batches(by_rank(trials, pending), settings.seed_batch, settings.batches)
    ]


def seed_batches(ordered: list[Trial], size: int, named: Mapping[str, tuple[int, ...]] | None = None) -> list[tuple[Trial, ...]]:
    """``ordered`` as jobs: one trial each, or (a task that trains seeds as one model) the trials of one arm and
    point at up to ``size`` seeds, in the look's seed order, each batch where its first trial was. ``named``:
    trial id -> the seeds of the batch it ran in, in order, which a rerun keeps (its values depend on the batch).
    The job's position is its earliest trial's."""
    named = named or {}
    if size <= 1 and not named:
        return [(t,) for t in ordered]
    groups: dict[tuple, list[Trial]] = {}
    for trial in ordered:
        task = load_task(trial.task)
        batching = task.batches_seeds(task.validate_params(trial.params))
        key = (trial.arm_label, trial.point_label, named.get(trial.trial_id)) if batching else (trial.trial_id,)
        groups.setdefault(key, []).append(trial)
    first = {t.trial_id: i for i, t in enumerate(ordered)}
    batches: list[tuple[Trial, ...]] = []
    for key, members in groups.items():
        recorded = key[2] if len(key) == 3 else None  # a rerun's batch: its seeds in the order they were stacked
        members.sort(key=lambda t: recorded.index(t.seed) if recorded and t.seed in recorded else first[t.trial_id])
        width = len(members) if recorded else max(size, 1)
        batches += [tuple(members[i:i + width]) for i in range(0, len(members), width)]
    return sorted(batches, key=lambda b: min(first[t.trial_id] for t in b))


def by_rank(trials: list[Trial], pending: list[Trial]) -> list[Trial]:
    """``pending`` with every seed's first trial first, then every seed's second, and so on (ranks and
    seeds in the look's order). The first trial of a seed builds what the seed's other trials share
    (data, a backbone) under the cache's lock: trials side by side then build different seeds' shared
    work at once instead of the second waiting on the first's lock. One at a time it is the same work."""
    seeds = {seed: i for i, seed in enumerate(dict.fromkeys(t.seed for t in trials))}
    rank: dict[str, tuple[int, int]] = {}
    counts: dict[int, int] = {}
    for trial in trials:
        rank[trial.trial_id] = (counts.get(trial.seed, 0), seeds[trial.seed])
        counts[trial.seed] = counts.get(trial.seed, 0) + 1
    return sorted(pending, key=lambda t: rank[t.trial_id])
