"""The design lock: what a results folder's trials are analysed under and may not change once they exist
(the first look's seeds, the sequential schedule, the claims, premises, validity and confidence).

``suite.json`` records it under ``design``; a run of another design is refused in a folder that holds
trials of the stored one (``check_design``), since analysing those seeds again under other claims or
another schedule would inflate the error rates. The store only reads and writes the file; what a design
is, and when two differ, is said here.
"""
from __future__ import annotations

import hashlib
import json
from contextlib import suppress
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

from harness.core.stored_fields import (
    ANY,
    INTEGER,
    MAPPING,
    NUMBER,
    STRING,
    StoredFieldError,
    as_stored,
    from_stored,
    list_of,
    optional,
    stored,
    stored_value,
)
from harness.store import SUITE_FILE, RunFolder, canonical_json, iter_trial_files, read_json
from harness.suite.schema import SEQUENTIAL, StoredSequential, sequential_from_stored

DESIGN_KEY = "design"  # suite.json: the design the folder's trials belong to
REDESIGN_HINT = ("rerun with --redesign to set them aside (kept in trials/superseded/, read by nothing) and run the "
                 "design afresh here, or give another --results folder")


class DesignChanged(ValueError):
    """A run whose design differs from the one a results folder's trials were run under (one line)."""


class UnreadableDesign(ValueError):
    """A suite.json that does not give a design of the right shape (one line naming the key)."""


@dataclass(frozen=True)
class DesignLock:
    """One design lock, as ``suite.json`` records it (its values the JSON the suite's models dump); each
    field is its key in the record (``stored``)."""

    seeds: tuple[int, ...] = stored(list_of(INTEGER, "a list of integers"))
    sequential: StoredSequential | None = stored(optional(SEQUENTIAL), missing=None, default=None)
    claims: tuple[Mapping[str, Any], ...] = stored(list_of(ANY, "a list"), default=())
    premises: tuple[Mapping[str, Any], ...] = stored(list_of(ANY, "a list"), default=())
    validity: Mapping[str, Any] | None = stored(optional(MAPPING), missing=None, default=None)
    confidence: float | None = stored(optional(NUMBER), missing=None, default=None)
    # the ledger id of the registered design (whose hash covers every field the analysis reads); absent
    # from the record when None, so a design locked before registrations existed keeps its hash
    registration: str | None = stored(optional(STRING), missing=None, omit_missing=True, default=None)

    @classmethod
    def from_stored(cls, data: Any) -> DesignLock:
        """A stored design, each field checked; UnreadableDesign names the key that is wrong."""
        try:
            return from_stored(cls, data, f"{DESIGN_KEY}.", unknown="not a field of a design")
        except StoredFieldError as exc:
            raise UnreadableDesign(str(exc)) from None

    @classmethod
    def of_suite(cls, stored: Mapping[str, Any]) -> DesignLock:
        """A stored suite's design: its record, or for a folder written before designs were recorded, the
        same fields rebuilt from the suite (``design_record``)."""
        if not isinstance(stored, dict):
            raise UnreadableDesign(f"expected a stored suite (a mapping), got {type(stored).__name__}")
        record = _read_suite(stored).design
        if record is not None and not isinstance(record, dict):
            raise UnreadableDesign(f"{DESIGN_KEY}: expected a mapping, got {type(record).__name__}")
        return cls.from_stored(design_record(stored))

    @property
    def digest(self) -> str:
        """The first 8 hex digits of the sha256 of the design as stored: how evidence and pages name it."""
        return hashlib.sha256(canonical_json(as_stored(self)).encode()).hexdigest()[:8]

    def label(self) -> str:
        """'design <digest> (seeds 0-2, sequential to 12 seeds, 2 claims, 1 premise)': the hash and what it is."""
        seeds = list(self.seeds)
        contiguous = len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds)))
        seed_text = f"{seeds[0]}-{seeds[-1]}" if contiguous else ",".join(map(str, seeds))
        schedule = f"sequential to {seeds_registered(self.sequential, self.seeds)} seeds" \
            if self.sequential is not None else "fixed"
        claims, premises = len(self.claims), len(self.premises)
        return (f"design {self.digest} (seeds {seed_text or '-'}, {schedule}, {claims} claim{'s' * (claims != 1)}, "
                f"{premises} premise{'s' * (premises != 1)})")

    def differing(self, other: DesignLock) -> list[str]:
        """The fields in which ``other`` is another design than this one."""
        return [key for key in DESIGN_KEYS
                if canonical_json(stored_value(self, key)) != canonical_json(stored_value(other, key))]


