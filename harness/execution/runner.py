"""One suite, end to end: expand trials look by look, skip finished ones, and run the rest through the
run loop (harness.execution.loop), which stores them and tells the listeners (the MLflow mirror).

The caller holds the suite's writer lock (harness.core.locks): this process is the only one writing
the suite's run folder, cache and MLflow runs, so leftovers of a crash (temporary files, RUNNING
runs, a corrupt trial file) are safe to clean up here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Sequence

import torch

from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.verdicts import INVALID, UNDETERMINED, evaluate_validity
from harness.analysis.run_results import RunResults, load_results
from harness.core.devices import device_class, device_name
from harness.core.stored_fields import as_stored
from harness.core.trial_environment import TaskEnvironment
from harness.execution.allocation import allocate, needed_cells, stopped_arms
from harness.execution.executor import Executor, capabilities_of
from harness.execution.serial import SerialExecutor
from harness.execution.loop import JobSettings, Look, run_trials
from harness.execution.trials import Trial, expand_trials
from harness.listeners import RunListener
from harness.core.record import TrialRecord
from harness.store import REPORT_DIR, SUPERSEDED_DIR, RunFolder, clean_stray_tmp, stale_note
from harness.suite.design import check_design
from harness.suite.resolved_suite import Suite
from harness.suite.stored import StoredSuite
from harness.tasks import Task
from harness.core.terminal import Console
from harness.tracking.environment import environment, save_diff, task_environment


@dataclass
class SuiteOutcome:
    suite: Suite
    run_dir: Path
    records: list[TrialRecord] = field(default_factory=list)
    ran: int = 0
    skipped: int = 0
    interrupted: bool = False
    parent_run_id: str | None = None  # the MLflow mirror's parent run, when one was opened
    wall_seconds: float = 0.0
    analysis_seconds: float = 0.0  # deciding each look of a sequential design
    listener_seconds: float = 0.0  # telling the listeners (mirroring to MLflow)

    @property
    def failed(self) -> list[TrialRecord]:
        return [r for r in self.records if not r.finished]


def stored_suite(suite: Suite, device: torch.device) -> StoredSuite:
    """suite.json: the resolved suite plus the task's metric and plot declarations and the device."""
    stored = replace(suite.stored(), design=suite.locked_design(),
                     trial_ids=tuple(t.trial_id for t in expand_trials(suite)))
    return on_device(with_declarations(stored, suite.task), device)


def with_declarations(stored: StoredSuite, task: type[Task]) -> StoredSuite:
    """``stored`` with the task's metric and plot declarations (analysis reads nothing else of the task)."""
    return replace(stored, metrics={m.name: m for m in task.metrics}, detail_scatters=tuple(task.detail_scatters),
                   pareto_views=tuple(task.pareto_views))


def on_device(stored: StoredSuite, device: torch.device) -> StoredSuite:
    return replace(stored, device=str(device), device_class=device_class(device), device_name=device_name(device))


def run_suite(
    suite: Suite,
    results_root: Path,
    device: torch.device,
    console: Console,
    resume: bool = True,
    executor: Executor | None = None,
    trial_timeout: float | None = None,
    listeners: Sequence[RunListener] = (),
    allocation: str = "open",
) -> SuiteOutcome:
    """Run every unfinished trial of a suite (each failed past ``trial_timeout`` seconds, when given),
    look after look of a sequential design (``allocation``: ``open``, later looks run only the arms an
    open question reads; ``all``, every arm); Ctrl-C stops after storing what finished."""
    clock = time.perf_counter()
    folder = RunFolder(results_root, suite.name, suite.profile)
    outcome = SuiteOutcome(suite=suite, run_dir=folder.path)
    clean_stray_tmp(folder.path, results_root / "cache" / suite.name, skip=folder.path / REPORT_DIR)
    clean_stray_tmp(folder.path / REPORT_DIR, min_age=300)
    stored = stored_suite(suite, device)
    _save_suite(folder, stored)
    env = environment(device)  # the git state of the harness checkout: a suite's own tree is never read
    env.update(task_environment(suite.task))
    save_diff(folder.path)

    records, corrupt = folder.load_trials()
    for path, reason in corrupt:
        console.line(f"warning: {path.with_suffix('')} is corrupt ({reason}): moved to {path.name}; its trial reruns")
    kept = folder.resumable(records) if resume else {}
    looks = _looks(suite, stored, records, kept, folder, env, console, allocation == "open", outcome, resume)
    ran = run_trials(looks, executor or SerialExecutor(), folder, listeners, console,
                     JobSettings(device, results_root, env, trial_timeout, quiet_timing=_quiet(suite, executor),
                                 seed_batch=suite.seed_batch), kept)
    outcome.records, outcome.ran, outcome.interrupted = ran.records, ran.ran, ran.interrupted
    outcome.listener_seconds = ran.listener_seconds
    outcome.skipped = len(outcome.records) - outcome.ran
    outcome.wall_seconds = time.perf_counter() - clock
    return outcome


def _save_suite(folder: RunFolder, stored: StoredSuite) -> None:
    """suite.json, never with another design while the folder holds trials of the stored one."""
    check_design(folder, stored.design)
    folder.save_suite(as_stored(stored))


def _quiet(suite: Suite, executor: Executor | None) -> bool:
    """Whether the trials take every timing alone: a suite that claims a speed metric, on an executor whose
    trials can (not Ray's workers, on machines of their own)."""
    return bool(suite.speed_claims) and capabilities_of(executor).quiet_timing


