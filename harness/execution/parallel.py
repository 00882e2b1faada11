"""Independent trials side by side in worker processes on this machine, and every trial of a run with
``--trial-timeout`` in one (a process can be killed; a task can ignore or catch an in-process alarm).

Small models rarely keep two intra-op threads busy, so on a machine with more cores than a trial
uses, trials running side by side (each process pinned to the same thread count a serial run
would use) finish sooner at bit-identical results. Each worker is a long-lived spawned process
that runs one job at a time and streams its inner progress back over its pipe; a worker that
dies fails only its own trial and is replaced. The driver alone stores and mirrors records.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing.connection import Connection, wait
from typing import Any, ClassVar, Iterator, Sequence

import torch

from harness.execution.executor import Capabilities, Executor, ThrottledSteps, TrialJob, capabilities_of, execute_job
from harness.execution.registry import option
from harness.core.record import TrialRecord
from harness.core.terminal import Console

WORTH_WORKERS_S = 5.0  # a trial of this much CPU time repays starting worker processes (a few seconds each)
WORTH_WORKERS_LEFT = 4  # ... and so do this many times as much left in the look, at the last trial's CPU time
KILL_GRACE_S = 5.0  # past --trial-timeout, the worker's own alarm gets this long to fail the trial before the kill


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def side_by_side_workers(threads_per_trial: int, cores: int | None = None) -> int:
    """How many trials fit side by side: one per ``threads_per_trial`` cores; below 2 it does not help."""
    return (cores or usable_cores()) // max(threads_per_trial, 1)


def _serve(conn: Connection) -> None:
    """A worker's loop: run each job it is sent, reply with its record, stop on None or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the driver stops us
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(("began", None))  # from now on the trial's --trial-timeout runs (not while the worker starts)
        conn.send(("records", execute_job(job, ThrottledSteps(lambda step: conn.send(("step", step))))))  # type: ignore[arg-type]


@dataclass
class _Worker:
    process: Any
    conn: Connection
    job: TrialJob | None = None
    started: datetime | None = None
    clock: float = 0.0
    began: float | None = None  # when the worker said it began the job (perf_counter): its timeout counts from then

    @classmethod
    def spawn(cls) -> "_Worker":
        context = multiprocessing.get_context("spawn")  # fork would copy the driver's torch thread pools
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs,), name="harness-trial-worker", daemon=True)
        process.start()
        theirs.close()
        return cls(process, ours)

    def submit(self, job: TrialJob) -> None:
        self.job, self.started, self.clock, self.began = job, datetime.now(timezone.utc), time.perf_counter(), None
        self.conn.send(job)

    def stop(self, kill: bool) -> None:
        if kill and self.process.is_alive():
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


