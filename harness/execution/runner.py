"""One suite, end to end: expand trials, skip finished ones, execute, store, mirror to MLflow.

The caller holds the suite's writer lock (harness.locks): this process is the only one writing
the suite's run folder, cache and MLflow runs, so leftovers of a crash (temporary files, RUNNING
runs, a corrupt trial file) are safe to clean up here.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.verdicts import UNDETERMINED, evaluate_validity
from harness.analysis.run_results import load_results
from harness.devices import device_class, device_name
from harness.execution.executor import Executor, SerialExecutor, TrialJob
from harness.execution.trials import Trial, arm_label, expand_trials
from harness.record import TrialRecord
from harness.store import EXPANSION_KEY, REPORT_DIR, RunFolder, clean_stray_tmp, stale_note
from harness.suite.model import Suite
from harness.suite.points import sweep_points
from harness.suite.stored import SCHEMA_VERSION
from harness.tasks import Task
from harness.terminal import Console
from harness.tracking.environment import environment, provenance_texts, save_diff, task_environment
from harness.tracking.mlflow_tracker import (
    RESULTS_ID_TAG,
    MlflowTracker,
    TrialRun,
    is_mirrored,
    marker_path,
    open_parents,
    results_id,
)


@dataclass
class SuiteOutcome:
    suite: Suite
    run_dir: Path
    records: list[TrialRecord] = field(default_factory=list)
    ran: int = 0
    skipped: int = 0
    interrupted: bool = False
    parent_run_id: str | None = None
    wall_seconds: float = 0.0
    mlflow_seconds: float = 0.0

    @property
    def failed(self) -> list[TrialRecord]:
        return [r for r in self.records if not r.finished]


def suite_metadata(suite: Suite, device: torch.device) -> dict[str, Any]:
    """suite.json: the resolved suite plus the task's metric and plot declarations and the device."""
    arms = {}
    for arm in suite.arms.values():
        arms[arm.name] = {
            "params": arm.params,
            "sweep": arm.sweep,
            "labels": [arm_label(arm, p) for p in sweep_points(arm.sweep)],
        }
    meta = suite.describe()
    meta.update(schema=SCHEMA_VERSION, arms=arms, design=suite.locked_design(), **task_declarations(suite.task),
                **device_description(device))
    meta[EXPANSION_KEY] = [t.trial_id for t in expand_trials(suite)]
    return meta


def task_declarations(task: type[Task]) -> dict[str, Any]:
    """What suite.json says about the task's metrics and plots (analysis reads nothing else)."""
    return {
        "metrics": {m.name: m.as_stored() for m in task.metrics},
        "detail_scatters": [asdict(scatter) for scatter in task.detail_scatters],
        "pareto_views": [asdict(view) for view in task.pareto_views],
    }


def device_description(device: torch.device) -> dict[str, str]:
    return {"device": str(device), "device_class": device_class(device), "device_name": device_name(device)}


