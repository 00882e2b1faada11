"""Running trials: one trial in-process, and the executor seam that maps trials to records.

Every executor (``serial``, ``parallel``, ``auto``, ``ray``, each in its own module and registered by name in
``harness.execution.registry``) implements ``Executor.run``: it receives picklable ``TrialJob`` objects and
yields records as they complete; the driver alone writes the store and MLflow, so nothing else (store,
tracking, analysis) changes.
"""
from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Mapping, Protocol, Sequence

import torch

from harness.core.devices import device_name, resolve_device
from harness.measure.phases import PHASE_DETAIL, take_waited
from harness.measure.quiet import pause, quiet_room
from harness.core.numeric import unpinned
from harness.core.processes import exit_refused
from harness.core.record import SEED_BATCH, Status, Trial, TrialRecord, config_hash, task_step, task_value, usable
from harness.services.training_loop import NonFiniteLoss
from harness.services.seeding import seed_everything
from harness.tasks import Task, TrialContext, load_task
from harness.tasks.source import task_code
from harness.core.terminal import Console
from harness.tracking.environment import package_lock


class _Progress:
    """A progress bar inside a trial: every task trains inside one, so its span is the trial's training time."""

    def __init__(self, console: Console | None, total: int, description: str, share: float = 1.0) -> None:
        self.console, self.total, self.description, self.done, self.share = console, total, description, 0, share
        self.started = self.last = time.perf_counter()

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.last = time.perf_counter()
        pause()  # a timing of another trial of the run may be waiting to be taken alone
        if self.console:
            self.console.inner(self.description, self.done, self.total)

    def close(self) -> None:
        self.done = self.total
        self.last = time.perf_counter()

    @property
    def seconds(self) -> float:
        """From the bar's start to its last step (or its close), times the trial's share of the loop."""
        return (self.last - self.started) * self.share


class TrialRecorder:
    """The TrialLogger handed to tasks: keeps curves and details for the trial record."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console
        self.curves: dict[str, list[list[float]]] = {}
        self.details: dict[str, Any] = {}
        self.bars: list[_Progress] = []
        self.flops = 0.0

    def log_metric(self, key: str, value: float, step: int) -> None:
        value, step = task_value(key, value), task_step(key, step)
        if "loss" in key and not usable(value):
            raise NonFiniteLoss(f"non-finite {key} ({value}) at step {step}")
        self.curves.setdefault(key, []).append([step, value])

    def record(self, key: str, value: Any) -> None:
        self.details[key] = value

    def add_training_flops(self, flops: float) -> None:
        self.flops += flops

    def progress(self, total: int, description: str = "", share: float = 1.0) -> _Progress:
        bar = _Progress(self.console, total, description or "steps", share)
        self.bars.append(bar)
        return bar

    def phase_seconds(self) -> dict[str, float]:
        """Training (the spans of the trial's progress bars) and waiting (on another trial's cached
        artifact): the phase table splits a trial's wall time into these and the rest (data, evaluation)."""
        return {"train": round(sum(bar.seconds for bar in self.bars), 3), "waiting": round(take_waited(), 3),
                "train_flops": self.flops}


