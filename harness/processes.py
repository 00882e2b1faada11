"""Child servers that must not outlive the command that started them.

``mlflow ui`` / ``mlflow server`` start uvicorn, which starts workers: stopping only the direct
child orphans the rest, still bound to the port. Started in their own session, the whole tree
is one process group and stops together.
"""
from __future__ import annotations

import os
import signal
import subprocess


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
