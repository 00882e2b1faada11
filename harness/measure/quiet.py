"""Timings taken alone while trials run side by side.

A suite that claims a speed metric must not time one trial beside another's training. Instead of
running every trial one at a time, its trials share a 'room' (two flock files in the run's work
folder): a trial holds the room shared while it computes and steps out for a moment at each training
step (``pause``); a timing measurement (``alone``) closes the gate, so that no trial comes back in,
and takes the room exclusively once every other trial has stepped out. The other trials wait at their
next step (or until their trial ends) for as long as the timing runs, and carry on afterwards with
bit-identical results: only their schedule changed. Writer-preferring by the gate: a trial that
keeps stepping out and back in cannot starve a waiting timing.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.core.locks import FileLock

PAUSE_EVERY_S = 0.05  # a trial steps out at most this often: a waiting timing starts within a step and this


class QuietRoom:
    """One process's place in the room of ``folder`` (one trial at a time per process)."""

    def __init__(self, folder: Path) -> None:
        self.gate = FileLock(Path(folder) / "timing.gate")
        self.room = FileLock(Path(folder) / "timing.room")
        self.last = 0.0

    def enter(self) -> None:
        """Hold the room shared (compute), once no timing holds the gate."""
        self.gate.acquire(exclusive=True)
        self.room.acquire(exclusive=False)
        self.gate.release()
        self.last = time.perf_counter()

    def leave(self) -> None:
        self.room.release()

    def pause(self) -> None:
        """Step out and back in, so that a timing waiting at the gate can start."""
        if time.perf_counter() - self.last >= PAUSE_EVERY_S:
            self.leave()
            self.enter()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Nothing else of the run computes inside: the gate closed, the room held exclusively."""
        self.leave()
        self.gate.acquire(exclusive=True)
        self.room.acquire(exclusive=True)
        try:
            yield
        finally:
            self.room.release()
            self.gate.release()
            self.enter()


_current: list[QuietRoom | None] = [None]


@contextmanager
def quiet_room(folder: Path | None) -> Iterator[None]:
    """This process's trial inside the room of ``folder`` (None: no room, timings as they come)."""
    if folder is None:
        yield
        return
    room = QuietRoom(folder)
    room.enter()
    _current[0] = room
    try:
        yield
    finally:
        _current[0] = None
        room.leave()


def pause() -> None:
    """At a training step: let a waiting timing in (nothing without a room)."""
    room = _current[0]
    if room is not None:
        room.pause()


@contextmanager
def alone() -> Iterator[None]:
    """Around a timing measurement: every other trial of the room waits (nothing without a room)."""
    room = _current[0]
    if room is None:
        yield
        return
    with room.alone():
        yield
