"""Trials as Ray tasks: a local cluster on this machine, or an existing cluster at an address.

Workers only compute: each runs ``execute_job`` (its inner progress sent back through a queue
actor, to the driver's console) and returns its record, and the driver stores
and mirrors records as they complete, so there is one writer of the results store and MLflow
and a Ctrl-C keeps everything already returned. Ray is an optional extra (``harness[ray]``).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, ClassVar, Iterator, Sequence

import torch

from harness.execution.executor import STEP_INTERVAL_S, Capabilities, ThrottledSteps, TrialJob, execute_job
from harness.execution.registry import ExecutorError, option
from harness.core.numeric import worker_environment
from harness.core.files import private_folder
from harness.core.record import TrialRecord
from harness.core.terminal import Console


INSTALL_HINT = "pip install 'harness[ray]'"
RAY_FOLDER = "harness-ray"  # <temp dir>/harness-ray-<uid>: the local cluster's session files
CONNECT_TIMEOUT_S = 6.0  # the whole check, so a dead address fails well inside 10 s
# Workers keep the driver's torch thread count (same floats as serial), so concurrent trials
# oversubscribe the cores; OpenMP threads that spin while waiting then slow each trial ~4x.
WORKER_ENV = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def worker_env() -> dict[str, str]:
    """What every worker process starts with: the wait policy, and the run's numeric mode and its pins
    (torch reads them when a worker imports it, so they cannot be set from a task)."""
    return {**WORKER_ENV, **worker_environment()}


class RayUnavailable(RuntimeError):
    """Ray is not installed or its cluster cannot be reached: a usage error, before any training."""


def check_address(address: str, timeout: float) -> None:
    """A refused or unroutable address fails here with the OS's reason, before Ray is involved."""
    if address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayUnavailable(f"--ray-address {address!r}: expected host:port, ray://host:port or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayUnavailable(f"Ray cluster at {address} is unreachable ({exc})") from None


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Join the cluster at ``address`` within ``timeout`` seconds or raise RayUnavailable:
    ``ray.init`` retries an endpoint that accepts connections but is no GCS for 20 s or more."""
    deadline = time.monotonic() + timeout
    check_address(address, timeout / 2)
    ray = _import_ray()
    outcome: list[Exception | None] = []

    def attempt() -> None:
        try:
            ray.init(address=address, runtime_env={"env_vars": worker_env()}, logging_level=logging.ERROR)
            outcome.append(None)
        except Exception as exc:  # reported below, on the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=attempt, name="ray-connect", daemon=True)  # abandoned on timeout
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0.1))
    if not outcome:
        raise RayUnavailable(
            f"Ray cluster at {address} did not answer within {timeout:.0f}s (is it the GCS host:port? "
            "a token-authenticated cluster also needs RAY_AUTH_MODE=token)"
        )
    if outcome[0] is not None:
        raise RayUnavailable(f"Ray cluster at {address}: {outcome[0]}")


def _import_ray():
    try:
        import ray
    except ModuleNotFoundError:
        raise RayUnavailable(f"--executor ray needs Ray: {INSTALL_HINT}") from None
    return ray


def _session_root() -> Path:
    """A folder for the local cluster's sessions, sockets and logs inside this user's private folder. Ray's
    default, ``$TMPDIR/ray``, is one name for every user of the machine: a neighbour who made it first would
    own (and read) every log and socket of our cluster. Ray makes the folder it is given writable by all, so
    it gets one inside the private folder, which no one else can enter."""
    try:
        return private_folder(RAY_FOLDER) / "ray"
    except OSError as exc:
        raise RayUnavailable(f"no private folder for Ray's session files: {exc.filename}: {exc.strerror}") from None


@contextmanager
def _loopback_only(ray: Any) -> Iterator[None]:
    """Start a local cluster whose servers listen on 127.0.0.1 only, as ``harness ui`` does.

    Ray's gcs_server, raylet and workers take no authentication and bind every interface unless
    their node address is the loopback one, which Ray picks only where it treats the machine as
    single-node (``ENABLE_RAY_CLUSTER`` false, its macOS/Windows default). A cluster meant for
    other machines is started deliberately with ``ray start --head`` and joined by --ray-address.
    """
    constants = ray._private.ray_constants
    cluster = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = cluster


@dataclass
class RayExecutor:
    """Runs jobs as Ray tasks (one CPU each, one GPU each on CUDA); see ``start`` for the cluster."""

    address: str | None = None  # None: start a local cluster of `workers` CPUs
    workers: int | None = None
    name: ClassVar[str] = "ray"
    # its workers time with the cluster's load, and keep the alarm of --trial-timeout
    capabilities: ClassVar[Capabilities] = Capabilities(remote=True, quiet_timing=False)
    _owns_cluster: bool = field(default=False, init=False)
    _warned_load: bool = field(default=False, init=False)

    def start(self) -> "RayExecutor":
        """Connect (checking the address first) or start a local cluster; raises RayUnavailable."""
        ray = _import_ray()
        if ray.is_initialized():
            return self
        if self.address:
            connect(self.address)
        else:
            with _loopback_only(ray):
                ray.init(  # "local": a fresh cluster even when `ray start` left one running here
                    address="local", num_cpus=self.workers or os.cpu_count(), include_dashboard=False,
                    runtime_env={"env_vars": worker_env()}, logging_level=logging.ERROR,
                    _temp_dir=str(_session_root()),
                )
            self._owns_cluster = True
        return self

    def close(self) -> None:
        """Shut down a cluster this executor started; leave a shared one running."""
        if self._owns_cluster:
            _import_ray().shutdown()
            self._owns_cluster = False

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        """Keep one job per free slot in flight, in order (seeds outermost), and yield records as
        they complete; a job is submitted when it can start, so its clock times the trial."""
        if not jobs:
            return
        ray = _import_ray()
        from ray.util.queue import Queue

        remote = ray.remote(_execute_reporting)
        steps = Queue(maxsize=1000, actor_options={"num_cpus": 0})  # workers' inner progress, to this console
        concurrent = min(len(jobs), self._slots(jobs[0].device))
        if concurrent > 1:
            self._warn_load(console, concurrent)
        waiting = iter(jobs)
        in_flight: dict[Any, tuple[TrialJob, datetime, float]] = {}

        def submit(job: TrialJob | None) -> None:
            if job is not None:
                gpus = 1 if job.device.startswith("cuda") else 0
                ref = remote.options(num_cpus=1, num_gpus=gpus, max_retries=0).remote(job, steps)
                in_flight[ref] = (job, datetime.now(timezone.utc), time.perf_counter())
                console.trial_started(job.trial.suite, job.index, job.total, job.title)

        for job in islice(waiting, concurrent):
            submit(job)
        try:
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=STEP_INTERVAL_S)
                for step in steps.get_nowait_batch(steps.qsize()):
                    console.inner(*step)
                if not ready:
                    continue
                [ref] = ready
                job, started, clock = in_flight.pop(ref)
                submit(next(waiting, None))  # before the driver stores this record: no idle slot
                try:
                    records = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker died or the task was cancelled
                    records = job.failed(started, time.perf_counter() - clock, _reason(exc), traceback=str(exc)[-4000:])
                for record in records:
                    if concurrent > 1:
                        record = record.with_details(speed_measured_under_load=True, concurrent_trials=concurrent)
                    yield record
        finally:  # Ctrl-C or a failing store: nothing keeps running behind the driver's back
            for ref in in_flight:
                ray.cancel(ref, force=True)
            steps.shutdown()

    def _slots(self, device: str) -> int:
        """How many trials the cluster runs at once: its CPUs, or its GPUs for CUDA trials."""
        resources = _import_ray().cluster_resources()
        slots = resources.get("CPU", 1)
        if device.startswith("cuda"):
            slots = min(slots, resources.get("GPU", 0))
        return max(int(slots), 1)

    def _warn_load(self, console: Console, concurrent: int) -> None:
        """Say once per invocation that speed figures share the machine with other trials."""
        if not self._warned_load:
            self._warned_load = True
            console.line(
                f"ray: {concurrent} trials at a time on {self.address or 'a local cluster'}; speed figures are "
                "measured under load (records carry details.speed_measured_under_load)"
            )


def _execute_reporting(job: TrialJob, steps: Any) -> list[TrialRecord]:
    """``execute_job`` on a worker, its inner progress put on the driver's queue."""
    def put(step: tuple[str, int, int]) -> None:
        try:
            steps.put_nowait(step)
        except Exception:  # a full or closed queue costs a progress line, never the trial
            pass

    return execute_job(job, ThrottledSteps(put))  # type: ignore[arg-type]


def _reason(exc: Exception) -> str:
    """One line: the task's own exception, or Ray's account of the worker's death."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}".strip()
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()


@dataclass(frozen=True)
class RayOptions:
    ray_address: str | None = option("Use the Ray cluster at host:port (its GCS), ray://host:port or 'auto' "
                                     "instead of starting a local one.")
    ray_workers: int | None = option("Trials at a time on the local Ray cluster [default: CPUs].", minimum=1)

    def __post_init__(self) -> None:
        if self.ray_address and self.ray_workers:
            raise ValueError("--ray-workers sizes a local cluster; a cluster at --ray-address has its own workers")


class Ray:
    """The registered ``ray`` executor (Ray is the optional extra ``harness[ray]``)."""

    name: ClassVar[str] = RayExecutor.name
    Options: ClassVar[type] = RayOptions

    @staticmethod
    def slots(options: RayOptions, device: torch.device, threads: int) -> int:
        return 0  # Ray's workers, on machines of their own, are sized by the cluster

    @staticmethod
    def start(options: RayOptions, slots: int) -> RayExecutor:
        try:
            return RayExecutor(address=options.ray_address, workers=options.ray_workers).start()
        except RayUnavailable as exc:
            raise ExecutorError(str(exc)) from None

