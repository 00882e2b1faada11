"""Plan a reproduction (resolve the target, rebuild its trials, diff the environment: nothing is
written) and run it (rerun every trial into a new results folder, compare, log to MLflow).

A reproduction reruns each trial exactly as recorded: its task, version, arm, seed and resolved
params rebuild the same ``Trial`` (hence the same trial id), on the recorded device type and
with the recorded torch thread count (float reductions depend on it). It builds every cached
artifact afresh in its own folder, so nothing the original produced enters the rerun.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Collection

import torch
from pydantic import ValidationError

from harness.analysis.compare.environment_diff import Difference, environment_differences, package_differences
from harness.core.devices import device_class, resolve_device
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.execution.serial import SerialExecutor
from harness.execution.loop import JobSettings, Look, run_trials
from harness.execution.runner import on_device, with_declarations
from harness.execution.trials import Trial
from harness.core.files import unused_path
from harness.core.record import TrialRecord
from harness.core.stored_fields import as_stored
from harness.reproduction.metric_checks import MetricComparison, compare_metrics
from harness.reproduction.mlflow_source import check_store, load_run, looks_like_run_id, parents_of
from harness.reproduction.sources import Original, ReproduceError, load_path
from harness.store import RunFolder, write_json_atomic
from harness.suite.stored import StoredArm, StoredSuite
from harness.tasks import Task, UnknownTaskError, load_received_task
from harness.core.terminal import Console
from harness.tracking.environment import environment, package_lock, task_environment
from harness.tracking.mirror import ReproductionMirror
from harness.tracking.mlflow_tracker import (
    MlflowTracker,
    TrackingError,
    check_reachable,
    default_tracking_uri,
    missing_store,
)
from harness.tracking.sqlite_store import confined_tracker

RESULTS_DEFAULT = Path("results")
REPRODUCTIONS_DIR = "reproductions"
SUMMARY_FILE = "reproduction.json"


@dataclass
class Plan:
    """Everything decided before the first trial runs."""

    original: Original
    tasks: dict[str, type[Task]]  # each recorded task name -> its class here (registered, or a --task-path)
    trials: list[Trial]
    threads: dict[str, int]  # trial id -> torch threads to run it with (the recorded count)
    device: torch.device
    recorded_device: str
    device_note: str | None
    out_root: Path
    tracker: MlflowTracker | None
    here: dict[str, str]
    environment_differences: list[Difference]
    package_differences: list[Difference]
    notes: list[str] = field(default_factory=list)  # what checking the store changed (artifact locations)
    seed_batch: int | None = None  # rerun in seed batches of this size (a what-if); None: as each trial was recorded

    @property
    def batches(self) -> dict[str, tuple[int, ...]]:
        """Trial id -> the seeds of the batch it was trained in: a batched trial reruns in the same batch
        (none with ``seed_batch`` set: the rerun then makes its own batches)."""
        if self.seed_batch is not None:
            return {}
        return {t.trial_id: r.seed_batch for t, r in zip(self.trials, self.original.records) if r.seed_batch}

    @property
    def same_device_class(self) -> bool:
        """Only then must every non-speed metric come back bit-identical."""
        return device_class(torch.device(self.recorded_device)) == device_class(self.device)


@dataclass
class ReproductionOutcome:
    run_dir: Path
    records: list[TrialRecord]
    comparison: MetricComparison
    parent_run_id: str | None
    seconds: float
    interrupted: bool
    summary_path: Path

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if not r.finished]


def plan_reproduction(
    target: str, tracking_uri: str | None, results: Path | None, out: Path | None, device_choice: str, mlflow: bool,
    task_paths: Collection[str] = (),
) -> Plan:
    """Resolve the target and everything the rerun needs; raises ReproduceError, writes nothing. The records'
    tasks are resolved only as registered tasks or ``task_paths`` (``--task-path``): a received folder's
    records are text someone else wrote, and nothing they name is imported otherwise."""
    original = _load(target, tracking_uri, results)
    tasks = received_tasks(original.records, task_paths)
    finished = [r for r in original.records if r.finished]
    if not finished:
        raise ReproduceError(f"{original.description}: no finished trial to reproduce (failed trials have no result)")
    original.skipped = len(original.records) - len(finished)
    original.records = finished
    trials = rebuild_trials(original.records, tasks)
    root = results or original.results_root or RESULTS_DEFAULT
    recorded_device = TrialEnvironment.of(original.records[0].environment).device or "cpu"
    device, note = _choose_device(device_choice, recorded_device)
    threads = {r.trial_id: _threads(r) for r in original.records}
    if len(set(threads.values())) == 1:  # this process's view (device name, environment) matches the rerun
        torch.set_num_threads(next(iter(threads.values())))
    out_root = out or unused_path(root / REPRODUCTIONS_DIR, f"{original.suite}-{original.profile}")
    if out_root.exists() and any(out_root.iterdir()):
        raise ReproduceError(f"--out {out_root} is not empty; a reproduction never writes over results")
    notes: list[str] = []
    tracker = _tracker(original, tracking_uri, root, notes) if mlflow else None
    here = environment(device)
    for task in sorted({r.task for r in original.records}):
        here.update(task_environment(tasks[task]))
    versions = {r.task: tasks[r.task].version for r in original.records}
    return Plan(
        original=original, tasks=tasks, trials=trials, threads=threads, device=device, recorded_device=recorded_device,
        device_note=note, out_root=out_root, tracker=tracker, here=here,
        environment_differences=environment_differences(original.records, here, versions),
        package_differences=package_differences(original.records, package_lock()), notes=notes,
    )


def received_tasks(records: list[TrialRecord], task_paths: Collection[str]) -> dict[str, type[Task]]:
    """Each task the records name, resolved as a registered task or a trusted path, before any trial is rebuilt."""
    tasks = {}
    for record in records:
        if record.task not in tasks:
            try:
                tasks[record.task] = load_received_task(record.task, task_paths)
            except UnknownTaskError as exc:
                raise ReproduceError(f"trial {record.title}: {exc}") from None
    return tasks


def rebuild_trials(records: list[TrialRecord], tasks: dict[str, type[Task]]) -> list[Trial]:
    """The recorded trials, each checked against its task as it is here (``received_tasks``)."""
    trials = []
    for record in records:
        try:
            tasks[record.task].validate_params(record.params)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "params"
            raise ReproduceError(
                f"trial {record.title}: task {record.task!r} here does not accept its recorded params "
                f"({where}: {error['msg']})"
            ) from None
        trials.append(Trial(
            suite=record.suite, profile=record.profile, task=record.task,
            task_version=record.task_version, arm=record.arm, arm_label=record.arm_label,
            seed=record.seed, point=dict(record.point), params=dict(record.params),
            code=TaskEnvironment.of(record.environment).task_code_sha256,  # the recorded id; a code change shows below
        ))
    return trials


def run_reproduction(plan: Plan, console: Console) -> ReproductionOutcome:
    """Rerun every trial into ``plan.out_root``, compare with the record, log it linked to the original."""
    clock = time.perf_counter()
    original = plan.original
    folder = RunFolder(plan.out_root, original.suite, original.profile)
    meta = _suite_meta(plan)
    folder.save_suite(meta)
    mirror = None
    if plan.tracker is not None:
        mirror = ReproductionMirror(
            plan.tracker,
            {"harness.reproduction_of": original.linked_runs, "harness.reproduction_source": original.description[:5000]},
            lambda record: {"harness.reproduction_of": original.run_ids.get(record.trial_id, "")},
        )
    console.expect(len(plan.trials))
    ran = run_trials([Look(plan.trials, StoredSuite.from_stored(meta))], SerialExecutor(), folder,
                     [mirror] if mirror else [], console, JobSettings(plan.device, plan.out_root, plan.here,
                                                                      threads=plan.threads, batches=plan.batches,
                                                                      seed_batch=plan.seed_batch or 1))
    comparison = compare_metrics(original.records, ran.records, lambda task: metric_kinds(plan.tasks.get(task)))
    outcome = ReproductionOutcome(folder.path, ran.records, comparison, mirror.run_id if mirror else None,
                                  time.perf_counter() - clock, ran.interrupted, plan.out_root / SUMMARY_FILE)
    write_json_atomic(outcome.summary_path, summary(plan, outcome))
    if mirror is not None:
        mirror.finish(
            _run_status(outcome),
            {"reproduction.compared": len(comparison.exact), "reproduction.differing": len(comparison.differing),
             "reproduction.seconds": outcome.seconds},
            [outcome.summary_path],
            {"harness.reproduction.result": result_word(plan, outcome),
             "harness.reproduction.differing_metrics": ", ".join(differing_keys(comparison))[:5000]},
        )
    return outcome


def result_word(plan: Plan, outcome: ReproductionOutcome) -> str:
    if outcome.interrupted:
        return "interrupted"
    if outcome.comparison.identical:
        return "identical"
    return "differs" if plan.same_device_class else "differs (other device class)"


def regressed(plan: Plan, outcome: ReproductionOutcome) -> bool:
    """Exit 1: a trial failed here, or a metric differs on the same device class."""
    return bool(outcome.failed) or (plan.same_device_class and not outcome.comparison.identical)


def differing_keys(comparison: MetricComparison) -> list[str]:
    keys: list[str] = []
    for check in comparison.differing:
        if check.key not in keys:
            keys.append(check.key)
    return keys


def summary(plan: Plan, outcome: ReproductionOutcome) -> dict[str, Any]:
    """reproduction.json: what was rerun, what differs, and the verdict."""
    original = plan.original
    return {
        "schema": 1,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "original": {
            "description": original.description, "suite": original.suite, "profile": original.profile,
            "tracking_uri": original.tracking_uri, "runs": original.linked_runs, "trial_runs": original.run_ids,
            "incomplete": bool(original.incomplete),
        },
        "reproduction": {
            "results": str(outcome.run_dir), "tracking_uri": plan.tracker.uri if plan.tracker else None,
            "run_id": outcome.parent_run_id, "seconds": round(outcome.seconds, 3), "interrupted": outcome.interrupted,
        },
        "device": {"recorded": plan.recorded_device, "here": str(plan.device), "same_class": plan.same_device_class,
                   "note": plan.device_note},
        "result": result_word(plan, outcome),
        "environment_differences": [_difference(d) for d in plan.environment_differences],
        "package_differences": [_difference(d) for d in plan.package_differences],
        "metrics": outcome.comparison.as_dict(),
    }


def _load(target: str, tracking_uri: str | None, results: Path | None) -> Original:
    path = Path(target)
    if path.exists():
        return load_path(path)
    if not looks_like_run_id(target):
        raise ReproduceError(f"{target}: no such file or folder, and not an MLflow run id (32 hex digits)")
    uri = tracking_uri or default_tracking_uri(results or RESULTS_DEFAULT)
    check_store(uri)
    try:
        check_reachable(uri)
    except TrackingError as exc:
        raise ReproduceError(str(exc)) from None
    return load_run(MlflowTracker(uri), target)


def _tracker(original: Original, tracking_uri: str | None, root: Path, notes: list[str]) -> MlflowTracker:
    """Log next to the original where this user chose its store: the --tracking-uri (or default
    store) a run id was found in, or the results folder's own ``mlflow.db``. A folder's markers may
    name any server (a folder someone sent you names theirs), so they are never followed: the
    reproduction, with this checkout's git diff, then goes to the folder's own store."""
    uri = tracking_uri or (original.tracking_uri if _chosen_here(original) else None) or default_tracking_uri(root)
    if tracking_uri is None and uri == original.tracking_uri and missing_store(uri) is not None:
        uri = default_tracking_uri(root)  # results copied from elsewhere: their store is not here
    try:
        check_reachable(uri)
    except TrackingError as exc:
        raise ReproduceError(str(exc)) from None
    if tracking_uri is None and uri.startswith("sqlite:///"):
        # A results folder's own store: checked and pointed at its own mlartifacts, as by `harness run`
        # (a copied or received folder's store names the sender's locations).
        tracker, store = confined_tracker(Path(uri[len("sqlite:///"):]).parent)
        store.lock.release()  # a reproduction writes only new runs: MLflow's own locking suffices
        notes.extend(store.notes)
    else:
        tracker = MlflowTracker(uri, artifact_root=root / "mlartifacts")
    try:
        tracker.check_destination(original.suite)
    except TrackingError as exc:
        raise ReproduceError(str(exc)) from None
    if original.run_ids and not original.parent_run_ids and uri == original.tracking_uri:
        original.parent_run_ids = parents_of(tracker, list(original.run_ids.values()))
    return tracker


def _chosen_here(original: Original) -> bool:
    """Whether the original's store is one this user named: found by run id, or the folder's own."""
    own = original.results_root is not None and original.tracking_uri == default_tracking_uri(original.results_root)
    return original.target_run_id is not None or own


def _choose_device(choice: str, recorded: str) -> tuple[torch.device, str | None]:
    """The recorded device type by default; a CUDA record on a machine without CUDA runs on the CPU."""
    if choice == "recorded":
        if recorded.startswith("cuda") and not torch.cuda.is_available():
            return torch.device("cpu"), f"recorded on {recorded}, no CUDA here: rerunning on cpu"
        choice = "cuda" if recorded.startswith("cuda") else "cpu"
    try:
        return resolve_device(choice), None
    except ValueError as exc:
        raise ReproduceError(str(exc)) from None


def _threads(record: TrialRecord) -> int:
    try:
        return max(1, int(TrialEnvironment.of(record.environment).torch_threads))
    except ValueError:
        return torch.get_num_threads()


def _suite_meta(plan: Plan) -> dict[str, Any]:
    """The original suite.json with this device, or (a lone trial JSON) what the records tell."""
    meta = plan.original.suite_meta
    if meta is not None:
        return as_stored(on_device(StoredSuite.from_stored(meta), plan.device))
    records = plan.original.records
    first = records[0]
    labels: dict[str, list[str]] = {}
    for record in records:
        labels.setdefault(record.arm, [])
        if record.arm_label not in labels[record.arm]:
            labels[record.arm].append(record.arm_label)
    stored = StoredSuite(suite=first.suite, profile=first.profile, task=first.task, task_version=first.task_version,
                         seeds=tuple(sorted({r.seed for r in records})),
                         arms={arm: StoredArm(tuple(names)) for arm, names in labels.items()})
    return as_stored(on_device(with_declarations(stored, plan.tasks[first.task]), plan.device))


def _run_status(outcome: ReproductionOutcome) -> str:
    if outcome.interrupted:
        return "KILLED"
    return "FAILED" if outcome.failed else "FINISHED"


def _difference(difference: Difference) -> dict[str, str]:
    return {"key": difference.key, "recorded": difference.recorded, "here": difference.here}


def metric_kinds(declared: type[Task] | None) -> Callable[[str], str]:
    """key -> declared kind; an undeclared key (or a task the plan did not resolve) must match exactly."""
    if declared is None:
        return lambda key: "undeclared"

    def kind(key: str) -> str:
        metric = declared.metric_for(key)
        return metric.kind if metric is not None else "undeclared"

    return kind