DESIGN_KEYS = tuple(f.name for f in fields(DesignLock))  # the record's keys, in the order the suite names them


def seeds_registered(sequential: StoredSequential | None, seeds: Sequence[int]) -> int:
    """How many seeds a stored design may run: its schedule's last look, or its fixed seeds."""
    return len(seeds) if sequential is None else sequential.max_seeds


@dataclass(frozen=True)
class _SuiteDesign:
    """The keys of a stored suite a design is read from: its design record, or in a folder written before
    designs were recorded, the design's fields at the suite's top level (of any type: ``DesignLock`` checks them)."""

    design: Any = stored(ANY, missing=None)
    seeds: Any = stored(ANY, missing=None)
    sequential: Any = stored(ANY, missing=None)
    claims: Any = stored(ANY, missing=None)
    premises: Any = stored(ANY, missing=None)
    validity: Any = stored(ANY, missing=None)
    confidence: Any = stored(ANY, missing=None)


def _read_suite(stored: Mapping[str, Any]) -> _SuiteDesign:
    return from_stored(_SuiteDesign, stored)


def design_record(stored: Mapping[str, Any]) -> Any:
    """A stored suite's design record as written (what its hash is taken over), or for a folder written
    before designs were recorded, the same fields rebuilt from the suite (the first look's seeds of a
    sequential design); not checked (``DesignLock.from_stored`` checks it)."""
    suite = _read_suite(stored)
    if isinstance(suite.design, dict):
        return suite.design
    seeds, sequential = suite.seeds or [], suite.sequential
    if isinstance(seeds, list) and isinstance(sequential, dict):
        with suppress(ValueError):  # not a schedule harness writes: the design that reads it is refused
            seeds = seeds[:sequential_from_stored(sequential)[0]]
    return {"seeds": seeds, "sequential": sequential, "claims": suite.claims or [], "premises": suite.premises or [],
            "validity": suite.validity, "confidence": suite.confidence}


def stored_design(folder: RunFolder) -> DesignLock | None:
    """The design the folder's trials were run and analysed under; None when the folder has no
    suite.json. UnreadableDesign, naming the file, when it has one that does not give a design."""
    path = folder.path / SUITE_FILE
    try:
        stored = read_json(path)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise UnreadableDesign(f"{path} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise UnreadableDesign(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    except OSError as exc:
        raise UnreadableDesign(f"{path} cannot be read ({exc.strerror or exc})") from None
    if not isinstance(stored, dict):
        raise UnreadableDesign(f"{path} holds {type(stored).__name__ if stored is not None else 'null'}, not a "
                               "stored suite")
    try:
        return DesignLock.of_suite(stored)
    except UnreadableDesign as exc:
        raise UnreadableDesign(f"{path}: {exc}") from None


def check_design(folder: RunFolder, design: DesignLock) -> None:
    """Refuse ``design`` when it is not the stored one while the folder holds that design's trials: its
    seeds were analysed under the stored claims, premises and schedule. Trials whose design cannot be
    read (suite.json deleted, emptied, not JSON, of the wrong shape) are refused the same way: it
    fails closed."""
    holds_trials = next(iter_trial_files(folder.path), None) is not None
    try:
        stored = stored_design(folder)
    except UnreadableDesign as exc:
        if not holds_trials:
            return  # nothing was analysed under it: the run writes its own
        raise DesignChanged(f"{exc}: the design of the trials in {folder.path} is unknown, so they cannot be "
                            f"matched to this run's {design.label()}; {REDESIGN_HINT}") from None
    if stored is None:
        if holds_trials:
            raise DesignChanged(f"{folder.path} holds trials but no {SUITE_FILE}: the design they ran under is "
                                f"unknown, so they cannot be matched to this run's {design.label()}; {REDESIGN_HINT}")
        return
    changed = stored.differing(design)
    if not changed or not holds_trials:
        return  # no trials yet: nothing was analysed under the stored design
    raise DesignChanged(
        f"{folder.path} holds trials of {stored.label()}; this run's {design.label()} differs in "
        f"{', '.join(changed)}: a changed design runs on fresh seeds and its own folder, so give another "
        f"--results folder (or move this one aside, or rerun with --redesign to set its trials aside)"
    )
