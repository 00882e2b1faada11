"""What the run loop tells those who follow a run (the MLflow mirror): its start, each look at the
store before trials run, and each trial as it is stored.

Here, below both, so that the loop (execution/) calls its listeners and tracking/ implements one
without either importing the other.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

from harness.record import TrialRecord
from harness.store import RunFolder


@dataclass(frozen=True)
class RunStart:
    """A run as it starts: its folder, its suite.json (the loop updates it in place when a sequential
    design adds seeds) and the environment its trials record."""

    folder: RunFolder
    meta: dict[str, Any]
    environment: dict[str, str]


class RunListener(Protocol):
    def started(self, run: RunStart) -> None:
        """Before anything runs."""

    def look(self, done: Sequence[TrialRecord], pending: int) -> None:
        """Before a look runs: its trials already stored, and how many of its trials are to run."""

    def trial_stored(self, record: TrialRecord, path: Path) -> None:
        """A trial that ran, once its record is in the store at ``path``."""
