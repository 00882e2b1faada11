"""Timing with torch.utils.benchmark: it warms up, synchronises CUDA and picks run counts."""
from __future__ import annotations

from typing import Callable

import torch
from torch.utils import benchmark

from harness.measure.quiet import alone


def seconds_per_call(fn: Callable[[], object], min_run_time: float = 0.2) -> float:
    """Median wall seconds of one call of ``fn`` (CUDA work included: Timer synchronises), taken alone
    when the trial runs beside others of a suite that claims a speed metric (``harness.measure.quiet``)."""
    fn()  # warm-up outside the measurement: first calls allocate and compile
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    with alone():
        return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def throughput(fn: Callable[[], object], items_per_call: float, min_run_time: float = 0.2) -> float:
    """Items per second (tokens, queries) for one call of ``fn`` processing ``items_per_call``."""
    return items_per_call / seconds_per_call(fn, min_run_time)
