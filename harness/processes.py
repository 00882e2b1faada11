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
    """SIGTERM the group led by ``process`` (started with ``start_new_session=True``), then SIGKILL
    whatever is left after ``grace`` seconds."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
