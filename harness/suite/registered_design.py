"""What a registration covers: every field of a stored suite (``suite.json``) that can move a verdict.

The design lock (``harness.suite.design``) names the seeds, the schedule, the claims, premises and
validity. A verdict also reads which arm of a contrast is the treatment, each metric's direction, every
arm's params and tuned points, the suite's params and sweep and the task's code; a change to any of them
is another study. The record is taken from the stored suite alone, so the audit rebuilds it from a
bundle's ``suite.json`` and trials without the suite file.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

from harness.core.stored_fields import MAPPING, as_stored, stored, stored_value
from harness.store import canonical_json
from harness.suite.stored import StoredSuite

# suite.json's keys the analysis and the trials read; the rest (description, source, gate, device, plots'
# declarations, the expansion, the lock) say where or how a run was shown, never what it decides.
ANALYSED_KEYS = ("suite", "profile", "task", "task_version", "params", "sweep", "arms", "contrasts", "validity",
                 "claims", "premises", "confidence", "sequential", "tuned", "mechanism", "metrics")


@dataclass(frozen=True)
class _AnalysedArm:
    """What the analysis reads of an arm: its params and sweep (its labels derive from the sweep)."""

    params: Mapping[str, Any] = stored(MAPPING)
    sweep: Mapping[str, Any] = stored(MAPPING)


def analysed_value(suite: StoredSuite, key: str) -> Any:
    """One field of a stored suite that the analysis reads (one of ``ANALYSED_KEYS``), as suite.json stores it;
    an arm's labels (derived from its sweep) left out."""
    if key == "arms":
        return {name: as_stored(_AnalysedArm(arm.params, arm.sweep)) for name, arm in suite.arms.items()}
    return stored_value(suite, key)


def analysed_fields(suite: StoredSuite) -> dict[str, Any]:
    """The fields of a stored suite that the analysis reads, as suite.json stores them."""
    return {key: analysed_value(suite, key) for key in ANALYSED_KEYS}


def registered_record(suite: StoredSuite, task_code_sha256: str, seed_count: int) -> dict[str, Any]:
    """What a registration's hash covers: the analysed fields, the task's code and how many seeds it draws."""
    return {**analysed_fields(suite), "task_code_sha256": task_code_sha256, "seed_count": seed_count}


def record_digest(record: Mapping[str, Any]) -> str:
    """The sha256 (64 hex digits) of a registered record, as the ledger keeps it."""
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()
