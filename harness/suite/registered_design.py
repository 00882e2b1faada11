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

from harness.core.stored_fields import ANY, from_stored, stored
from harness.store import canonical_json

# suite.json's keys the analysis and the trials read; the rest (description, source, gate, device, plots'
# declarations, the expansion, the lock) say where or how a run was shown, never what it decides.
ANALYSED_KEYS = ("suite", "profile", "task", "task_version", "params", "sweep", "arms", "contrasts", "validity",
                 "claims", "premises", "confidence", "sequential", "tuned", "mechanism", "metrics")


@dataclass(frozen=True)
class _Analysed:
    """The analysed keys of a stored suite, of any type (the stored suite's own reader checks them)."""

    suite: Any = stored(ANY, missing=None)
    profile: Any = stored(ANY, missing=None)
    task: Any = stored(ANY, missing=None)
    task_version: Any = stored(ANY, missing=None)
    params: Any = stored(ANY, missing=None)
    sweep: Any = stored(ANY, missing=None)
    arms: Any = stored(ANY, missing=None)
    contrasts: Any = stored(ANY, missing=None)
    validity: Any = stored(ANY, missing=None)
    claims: Any = stored(ANY, missing=None)
    premises: Any = stored(ANY, missing=None)
    confidence: Any = stored(ANY, missing=None)
    sequential: Any = stored(ANY, missing=None)
    tuned: Any = stored(ANY, missing=None)
    mechanism: Any = stored(ANY, missing=None)
    metrics: Any = stored(ANY, missing=None)


def analysed_fields(suite_json: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a stored suite that the analysis reads; an arm's labels (derived from its sweep) left out."""
    found = from_stored(_Analysed, suite_json)
    record = {key: getattr(found, key) for key in ANALYSED_KEYS}
    if isinstance(record["arms"], dict):
        record["arms"] = {name: {k: v for k, v in arm.items() if k != "labels"} if isinstance(arm, dict) else arm
                          for name, arm in record["arms"].items()}
    return record


def registered_record(suite_json: Mapping[str, Any], task_code_sha256: str, seed_count: int) -> dict[str, Any]:
    """What a registration's hash covers: the analysed fields, the task's code and how many seeds it draws."""
    return {**analysed_fields(suite_json), "task_code_sha256": task_code_sha256, "seed_count": seed_count}


def record_digest(record: Mapping[str, Any]) -> str:
    """The sha256 (64 hex digits) of a registered record, as the ledger keeps it."""
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()