def run_suite(
    suite: Suite,
    results_root: Path,
    device: torch.device,
    tracker: MlflowTracker | None,
    console: Console,
    resume: bool = True,
    executor: Executor | None = None,
    trial_timeout: float | None = None,
    tags: dict[str, str] | None = None,
) -> SuiteOutcome:
    """Run every unfinished trial of a suite (each failed past ``trial_timeout`` seconds, when given);
    Ctrl-C stops after storing what finished. ``tags`` go on its MLflow runs (a tuning run's ``tune``)."""
    clock = time.perf_counter()
    mlflow_before = tracker.seconds if tracker else 0.0
    folder = RunFolder(results_root, suite.name, suite.profile)
    outcome = SuiteOutcome(suite=suite, run_dir=folder.path)
    clean_stray_tmp(folder.path, results_root / "cache" / suite.name, skip=folder.path / REPORT_DIR)
    clean_stray_tmp(folder.path / REPORT_DIR, min_age=300)
    meta = suite_metadata(suite, device)
    folder.save_suite(meta)
    folder.mark_incomplete()
    env = environment(device)  # the git state of the harness checkout: a suite's own tree is never read
    env.update(task_environment(suite.task))
    save_diff(folder.path)
    runner = executor or SerialExecutor()
    env["executor"] = runner.name

    records, corrupt = folder.load_trials()
    for path, reason in corrupt:
        console.line(f"warning: {path.with_suffix('')} is corrupt ({reason}): moved to {path.name}; its trial reruns")
    kept = folder.resumable(records) if resume else {}
    mirror = _Mirror(tracker, folder, meta, env, suite, tags or {}) if tracker else None
    seeds = list(suite.seeds)
    try:
        while True:
            look = replace(suite, seeds=seeds)
            trials = expand_trials(look)
            _set_aside_superseded(trials, records, kept, folder, env, console)
            if seeds == list(suite.seeds):  # the first look: trials of its seeds left by another expansion
                current = {t.trial_id for t in trials}
                note = stale_note(sum(1 for i, r in records.items() if i not in current and r.seed in seeds),
                                  folder.path)
                if note:
                    console.line(note)
            if meta["seeds"] != seeds:
                meta["seeds"], meta[EXPANSION_KEY] = seeds, [t.trial_id for t in trials]
                folder.save_suite(meta)
            done = [kept[t.trial_id] for t in trials if t.trial_id in kept]
            pending = [t for t in trials if t.trial_id not in kept]
            counted = {r.trial_id for r in outcome.records}
            found = [r for r in done if r.trial_id not in counted]
            outcome.records += found
            console.stored(len(found))
            if mirror:
                mirror.stored(done, pending, outcome)
            jobs = _jobs(look, trials, pending, device, results_root, folder, env, trial_timeout)
            for record in runner.run(jobs, console):
                trial_file = folder.save_trial(record)
                kept[record.trial_id] = record
                outcome.records.append(record)
                outcome.ran += 1
                status = "ok" if record.finished else f"FAILED: {record.error}"
                index = next(i for i, t in enumerate(trials, 1) if t.trial_id == record.trial_id)
                console.trial_finished(suite.name, index, len(trials), record.title, status, record.wall_seconds)
                if mirror:
                    mirror.finished(record, trial_file, outcome)
            more = _next_look(look, folder, console)
            if not more:
                break
            seeds = seeds + more
        if {t.trial_id for t in trials} <= {r.trial_id for r in outcome.records}:
            folder.mark_complete()  # every trial stored: only now may a reader take the folder for a result
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        console.close()
        outcome.skipped = len(outcome.records) - outcome.ran
        outcome.wall_seconds = time.perf_counter() - clock
        outcome.mlflow_seconds = (tracker.seconds - mlflow_before) if tracker else 0.0
    return outcome


class _Mirror:
    """MLflow's copy of the run: one parent run for this invocation (started only when something is to
    be logged) and exactly one complete child run per stored trial."""

    def __init__(self, tracker: MlflowTracker, folder: RunFolder, meta: dict[str, Any], env: dict[str, str],
                 suite: Suite, tags: dict[str, str]) -> None:
        self.tracker, self.folder, self.meta, self.env, self.suite = tracker, folder, meta, env, suite
        self.folder_id = results_id(folder.path)
        self.tags = {**tags, RESULTS_ID_TAG: self.folder_id}
        self.unclosed: list[str] | None = None
        self.present: dict[str, list[TrialRun]] | None = None
        self.reconciled: set[str] = set()

    def stored(self, done: list[TrialRecord], pending: list[Trial], outcome: SuiteOutcome) -> None:
        """Before a look runs: mirror its stored trials that MLflow lacks, start the parent if needed."""
        tracker, folder = self.tracker, self.folder
        if self.unclosed is None:
            self.unclosed = open_parents(folder.path, tracker)
        fresh = [r for r in done if r.trial_id not in self.reconciled]
        unmirrored = [r for r in fresh if not is_mirrored(folder.path, r.trial_id, tracker)]
        if not (pending or unmirrored or self.unclosed):  # else MLflow is not even imported
            self.reconciled.update(r.trial_id for r in fresh)
            return
        if self.present is None:
            tracker.close_parents(self.unclosed)
            tracker.close_stale_parents(self.suite.name, self.suite.profile, self.folder_id)
            self.present = tracker.trial_runs(self.suite.name, self.suite.profile, self.folder_id)
        if outcome.parent_run_id is None and (pending or any(not _mirrored(r, self.present) for r in fresh)):
            run_name = f"{self.suite.name}/{self.suite.profile} {time.strftime('%Y-%m-%d %H:%M:%S')}"
            outcome.parent_run_id = tracker.start_parent(self.meta, self.env, run_name, folder.path,
                                                         extra_tags=self.tags,
                                                         texts=provenance_texts())
        _reconcile(tracker, folder, outcome.parent_run_id, fresh, self.present, self.tags)
        self.reconciled.update(r.trial_id for r in fresh)

    def finished(self, record: TrialRecord, trial_file: Path, outcome: SuiteOutcome) -> None:
        if outcome.parent_run_id is None:
            return
        self.tracker.delete_runs(r.run_id for r in (self.present or {}).pop(record.trial_id, []))  # older attempts
        self.tracker.log_trial(
            outcome.parent_run_id, record, trial_file, marker_path(self.folder.path, record.trial_id),
            work_dir=self.folder.path / "work" / record.trial_id, extra_tags=self.tags,
        )
        self.reconciled.add(record.trial_id)


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