def _looks(suite: Suite, stored: StoredSuite, records: dict[str, TrialRecord],
           kept: dict[str, TrialRecord], folder: RunFolder, env: dict[str, str], console: Console,
           allocate_arms: bool, outcome: SuiteOutcome, resume: bool) -> Iterator[Look]:
    """The trials of each look: the suite's seeds, then (a sequential design) more seeds while a claim
    is undecided, for every arm or (``allocate_arms``) those an open question reads. Stored trials a
    look's trials replace are set aside first, and (``resume``) set-aside records a trial matches come
    back; suite.json follows the seeds. The time deciding each look
    adds to ``outcome.analysis_seconds``."""
    look = suite
    trials = expand_trials(look)
    _set_aside_superseded(trials, records, kept, folder, env, console)
    if resume:
        _restore_superseded(trials, records, kept, folder, console)
    current = {t.trial_id for t in trials}  # trials of its seeds left by another expansion
    note = stale_note(sum(1 for i, r in records.items() if i not in current and r.seed in look.seeds), folder.path)
    if note:
        console.line(note)
    yield Look(trials, stored)
    batch = list(look.seeds)
    while look.sequential is not None and len(look.seeds) < look.sequential.max_seeds:
        clock = time.perf_counter()
        results = load_results(folder.path)
        more = _next_look(look, results, console)
        needed = needed_cells(results) if more and allocate_arms else set()
        outcome.analysis_seconds += time.perf_counter() - clock
        if not more:
            return
        look = replace(look, seeds=list(look.seeds) + more)
        expanded = expand_trials(look)
        if allocate_arms:
            previous, trials = trials, allocate(expanded, trials, more, needed)
            stopped = stopped_arms(previous, trials, batch, more)
            if stopped:
                console.line(f"{look.name}: no open question reads {', '.join(stopped)} any more: "
                             f"stopped at {len(look.seeds) - len(more)} seeds")
        else:
            trials = expanded
        batch = more
        _set_aside_superseded(expanded, records, kept, folder, env, console)
        if resume:
            _restore_superseded(expanded, records, kept, folder, console)
        stored = replace(stored, seeds=tuple(look.seeds), trial_ids=tuple(t.trial_id for t in expanded))
        _save_suite(folder, stored)
        yield Look(trials, stored)


def _set_aside_superseded(trials: list[Trial], records: dict[str, TrialRecord], kept: dict[str, TrialRecord],
                          folder: RunFolder, env: dict[str, str], console: Console) -> None:
    """Move stored trials that a trial of this run replaces (same arm, point and seed, another id:
    the task's code, version or params changed) out of the results, saying why: they rerun, and
    neither analysis nor the gate mixes their numbers with the new ones."""
    current = {(t.arm_label, t.point_label, t.seed): t.trial_id for t in trials}
    superseded = [r for r in records.values()
                  if current.get((r.arm_label, r.point_label, r.seed), r.trial_id) != r.trial_id]
    if not superseded:
        return
    reasons = sorted({_why_superseded(r, trials[0], env) for r in superseded})
    aside = folder.set_aside([r.trial_id for r in superseded])
    for record in superseded:
        records.pop(record.trial_id, None)
        kept.pop(record.trial_id, None)
    console.line(f"warning: {len(superseded)} stored trial(s) of {trials[0].suite}/{trials[0].profile} ran other "
                 f"{' or '.join(reasons)}: moved to {aside}; they rerun")


def _restore_superseded(trials: list[Trial], records: dict[str, TrialRecord], kept: dict[str, TrialRecord],
                        folder: RunFolder, console: Console) -> None:
    """Move back the finished records in ``trials/superseded/`` whose ids a trial of this run has (an
    edit reverted: the same task code, version and params), so they are reused instead of rerun."""
    back = folder.restorable([t.trial_id for t in trials if t.trial_id not in records])
    if not back:
        return
    folder.restore(list(back))
    records.update(back)
    kept.update(back)
    console.line(f"{len(back)} trial(s) of {trials[0].suite}/{trials[0].profile} restored from "
                 f"{folder.trials_dir / SUPERSEDED_DIR}: their ids match this run's (same task code, version and "
                 f"params), so they are not rerun")


def _why_superseded(record: TrialRecord, trial: Trial, env: dict[str, str]) -> str:
    recorded = TaskEnvironment.of(record.environment).task_code_sha256
    if record.task_version != trial.task_version:
        return f"task version ({record.task_version}, now {trial.task_version})"
    if not recorded:
        return "code (recorded before the task's code was part of a trial's id)"
    if recorded != TaskEnvironment.of(env).task_code_sha256:
        return "task code (its source changed since they ran)"
    return "params"


def _next_look(look: Suite, results: RunResults, console: Console) -> list[int]:
    """The seeds of the next look of a sequential design, judged on the stored ``results`` of this one:
    none once every claim is decided, or once validity is INVALID (a positive control too weak to be
    shown by ``max_seeds`` included): then no claim can count."""
    assert look.sequential is not None
    validity = evaluate_validity(results)
    if validity.status == INVALID:
        console.line(f"{look.name}: validity INVALID at {len(look.seeds)} seeds ({'; '.join(validity.problems)}): "
                     f"no claim can count, so no more seeds")
        return []
    undecided = [c for c in evaluate_claims(results) if c.open]
    validity_open = validity.status == UNDETERMINED
    if not undecided and not validity_open:
        console.line(f"{look.name}: every claim decided at {len(look.seeds)} seeds")
        return []
    more = look.next_seeds(min(look.sequential.batch, look.sequential.max_seeds - len(look.seeds)))
    waiting = sum(c.premise is not None for c in undecided)
    premises = f" ({waiting} waiting on a premise)" if waiting else ""
    validity = "; validity undetermined" if validity_open else ""
    console.line(f"{look.name}: {len(undecided)} claim(s) undecided{premises}{validity} at {len(look.seeds)} seeds; "
                 f"next look adds seed(s) {', '.join(map(str, more))}")
    return more
