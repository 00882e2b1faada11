"""Bytes of real tensors and the memory bandwidth they can be streamed at."""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from harness.measure.timing import seconds_per_call


def tensor_bytes(obj: Any) -> int:
    """Sum of the storage bytes of every tensor reachable in obj (dataclasses, dicts, sequences)."""
    if obj is None:
        return 0
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(tensor_bytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def read_bandwidth(device: torch.device, nbytes: int = 256 * 2**20, min_run_time: float = 0.2) -> float:
    """Achievable streaming read rate in bytes/s over a tensor of ``nbytes``: a sum reads every byte
    once and writes one number, as a scorer reads a bank. A copy would count its writes too, so a
    read-only scorer could score up to twice "the bandwidth" against it and a fraction would not
    mean what it says. Measured at the caller's size, so it is the rate of the memory level (cache
    or DRAM) a tensor of that size lives in."""
    source = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    seconds = seconds_per_call(lambda: source.sum(), min_run_time)
    return nbytes / seconds
