"""The tuning lock (``<suite stem>.tuned.json``): one typed document that ``harness tune`` writes
(``execution.tuning``) and every load of the suite reads (``suite.tuning.apply_lock``).

The lock carries a checksum over everything else in it, so a hand edit no longer matches; it is checked
on the bytes as read, before any field is taken from them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.store import canonical_json, read_json
from harness.suite.model import SuiteError

LOCK_SUFFIX = ".tuned.json"
LOCK_SCHEMA = 1


def lock_path(suite_file: Path) -> Path:
    return Path(suite_file).with_name(Path(suite_file).stem + LOCK_SUFFIX)


def lock_checksum(document: Mapping[str, Any]) -> str:
    """The checksum a lock carries over everything else in it: a hand edit no longer matches."""
    body = {k: v for k, v in document.items() if k != "checksum"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


@dataclass(frozen=True)
class LockedArm:
    """One tuned arm's entry: the params it chose, the tuned keys it sets itself (it keeps their values)
    and its grid (each point's params, per-seed values and failed trials). A forged lock may hold anything
    here: ``suite.tuning.check_choice`` checks the choice against the grid."""

    chosen: Any = None
    kept: Any = field(default_factory=dict)
    grid: Any = None

    def as_stored(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "kept": self.kept, "grid": self.grid}


@dataclass(frozen=True)
class TuningLock:
    """What a lock hands the suite (each arm's choice, for the tune block ``tune_hash`` hashes, on
    ``seeds``, at ``task_version``) and how it was made (``provenance``: suite, task, profile, tune block,
    metric, direction, commit, date, the tuning run's folder and time)."""

    tune_hash: Any
    task_version: Any
    seeds: tuple[int, ...]
    arms: Mapping[str, LockedArm | None]  # None: an entry that is not an arm's
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def as_stored(self) -> dict[str, Any]:
        """The document as written, its checksum included."""
        document = {"schema": LOCK_SCHEMA, **self.provenance, "tune_hash": self.tune_hash,
                    "task_version": self.task_version, "seeds": list(self.seeds),
                    "arms": {name: arm.as_stored() if arm is not None else None for name, arm in self.arms.items()}}
        return {**document, "checksum": lock_checksum(document)}

    def arm(self, name: str) -> LockedArm | None:
        """An arm's entry (an empty one when the lock has none for it); None when the entry is not an arm's."""
        return self.arms[name] if name in self.arms else LockedArm()

    @classmethod
    def read(cls, lock: Path, suite_file: Path) -> TuningLock:
        """The lock at ``lock``, refused in one line when it is not one or its checksum does not match."""
        try:
            document = read_json(lock)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SuiteError(f"{lock}: not a readable tuning lock ({exc}); rerun `harness tune {suite_file}`") from None
        not_a_lock = SuiteError(f"{lock}: not a tuning lock of schema {LOCK_SCHEMA}; rerun `harness tune {suite_file}`")
        if not isinstance(document, dict) or document.get("schema") != LOCK_SCHEMA:
            raise not_a_lock
        arms, seeds = document.get("arms"), document.get("seeds")
        if not isinstance(arms, dict) or not isinstance(seeds, list) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise not_a_lock
        if document.get("checksum") != lock_checksum(document):
            raise SuiteError(f"{lock}: the lock does not match its checksum (edited by hand?); a lock is made only by "
                             f"`harness tune {suite_file}`: rerun it")
        named = {"schema", "checksum", "tune_hash", "task_version", "seeds", "arms"}
        return cls(document.get("tune_hash"), document.get("task_version"), tuple(seeds),
                   {str(name): LockedArm(**{k: entry[k] for k in ("chosen", "kept", "grid") if k in entry})
                    if isinstance(entry, dict) else None for name, entry in arms.items()},
                   {key: value for key, value in document.items() if key not in named})
