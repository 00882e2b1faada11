"""A test hook that kills this process at a named point: proof that an interrupt there loses nothing.

``HARNESS_FAULT=POINT[:N]`` makes the process SIGKILL itself the N-th time (default: the first)
it reaches POINT. Unset, it costs one string comparison per point. The points:

``schema``             an SQL statement while the MLflow schema is created or upgraded (aside)
``trial-run-created``  a trial's MLflow run exists, nothing is logged to it yet
``trial-run-logged``   its metrics, params and files are logged; it is not yet marked FINISHED
``trial-mirrored``     it is FINISHED; the marker file that records it is not yet written
``report``             an artifact of the suite's parent run is uploaded, the run is not closed

Only the tests in ``tests/test_faults.py`` and ``tests/fault_injection.py`` set it.
"""
from __future__ import annotations

import os
import signal

_POINT, _, _COUNT = os.environ.get("HARNESS_FAULT", "").partition(":")
_remaining = int(_COUNT or 1)


def armed(point: str) -> bool:
    return point == _POINT


def fault(point: str) -> None:
    """SIGKILL this process if HARNESS_FAULT names point and this is its N-th visit."""
    global _remaining
    if point != _POINT:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