def _final_metrics(metrics: Mapping[str, float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, value in metrics.items():
        value = task_value(str(key), value)
        if "loss" in key and not usable(value):
            raise NonFiniteLoss(f"non-finite final {key} ({value})")
        out[str(key)] = value if usable(value) else None
    return out


class TrialTimeout(BaseException):
    """The trial ran past --trial-timeout. A BaseException, so that a task's own ``except Exception``
    cannot swallow it."""


@contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Raise TrialTimeout in this thread after ``seconds`` (a real-time alarm; only the main thread
    of a process receives signals, so elsewhere the trial runs unbounded)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TrialTimeout(f"the trial ran past --trial-timeout {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class TaskExit(BaseException):
    """A task called os._exit: in the process running the trials that would end the run unrecorded."""


@contextmanager
def _contained() -> Iterator[None]:
    """Around a task: ``os._exit`` (or ``posix._exit``, the same function) in this very process fails the
    trial instead of ending the run (a forked child still exits), and a task's ``os.chdir`` is undone."""
    cwd = os.getcwd()
    try:
        with exit_refused(TaskExit):
            yield
    finally:
        if os.getcwd() != cwd:
            os.chdir(cwd)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit: the task called sys.exit({exc.code!r}), which would have ended the whole run"
    if isinstance(exc, TaskExit):
        return f"TaskExit: the task called os._exit({exc.args[0]!r}), which would have ended the whole run unrecorded"
    return f"{type(exc).__name__}: {exc}".strip()


def execute_trial(
    task_cls: type[Task],
    trial: Trial,
    device: torch.device,
    cache_dir: Path,
    work_dir: Path,
    environment: Mapping[str, str],
    console: Console | None = None,
    timeout_s: float | None = None,
) -> TrialRecord:
    """Run one trial and return its record; task errors, exits and a timeout become a failed record,
    Ctrl-C propagates."""
    recorder = TrialRecorder(console)
    take_waited()  # what this process waited before this trial is not this trial's
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    status, error, metrics = Status.FINISHED, None, {}
    try:
        seed_everything(trial.seed, device)
        ctx = _context(task_cls, trial, device, cache_dir, work_dir, recorder)
        params = task_cls.validate_params(trial.params)
        with _deadline(timeout_s), _contained():
            metrics = _final_metrics(task_cls().run(params, ctx))
    except (Exception, SystemExit, TaskExit, TrialTimeout) as exc:  # a failing, exiting or stuck trial must not stop the others
        status, error = Status.FAILED, _reason(exc)
        recorder.details["traceback"] = traceback.format_exc(limit=8)
    elapsed = time.perf_counter() - clock
    if status is Status.FINISHED and timeout_s is not None and elapsed > timeout_s:  # it caught or ignored the alarm
        status, error, metrics = Status.FAILED, (f"TrialTimeout: the trial ran past --trial-timeout {timeout_s:g}s "
                                                 f"(it caught or ignored the alarm and ended after {elapsed:.1f}s)"), {}
    recorder.details[PHASE_DETAIL] = recorder.phase_seconds()
    return trial_record(
        trial, environment, started, time.perf_counter() - clock,
        status=status, error=error, metrics=metrics, curves=recorder.curves, details=recorder.details,
    )


def _context(task_cls: type[Task], trial: Trial, device: torch.device, cache_dir: Path, work_dir: Path,
             recorder: "TrialRecorder") -> TrialContext:
    work_dir.mkdir(parents=True, exist_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    return TrialContext(
        seed=trial.seed, device=device, logger=recorder, cache_dir=cache_dir, work_dir=work_dir, arm=trial.arm,
        task=task_cls.name, task_version=task_cls.version, trial_id=trial.trial_id,
    )


def batch_environment(environment: Mapping[str, str], trials: Sequence[Trial]) -> dict[str, str]:
    """A batched trial's environment: the seeds trained with it as one model, in order. Part of what the
    trial ran under (batched kernels reduce in another order), so reproduce reruns the same batch and the
    gate compares only trials of one batch size."""
    return {**environment, SEED_BATCH: ",".join(str(t.seed) for t in trials)}


def execute_seed_batch(
    task_cls: type[Task],
    trials: Sequence[Trial],
    device: torch.device,
    cache_dir: Path,
    work_dirs: Sequence[Path],
    environment: Mapping[str, str],
    console: Console | None = None,
    timeout_s: float | None = None,
) -> list[TrialRecord]:
    """Run the trials of one arm and point at several seeds as one batched model (``Task.run_seeds``), one
    record per seed; each seed's wall time is its share of the batch's. If the batch fails, its seeds run
    again one at a time, so one seed's failure is its own and the others keep their results (each record
    says why it ran alone). One trial, or a task that does not batch: ``execute_trial``."""
    if len(trials) == 1 or not task_cls.batches_seeds(task_cls.validate_params(trials[0].params)):
        return [execute_trial(task_cls, t, device, cache_dir, w, environment, console, timeout_s)
                for t, w in zip(trials, work_dirs)]
    recorders = [TrialRecorder(console if i == 0 else None) for i in range(len(trials))]
    take_waited()
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    try:
        contexts = [_context(task_cls, t, device, cache_dir, w, r) for t, w, r in zip(trials, work_dirs, recorders)]
        params = task_cls.validate_params(trials[0].params)
        if any(t.params != trials[0].params for t in trials):
            raise ValueError("a seed batch holds one arm at one point: its trials' params differ")
        with _deadline(timeout_s), _contained():
            results = [_final_metrics(m) for m in task_cls().run_seeds(params, contexts)]
        if len(results) != len(trials):
            raise RuntimeError(f"run_seeds returned {len(results)} results for {len(trials)} seeds")
    except (Exception, SystemExit, TaskExit, TrialTimeout) as exc:
        reason = _reason(exc)
        alone = [execute_trial(task_cls, t, device, cache_dir, w, environment, console, timeout_s)
                 for t, w in zip(trials, work_dirs)]
        return [r.with_details(seed_batch_failed=reason) for r in alone]
    share = (time.perf_counter() - clock) / len(trials)
    waited = take_waited() / len(trials)
    env = batch_environment(environment, trials)
    records = []
    for trial, recorder, metrics in zip(trials, recorders, results):
        recorder.details[PHASE_DETAIL] = {**recorder.phase_seconds(), "waiting": round(waited, 3)}
        recorder.details[SEED_BATCH] = {"seeds": [t.seed for t in trials], "wall_seconds": round(share * len(trials), 3)}
        records.append(trial_record(trial, env, started, share, metrics=metrics, curves=recorder.curves,
                                    details=recorder.details))
    return records


def trial_record(
    trial: Trial,
    environment: Mapping[str, str],
    started: datetime,
    wall_seconds: float,
    *,
    status: Status = Status.FINISHED,
    error: str | None = None,
    metrics: Mapping[str, float | None] | None = None,
    curves: Mapping[str, list[list[float]]] | None = None,
    details: Mapping[str, Any] | None = None,
) -> TrialRecord:
    """The one shape of a trial record, whether the task returned it or its worker died."""
    return TrialRecord(
        trial_id=trial.trial_id,
        trial=trial,
        point_label=trial.point_label,
        status=status,
        error=error,
        metrics=dict(metrics or {}),
        curves=dict(curves or {}),
        details=dict(details or {}),
        environment=dict(environment),
        packages=list(package_lock()),  # of the process that ran the trial (a Ray worker's own)
        started_at=started.isoformat(timespec="seconds"),
        wall_seconds=round(wall_seconds, 3),
    )


STEP_INTERVAL_S = 0.5  # a worker sends its trial's inner progress at most this often


class ThrottledSteps:
    """A worker's stand-in for the console: hands its trial's inner progress to ``send`` (a pipe to the
    driver, a Ray queue) at most every STEP_INTERVAL_S, and always the last step."""

    def __init__(self, send: Callable[[tuple[str, int, int]], None]) -> None:
        self.send, self.last = send, 0.0

    def inner(self, description: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= STEP_INTERVAL_S or done == total:
            self.last = now
            self.send((description, done, total))


@dataclass(frozen=True)
class TrialJob:
    """One trial as plain data: picklable, so a worker process or another machine can run it."""

    task: str  # a registered name or "package.module:Class": classes are looked up, not pickled
    trials: tuple[Trial, ...]  # one trial, or the seeds of one arm and point trained as one model (a seed batch)
    device: str
    cache_dir: Path  # absolute: every worker must find the per-seed artifacts the first one built
    work_dir: Path
    environment: dict[str, str]
    torch_threads: int  # the driver's intra-op threads: float reductions depend on the count
    index: int  # 1-based position among the suite's trials, for progress lines
    total: int
    timeout_s: float | None = None  # --trial-timeout
    quiet_dir: Path | None = None  # the run's room: its timings are taken alone (harness.measure.quiet)

    @property
    def trial(self) -> Trial:
        """The job's first trial: what progress lines name."""
        return self.trials[0]

    @property
    def title(self) -> str:
        """The trial's title, or a seed batch's: its arm and point at seeds a, b, ..."""
        if len(self.trials) == 1:
            return self.trial.title
        return f"{self.trial.title} +{len(self.trials) - 1} seed(s) batched"

    def work_dir_of(self, trial: Trial) -> Path:
        """Each trial's private folder (the job's work_dir is the run's work root)."""
        return self.work_dir / trial.trial_id

    def failed(self, started: datetime, wall_seconds: float, error: str, **details: Any) -> list[TrialRecord]:
        """A failed record for every trial of the job (its worker died, it was killed)."""
        share = wall_seconds / len(self.trials)
        return [trial_record(t, self.environment, started, share, status=Status.FAILED, error=error, details=details)
                for t in self.trials]


def execute_job(job: TrialJob, console: Console | None = None) -> list[TrialRecord]:
    """Run a job wherever it lands with the driver's thread count and numeric mode, so results match a
    serial run; a process whose torch ignores the mode's pins fails the job's trials instead of recording
    them. One record per trial of the job."""
    problem = unpinned()
    if problem:
        return job.failed(datetime.now(timezone.utc), 0.0, problem)
    torch.set_num_threads(job.torch_threads)
    with quiet_room(job.quiet_dir):
        return execute_seed_batch(
            load_task(job.task), job.trials, torch.device(job.device), job.cache_dir,
            [job.work_dir_of(t) for t in job.trials], job.environment, console, job.timeout_s,
        )


@dataclass(frozen=True)
class Capabilities:
    """What an executor does with trials, declared by the executor (its ``capabilities``) and read by the run
    instead of its name: what runs it undeclared (``capabilities_of``) is one trial at a time on this machine."""

    side_by_side: bool = False  # trials side by side in processes here: a timing is taken alone only in the quiet room
    remote: bool = False  # trials on workers of their own (a cluster's): never this machine's quiet room, and a
    # --trial-timeout is their own alarm's (the run does not move them into processes it can kill)
    in_workers: bool = False  # every trial in a worker process that is killed past --trial-timeout
    quiet_timing: bool = True  # its trials can take a timing alone (the run loop's quiet room, harness.measure.quiet)

    def __post_init__(self) -> None:
        if self.remote and self.quiet_timing:
            raise ValueError("a remote executor's trials cannot take a timing in this machine's quiet room "
                             "(declare quiet_timing=False)")


ONE_AT_A_TIME = Capabilities()


def capabilities_of(executor: Any) -> Capabilities:
    """What ``executor`` declares it does; an executor that declares nothing runs one trial at a time here."""
    return getattr(executor, "capabilities", ONE_AT_A_TIME)  # the registry refuses one of another type at start


class Executor(Protocol):
    """Maps jobs to records; the driver alone stores and mirrors them."""

    name: ClassVar[str]  # recorded as environment["executor"]

    @property
    def capabilities(self) -> Capabilities:
        """What it does with trials (a class attribute will do); read through ``capabilities_of``."""

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        """Yield one record per trial of each job as each job completes (jobs in any order)."""

    def close(self) -> None:
        """Release what the executor started (a local cluster)."""


def run_single(
    task_cls: type[Task],
    params: Mapping[str, Any],
    seed: int,
    device: str = "cpu",
    work_root: Path | None = None,
    arm: str = "adhoc",
) -> TrialRecord:
    """Run one configuration of a task outside any suite (tests, notebooks); returns the record."""
    torch_device = resolve_device(device)
    resolved = task_cls.validate_params(params).model_dump(mode="json")
    trial = Trial(
        suite="adhoc", profile="adhoc", task=task_cls.name, task_version=task_cls.version, arm=arm,
        arm_label=arm, seed=seed, point={}, params=resolved, code=task_code(task_cls.__module__).sha256,
    )
    root = Path(work_root) if work_root is not None else Path(tempfile.mkdtemp(prefix="harness-"))
    env = {"device": str(torch_device), "device_name": device_name(torch_device)}
    return execute_trial(
        task_cls, trial, torch_device, root / "cache", root / "work" / config_hash(trial.identity), env
    )
