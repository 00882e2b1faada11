"""The process's own life: child servers that must not outlive the command that started them, and
code that must not end the process from inside.

``mlflow ui`` / ``mlflow server`` start uvicorn, which starts workers: stopping only the direct
child orphans the rest, still bound to the port. Started in their own session, the whole tree
is one process group and stops together.
"""
from __future__ import annotations

import contextlib
import os
import posix
import signal
import subprocess
from typing import Callable, Iterator


@contextlib.contextmanager
def exit_refused(refusal: Callable[[int], BaseException]) -> Iterator[None]:
    """Inside, ``os._exit`` (or ``posix._exit``, the same function) in this very process raises
    ``refusal(code)`` instead of ending it: a plugin or a task cannot end a run with a status of its
    own choosing. A child it forked still exits as it meant to."""
    owner, real = os.getpid(), os._exit

    def refuse(code: int) -> None:
        if os.getpid() != owner:
            real(code)
        raise refusal(code)

    os._exit = posix._exit = refuse
    try:
        yield
    finally:
        os._exit = posix._exit = real


def stop_process_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the group led by ``process`` (started with ``start_new_session=True``), wait up to
    ``grace`` seconds for the leader, then SIGKILL whatever is left of the group: MLflow's job
    consumers (huey) outlive both SIGTERM and their parent, so the leader exiting is not enough."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
