"""What those who follow a run (the MLflow mirror) are told: its start, each look at the store before
trials run, each trial as it is stored (all three by the run loop), and its end with what the run
concluded (by whoever composed the run, once it has its report or lock).

Here, between execution and tracking, so that the loop calls its listeners and tracking implements one
without either importing the other.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence

from harness.core.record import TrialRecord
from harness.store import RunFolder
from harness.suite.stored import StoredSuite

if TYPE_CHECKING:
    from harness.analysis.decide.run_decisions import RunAnalysis

FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"


@dataclass(frozen=True)
class RunStart:
    """A run as it starts: its folder, its resolved suite (``suite.json``) and the environment its trials record."""

    folder: RunFolder
    suite: StoredSuite
    environment: dict[str, str]


@dataclass(frozen=True)
class RunEnd:
    """A run as it ends: ``status`` (FINISHED, FAILED, or KILLED when it was interrupted), its analysis when
    it was analysed, its wall time when trials ran, its failed trials and the files its report or lock wrote."""

    status: str
    analysis: RunAnalysis | None = None
    wall_seconds: float | None = None
    failed: int = 0
    artifacts: tuple[Path, ...] = ()


class RunListener(Protocol):
    def started(self, run: RunStart) -> None:
        """Before anything runs."""

    def look(self, suite: StoredSuite, done: Sequence[TrialRecord], pending: int) -> None:
        """Before a look runs: the suite at its seeds, its trials already stored, and how many are to run."""

    def trial_stored(self, record: TrialRecord, path: Path) -> None:
        """A trial that ran, once its record is in the store at ``path``."""

    def finished(self, end: RunEnd) -> None:
        """The run is over: told once, by whoever composed it (the API, once the report or lock is written)."""