@dataclass
class ProcessExecutor:
    """Runs up to ``workers`` jobs at once, each in its own worker process (started on first use).

    With ``inline_below_s`` set (the ``auto`` executor), trials run one at a time in this process
    until one takes that many CPU seconds, or the look's trials left would take ``WORTH_WORKERS_LEFT``
    times as much at the last one's: a few short trials never repay starting the workers, many do."""

    workers: int
    inline_below_s: float | None = None
    name: ClassVar[str] = "parallel"
    _pool: list[_Worker] = field(default_factory=list, init=False)
    _warned: bool = field(default=False, init=False)

    @property
    def capabilities(self) -> Capabilities:
        """Side by side here; every trial in a worker once it no longer runs them in this process first."""
        return Capabilities(side_by_side=True, in_workers=self.inline_below_s is None)

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        """Keep every worker busy, in job order (each seed's first trial first), and yield records as they complete."""
        waiting = list(jobs)
        while waiting and self.inline_below_s is not None:
            job = waiting.pop(0)
            console.trial_started(job.trial.suite, job.index, job.total, job.title)
            cpu = time.process_time()
            records = execute_job(job, console)
            spent = time.process_time() - cpu  # CPU, not wall time: on a loaded machine short trials look long
            if spent >= self.inline_below_s or spent * len(waiting) >= WORTH_WORKERS_LEFT * self.inline_below_s:
                self.inline_below_s = None  # from now on, side by side
            yield from records
        if not waiting:
            return
        concurrent = min(len(waiting), self.workers)
        loaded = concurrent > 1 and jobs[0].quiet_dir is None  # in a quiet room every timing is taken alone
        if loaded and not self._warned:
            self._warned = True
            console.line(f"parallel: {concurrent} trials at a time, {jobs[0].torch_threads} torch thread(s) each; "
                         "speed figures are measured under load")
        waiting.reverse()
        finished_cleanly = False
        try:
            while True:
                busy = sum(w.job is not None for w in self._pool)
                while len(self._pool) < min(concurrent, busy + len(waiting)):  # started, or replaced, when needed
                    self._pool.append(_Worker.spawn())
                for worker in self._pool:
                    if worker.job is None and waiting:
                        job = waiting.pop()
                        console.trial_started(job.trial.suite, job.index, job.total, job.title)
                        worker.submit(job)
                busy = [w for w in self._pool if w.job is not None]
                if not busy:
                    break
                ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=_next_kill(busy))
                for worker in busy:
                    records = self._collect(worker, ready, console) or self._kill_if_overdue(worker)
                    for record in records or ():
                        if loaded:
                            record = record.with_details(speed_measured_under_load=True, concurrent_trials=concurrent)
                        yield record
            finished_cleanly = True
        finally:
            if not finished_cleanly:  # Ctrl-C or a failing store: no trial keeps running behind the driver
                self._stop(kill=True)

    def _collect(self, worker: _Worker, ready: list[Any], console: Console) -> list[TrialRecord] | None:
        """The worker's records once it replies, failed records if it died; None while it runs."""
        job = worker.job
        assert job is not None
        if worker.conn in ready or worker.conn.poll():
            try:
                while worker.conn.poll():
                    kind, payload = worker.conn.recv()
                    if kind == "step":
                        console.inner(*payload)
                    elif kind == "began":
                        worker.began = time.perf_counter()
                    else:
                        worker.job = None
                        return payload
                return None
            except (EOFError, OSError):
                pass  # it died mid-message: reported below
        if worker.process.is_alive():
            return None
        code = worker.process.exitcode
        self._pool.remove(worker)
        worker.conn.close()
        return job.failed(worker.started or datetime.now(timezone.utc), time.perf_counter() - worker.clock,
                          f"the worker process died (exit code {code}) while running this trial")

    def _kill_if_overdue(self, worker: _Worker) -> list[TrialRecord] | None:
        """Failed records for a job past its --trial-timeout (and the grace its own alarm had), its worker
        killed; None while it has time left."""
        job = worker.job
        if job is None or job.timeout_s is None or worker.began is None:
            return None
        if time.perf_counter() - worker.began < job.timeout_s + KILL_GRACE_S:
            return None
        worker.stop(kill=True)
        self._pool.remove(worker)
        return job.failed(
            worker.started or datetime.now(timezone.utc), time.perf_counter() - worker.clock,
            f"TrialTimeout: the trial ran past --trial-timeout {job.timeout_s:g}s and did not stop (it ignored "
            "or caught the alarm): its process was killed",
        )

    def _stop(self, kill: bool) -> None:
        for worker in self._pool:
            worker.stop(kill)
        self._pool.clear()

    def close(self) -> None:
        """Stop the worker processes."""
        self._stop(kill=False)


def _next_kill(busy: list[_Worker]) -> float | None:
    """Seconds until the first busy worker's trial is overdue (see ``_kill_if_overdue``); None: no limit."""
    now = time.perf_counter()
    due = [w.began + w.job.timeout_s + KILL_GRACE_S - now for w in busy
           if w.job and w.job.timeout_s is not None and w.began is not None]
    return max(0.0, min(due)) if due else None


def bounded(executor: Executor, timeout_s: float | None) -> Executor:
    """The executor of a run with ``--trial-timeout``: every trial in a worker process that is killed once the
    trial runs past the limit, since a task can ignore or catch the in-process alarm but cannot outlive its
    process. The executor itself without a limit, when it already runs every trial in a worker it kills, or
    when its trials run on workers of their own (Ray's keep the alarm, and a trial finished past the limit is
    failed, ``execute_trial``)."""
    declared = capabilities_of(executor)
    if timeout_s is None or declared.remote or declared.in_workers:
        return executor
    return ProcessExecutor(executor.workers if isinstance(executor, ProcessExecutor) else 1)


@dataclass(frozen=True)
class ParallelOptions:
    workers: int | None = option("Trials side by side in worker processes [default: cores // threads].", minimum=1)


class Parallel:
    """The registered ``parallel`` executor: every trial in a worker process, ``workers`` at a time."""

    name: ClassVar[str] = ProcessExecutor.name
    Options: ClassVar[type] = ParallelOptions

    @staticmethod
    def slots(options: ParallelOptions, device: torch.device, threads: int) -> int:
        return options.workers or max(side_by_side_workers(threads), 1)

    @staticmethod
    def start(options: ParallelOptions, slots: int) -> ProcessExecutor:
        return ProcessExecutor(slots)

