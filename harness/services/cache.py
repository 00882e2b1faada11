"""Artifacts shared by the trials of a suite (a teacher per seed): one key scheme, built once.

The key hashes the task, its version, this module's format number, the seed, the device type
and a JSON-able identity.
A file appears only complete (the store's atomic write), and a ``.lock`` next to it serialises
builders across processes: the first builds, the others wait and load.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch

from harness.store import write_atomic

CACHE_FORMAT = 1  # bump when the key scheme or the file layout changes
KEY_CHARS = 20


def artifact_key(
    task: str, task_version: str, kind: str, seed: int, device_type: str, identity: Mapping[str, Any]
) -> str:
    """sha256 of everything that determines an artifact; identity must be JSON-able.

    The device type is part of it: an artifact trained on CUDA differs numerically from one
    trained on the CPU, and a CPU rerun must stay bit-identical.
    """
    blob = json.dumps(
        {"format": CACHE_FORMAT, "task": task, "version": task_version, "kind": kind, "seed": seed,
         "device": device_type, "identity": identity},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:KEY_CHARS]


def artifact_path(cache_dir: Path, task: str, kind: str, key: str) -> Path:
    return Path(cache_dir) / f"{task}-{kind}-{key}.pt"


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """An exclusive flock on lock_path (blocking), released on exit or process death."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def load_or_build(path: Path, build: Callable[[], Any], map_location: torch.device) -> tuple[Any, bool]:
    """(payload, loaded): the stored payload, or ``build()`` saved with torch.save and read back.

    The builder's own result is read back from the file too, so the trial that builds gets
    exactly what later trials load. ``build`` returns what ``torch.load(weights_only=True)``
    accepts: tensors, numbers, strings and containers of them (a state dict).
    """
    if path.is_file():
        return torch.load(path, map_location=map_location, weights_only=True), True
    with exclusive(path.with_name(path.name + ".lock")):
        if path.is_file():  # another process built it while this one waited
            return torch.load(path, map_location=map_location, weights_only=True), True
        payload = build()
        write_atomic(path, lambda handle: torch.save(payload, handle))
    return torch.load(path, map_location=map_location, weights_only=True), False
