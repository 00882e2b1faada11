"""Artifacts shared by the trials of a suite (a teacher per seed): one key scheme, built once.

The key hashes the task, its version, this module's format number, the seed, the device type
and a JSON-able identity.
A file appears only complete (the store's atomic write), a ``.sha256`` beside it records what was
written (a truncated or altered file is rebuilt, never loaded), a ``.origin`` the trial that built it (so a
trial that loads it records where it came from, and the audit can tell an artifact built in the run it
audits from one built elsewhere), and a ``.lock`` next to it serialises builders across processes: the
first builds, the others wait and load.
"""
from __future__ import annotations

import hashlib
import io
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch

from harness.core.locks import FileLock
from harness.measure.phases import waiting
from harness.store import read_verified, write_atomic, write_checksum

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
    """An exclusive flock on lock_path (blocking, never through a link), released on exit or process death."""
    lock = FileLock(lock_path)
    with waiting():  # while another trial builds the artifact: the phase table's waiting
        lock.acquire(exclusive=True)
    try:
        yield
    finally:
        lock.release()


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verified(path: Path) -> bytes | None:
    """The artifact's bytes when they hash to what its build recorded; None when missing or altered."""
    return read_verified(path, _checksum_path(path))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load(data: bytes, map_location: torch.device) -> Any:
    return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)


def _origin_path(path: Path) -> Path:
    return path.with_name(path.name + ".origin")


def _origin(path: Path) -> str:
    """The id of the trial that built the artifact at ``path``; 'unknown' when none was recorded."""
    try:
        text = _origin_path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return "unknown"
    return text if text.isalnum() and len(text) <= 64 else "unknown"


@dataclass(frozen=True)
class Artifact:
    """A cached artifact as a trial got it: its payload, whether it was loaded, its bytes' sha256, and the
    trial that built it."""

    payload: Any
    loaded: bool
    sha256: str
    built_by: str


def load_or_build(path: Path, build: Callable[[], Any], map_location: torch.device, builder: str = "") -> Artifact:
    """The stored payload, or ``build()`` saved with torch.save and read back (``builder``: the id of the
    trial building it, kept beside it), with the sha256 of the bytes it came from (a trial records it, so a
    replaced artifact shows in the record).

    The builder's own result is read back from the file too, so the trial that builds gets
    exactly what later trials load. ``build`` returns what ``torch.load(weights_only=True)``
    accepts: tensors, numbers, strings and containers of them (a state dict). A file whose bytes
    do not match the checksum its build recorded (truncated, altered, or from before checksums)
    is built again rather than loaded.
    """
    data = _verified(path)
    if data is not None:
        return Artifact(_load(data, map_location), True, _digest(data), _origin(path))
    with exclusive(path.with_name(path.name + ".lock")):
        data = _verified(path)  # another process built it while this one waited
        if data is not None:
            return Artifact(_load(data, map_location), True, _digest(data), _origin(path))
        payload = build()
        write_atomic(_origin_path(path), lambda handle: handle.write((builder or "unknown").encode()))
        write_atomic(path, lambda handle: torch.save(payload, handle))
        write_checksum(path, _checksum_path(path))
        data = _verified(path)
    if data is None:
        raise RuntimeError(f"cache artifact {path} changed while it was written (another writer outside the lock?)")
    return Artifact(_load(data, map_location), False, _digest(data), builder or "unknown")
