"""Where a trial's wall time goes, for the run's phase table: the executor records, in the trial's
details under ``PHASE_DETAIL``, its seconds training and its seconds blocked on another trial's work
(a cached artifact another trial is building); the rest is data and evaluation."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

PHASE_DETAIL = "phase_seconds"
_waited = [0.0]  # one trial at a time per process: the executor takes it after each trial


@contextmanager
def waiting() -> Iterator[None]:
    """Count the time inside as waited."""
    clock = time.perf_counter()
    try:
        yield
    finally:
        _waited[0] += time.perf_counter() - clock


def take_waited() -> float:
    """Seconds waited since the last call (the trial that just ran), and start counting afresh."""
    seconds, _waited[0] = _waited[0], 0.0
    return seconds