def _why_superseded(record: TrialRecord, trial: Trial, env: dict[str, str]) -> str:
    recorded = record.environment.get("task_code_sha256")
    if record.task_version != trial.task_version:
        return f"task version ({record.task_version}, now {trial.task_version})"
    if recorded is None:
        return "code (recorded before the task's code was part of a trial's id)"
    if recorded != env.get("task_code_sha256"):
        return "task code (its source changed since they ran)"
    return "params"


def _next_look(look: Suite, folder: RunFolder, console: Console) -> list[int]:
    """The seeds of the next look: none when the design is fixed or complete or every claim is decided."""
    if look.sequential is None or len(look.seeds) >= look.sequential.max_seeds:
        return []
    results = load_results(folder.path)
    undecided = [c for c in evaluate_claims(results) if c.open]
    validity_open = evaluate_validity(results).status == UNDETERMINED
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


def _jobs(
    suite: Suite, trials: list[Trial], pending: list[Trial], device: torch.device, results_root: Path,
    folder: RunFolder, env: dict[str, str], timeout_s: float | None = None,
) -> list[TrialJob]:
    """Pending trials as picklable jobs, seeds outermost: the first trial of a seed builds its
    cached artifacts while the cache lock holds the others of that seed."""
    cache_dir = (results_root / "cache" / suite.name).absolute()
    work_root = (folder.path / "work").absolute()
    position = {t.trial_id: i for i, t in enumerate(trials, 1)}
    threads = torch.get_num_threads()
    return [
        TrialJob(
            task=suite.task_name, trial=trial, device=str(device), cache_dir=cache_dir,
            work_dir=work_root / trial.trial_id, environment=env, torch_threads=threads,
            index=position[trial.trial_id], total=len(trials), timeout_s=timeout_s,
        )
        for trial in pending
    ]


def _mirrored(record: TrialRecord, present: dict[str, list[TrialRun]]) -> bool:
    return any(run.mirrors(record) for run in present.get(record.trial_id, []))


def _reconcile(
    tracker: MlflowTracker, folder: RunFolder, parent_id: str | None, done: list[dict],
    present: dict[str, list[TrialRun]], tags: dict[str, str],
) -> None:
    """Make MLflow hold exactly one complete run per stored finished trial: keep the first complete
    run, delete the others (left RUNNING or empty by a crash, or older attempts), log the missing."""
    for record in done:
        runs = present.pop(record.trial_id, [])
        keep = next((run for run in runs if run.mirrors(record)), None)
        tracker.delete_runs(run.run_id for run in runs if run is not keep)
        marker = marker_path(folder.path, record.trial_id)
        if keep is not None:
            tracker.write_marker(marker, keep.run_id)
        else:
            tracker.log_trial(parent_id, record, folder.trial_path(record.trial_id), marker,
                              extra_tags=tags)
