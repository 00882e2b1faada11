"""OS file locks (flock): one writer per results folder and suite, and a guard on the MLflow store.

A lock lives as long as its open file: a process that dies, however it dies, releases it, so no
stale lock ever needs deleting by hand. Lock files are never removed (removing one would let two
processes lock two different files of the same name).
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from harness.core.files import open_regular

WRITER_LOCK = ".writer.lock"


class LockBusy(RuntimeError):
    """Another process holds the lock: one line for the user."""


class FileLock:
    """flock on ``path``; shared or exclusive, blocking or not, convertible while held."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._handle = None

    def acquire(self, exclusive: bool = True, blocking: bool = True) -> bool:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # never through a link: a received folder's lock file may point anywhere
            self._handle = os.fdopen(open_regular(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+")
        flags = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(self._handle.fileno(), flags)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file drops the lock
            self._handle = None

    def note_holder(self) -> None:
        """Write who holds the lock into the file, for the message another process shows."""
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        self._handle.flush()

    def holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return ""


def lock_writer(results_root: Path, suite: str) -> FileLock:
    """The lock that makes this process the only writer of ``suite`` under results_root.

    Raises LockBusy (it does not wait) when another ``harness run`` of the suite holds it.
    """
    lock = FileLock(Path(results_root) / suite / WRITER_LOCK)
    if not lock.acquire(exclusive=True, blocking=False):
        holder = lock.holder()
        lock.release()
        raise LockBusy(
            f"another harness run is writing suite {suite!r} into {results_root}"
            + (f" ({holder})" if holder else "")
            + "; wait for it to finish, or give this one another --results"
        )
    lock.note_holder()
    return lock
