"""The tuning lock (``<suite stem>.tuned.json``): one typed document that ``harness tune`` writes
(``execution.tuning``) and every load of the suite reads (``suite.tuning_plan.apply_lock``).

The lock carries a checksum over everything else in it, so a hand edit no longer matches; it is checked
on the bytes as read, before any field is taken from them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from harness.core.stored_fields import (
    ANY,
    COUNT,
    INTEGER,
    MAPPING,
    NUMBER,
    Schema,
    Shape,
    StoredFieldError,
    as_stored,
    document,
    from_stored,
    list_of,
    mapping_of,
    optional,
    stored,
)
from harness.store import canonical_json, read_json
from harness.suite.resolved_suite import SuiteError

LOCK_SUFFIX = ".tuned.json"


def lock_path(suite_file: Path) -> Path:
    return Path(suite_file).with_name(Path(suite_file).stem + LOCK_SUFFIX)


def lock_checksum(document: Mapping[str, Any]) -> str:
    """The checksum a lock carries over everything else in it: a hand edit no longer matches."""
    body = {k: v for k, v in document.items() if k != "checksum"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def _is_seed(key: str) -> bool:
    try:
        int(key)
    except ValueError:
        return False
    return True


def _seed_values(values: dict[str, Any], where: str) -> dict[int, float | None]:
    checked = mapping_of(optional(NUMBER), "").load(values, where)
    return {int(seed): value for seed, value in checked.items()}


# a grid point's value on each tuning seed, keyed by the seed as text (JSON keys are strings)
SEED_VALUES = Shape("a mapping of seed -> finite number or null",
                    lambda value: isinstance(value, dict) and all(_is_seed(key) for key in value), _seed_values,
                    lambda values: {str(seed): value for seed, value in values.items()})


@dataclass(frozen=True)
class LockedPoint:
    """One grid point of a tuned arm, as the tuning run scored it: its params, each tuning seed's value
    (null where the seed gave none), the failed trials and the mean (``analysis.decide.tune_grid``)."""

    params: Any = stored(ANY, missing=None)
    values: Mapping[int, float | None] = stored(SEED_VALUES, missing={})
    failed: int = stored(COUNT, missing=0)
    mean: Any = stored(ANY, missing=None)


@dataclass(frozen=True)
class LockedArm:
    """One tuned arm's entry: the params it chose, the tuned keys it sets itself (it keeps their values)
    and its grid. A forged lock may choose anything: ``suite.tuning_plan.check_choice`` checks the choice against
    the grid and the grid's own values."""

    chosen: Any = stored(ANY, missing=None, default=None)
    kept: Mapping[str, Any] = stored(MAPPING, missing={}, default_factory=dict)
    grid: tuple[LockedPoint, ...] | None = stored(
        optional(list_of(document(LockedPoint), "a list of grid points")), missing=None, default=None)


def _arms(entries: dict[str, Any], where: str) -> dict[str, LockedArm | None]:
    """Each arm's entry; None for an entry that is not a mapping (refused where the arm is applied)."""
    return {str(name): from_stored(LockedArm, entry, f"{where}.{name}.") if isinstance(entry, dict) else None
            for name, entry in entries.items()}


def _provenance(document: dict[str, Any], where: str) -> dict[str, Any]:
    """What the lock records of how it was made: every key but the checked fields, the schema and checksum."""
    named = {TuningLock.stored_schema.key, "checksum", *(f.name for f in fields(TuningLock))}
    return {key: value for key, value in document.items() if key not in named}


@dataclass(frozen=True)
class _Header:
    """What a lock is checked by before any field is taken from it: its schema and its checksum."""

    schema: Any = stored(ANY, missing=None, default=None)
    checksum: Any = stored(ANY, missing=None, default=None)


@dataclass(frozen=True)
class TuningLock:
    """What a lock hands the suite (each arm's choice, for the tune block ``tune_hash`` hashes, on
    ``seeds``, at ``task_version``) and how it was made (``provenance``: suite, task, profile, tune block,
    metric, direction, commit, date, the tuning run's folder and time). Each field is its key in the file."""

    stored_schema = Schema(1)
    tune_hash: Any = stored(ANY, missing=None)
    task_version: Any = stored(ANY, missing=None)
    seeds: tuple[int, ...] = stored(list_of(INTEGER, "a list of integers"))
    arms: Mapping[str, LockedArm | None] = stored(Shape("a mapping of arm entries", lambda v: isinstance(v, dict),
                                                        _arms))
    provenance: Mapping[str, Any] = stored(Shape("the lock's provenance", lambda v: True, _provenance, dict),
                                           flat=True, default_factory=dict)

    def as_stored(self) -> dict[str, Any]:
        """The document as written: its fields (``stored_fields.as_stored``) and the checksum over them."""
        document = as_stored(self)
        return {**document, "checksum": lock_checksum(document)}

    def arm(self, name: str) -> LockedArm | None:
        """An arm's entry (an empty one when the lock has none for it); None when the entry is not an arm's."""
        return next((entry for arm, entry in self.arms.items() if arm == name), LockedArm())

    @classmethod
    def read(cls, lock: Path, suite_file: Path) -> TuningLock:
        """The lock at ``lock``, refused in one line when it is not one, its checksum does not match, or a
        field is not of its shape."""
        rerun = f"rerun `harness tune {suite_file}`"
        try:
            document = read_json(lock)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SuiteError(f"{lock}: not a readable tuning lock ({exc}); {rerun}") from None
        try:
            header = from_stored(_Header, document)
        except StoredFieldError:
            header = _Header()
        if header.schema != cls.stored_schema.version:
            raise SuiteError(f"{lock}: not a tuning lock of schema {cls.stored_schema.version}; {rerun}")
        if header.checksum != lock_checksum(document):
            raise SuiteError(f"{lock}: the lock does not match its checksum (edited by hand?); a lock is made only by "
                             f"`harness tune {suite_file}`: rerun it")
        try:
            return from_stored(cls, document)
        except StoredFieldError as exc:
            raise SuiteError(f"{lock}: {exc}; {rerun}") from None
