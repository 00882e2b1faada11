"""The resolved suite as a results folder stores it (``<suite>/<profile>/suite.json``), read back typed.

Analysis and gating read a run's suite through ``StoredSuite`` alone, so each stored field is checked in
one place and a hand-edited or newer file is refused in one line naming the file and the key, instead
of failing somewhere downstream. Its fields are declared with the document layer (``core.stored_fields``),
which reads them (``from_stored``) and writes them back (``as_stored``: the same bytes once written
canonically); keys this version does not know are kept as they were. Folders written before a field was
recorded read with its old default (no ``design``, no ``trial_ids``, partial ``arms``), and so does a key
written as null.
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from pydantic import BaseModel

from harness.core.metrics import DetailScatter, Metric, ParetoView
from harness.core.stored_fields import (
    INTEGER,
    MAPPING,
    NUMBER,
    STRING,
    Schema,
    Shape,
    StoredFieldError,
    as_stored,
    document,
    from_stored,
    is_int,
    list_of,
    mapping_of,
    optional,
    stored,
    stored_rest,
)
from harness.suite.design import DesignLock
from harness.suite.schema import (
    SEQUENTIAL,
    ClaimSpec,
    ContrastSpec,
    GateSpec,
    PremiseSpec,
    StoredSequential,
    ValiditySpec,
    section_from_stored,
)

_Spec = TypeVar("_Spec", bound=BaseModel)
_Declared = TypeVar("_Declared")


class StoredSuiteError(ValueError):
    """A suite.json this harness cannot read: one line naming the file and the key."""


def _or_default(shape: Shape, default: Any) -> Shape:
    """``shape``, or null read as ``default``: a key written as null reads as one the file lacks."""
    return Shape(f"{shape.expected} or null", lambda value: value is None or shape.test(value),
                 lambda value, where: copy.copy(default) if value is None else shape.load(value, where),
                 lambda value: None if value is None else shape.dump(value))


def _key(shape: Shape, default: Any = None, omit: bool = False) -> Any:
    """A suite.json key of ``shape``: absent or null, it reads as ``default`` (a folder written before it was
    recorded); ``omit``: written only when it is not None."""
    return stored(_or_default(shape, default), missing=default, omit_missing=omit,
                  default_factory=lambda: copy.copy(default))


LIST = Shape("a list", lambda value: isinstance(value, list))
TEXTS = list_of(STRING, "a list of text")


@dataclass(frozen=True)
class StoredArm:
    """One arm as suite.json keeps it: its label at each of its sweep points (in order), params and sweep."""

    labels: tuple[str, ...] = stored(_or_default(TEXTS, ()), missing=())
    params: Mapping[str, Any] = _key(MAPPING, {})
    sweep: Mapping[str, list[Any]] = _key(MAPPING, {})


def _arms(entries: dict[str, Any], where: str) -> dict[str, StoredArm]:
    """Each arm's entry; one written without labels (or as null) is labelled by its name (a run of no sweep)."""
    arms = {}
    for name, entry in entries.items():
        arm = from_stored(StoredArm, {} if entry is None else entry, f"{where}.{name}.")
        arms[name] = arm if arm.labels else replace(arm, labels=(name,))
    return arms


ARMS = Shape("a mapping", lambda value: isinstance(value, dict), _arms,
             lambda arms: {name: as_stored(arm) for name, arm in arms.items()})


@dataclass(frozen=True)
class TunedArm:
    """The params a tuning lock chose for one arm, and the tuned keys the arm sets itself (kept as it sets them)."""

    params: Mapping[str, Any] = stored(MAPPING)
    kept: Mapping[str, Any] = stored(MAPPING)


@dataclass(frozen=True)
class TunedParams:
    """suite.json's ``tuned``: the lock that gave the arms their tuned params (its file name and the hash of
    the tune block it was made for) and each tuned arm's entry."""

    lock: str = stored(STRING)
    tune_hash: str = stored(STRING)
    arms: Mapping[str, TunedArm] = stored(mapping_of(document(TunedArm), "a mapping of arm entries"))


def _section(model: type[_Spec], dump: Callable[[_Spec], dict[str, Any]],
             read: Callable[[dict[str, Any], str], _Spec] | None = None) -> Shape:
    """A section stored as its model's fields (read by ``section_from_stored``, or ``read``), written by ``dump``."""
    return Shape("a mapping", lambda value: isinstance(value, dict),
                 read or (lambda value, where: section_from_stored(model, value, where)), dump)


def _claim(value: dict[str, Any], key: str) -> ClaimSpec:
    """A stored claim; a margined test without its margin (which every claim of that test had when it was
    declared) is refused here, not met as a None in every report that states the claim."""
    claim = section_from_stored(ClaimSpec, value, key)
    if claim.needs.reference and claim.margin is None and claim.relative_margin is None:
        raise StoredFieldError(f"{key}: test {claim.test!r} without a 'margin' or 'relative_margin'")
    return claim


def _metric(name: str, spec: Any, where: str) -> Metric:
    """A metric's declaration, stored under its name; one its own checks refuse is one line naming it."""
    if not isinstance(spec, dict):
        raise StoredFieldError(f"{where}.{name}: expected a mapping, got {type(spec).__name__}")
    try:
        return Metric.from_stored(name, spec, f"{where}.{name}.")
    except StoredFieldError:
        raise
    except ValueError as exc:
        raise StoredFieldError(f"{where}.{name}: {exc}") from None


METRICS = Shape("a mapping", lambda value: isinstance(value, dict),
                lambda value, where: {name: _metric(name, spec, where) for name, spec in value.items()},
                lambda metrics: {name: as_stored(metric) for name, metric in metrics.items()})


def _declared(kind: Callable[..., _Declared]) -> Shape:
    """A list of plot declarations: an entry the plots cannot use is skipped, not fatal (as the plots always
    did): the run's numbers do not depend on it."""
    def load(entries: list[Any], where: str) -> tuple[_Declared, ...]:
        found = []
        for entry in entries:
            try:
                found.append(kind(**entry))
            except TypeError:
                continue
        return tuple(found)

    return Shape("a list", lambda value: isinstance(value, list), load,
                 lambda declared: [asdict(item) for item in declared])


@dataclass(frozen=True)
class StoredSuite:
    """One run folder's resolved suite, task declarations and device (``suite.json``). Each field is its key in
    the file (``stored``); ``rest`` keeps the keys this version does not read, as written."""

    stored_schema = Schema(1, missing=1)  # bump when a field changes meaning; a reader refuses a newer folder
    suite: str | None = _key(STRING)
    profile: str | None = _key(STRING)
    description: str | None = _key(STRING)
    source: str | None = _key(STRING)
    task: str | None = _key(STRING)
    # compared as text: written as the task declares it
    task_version: str | int | None = _key(Shape("text or an integer", lambda v: isinstance(v, str) or is_int(v)))
    seeds: tuple[int, ...] = _key(list_of(INTEGER, "a list of integers"), ())
    params: Mapping[str, Any] = _key(MAPPING, {})
    sweep: Mapping[str, list[Any]] = _key(mapping_of(LIST, "a mapping of lists"), {})
    arms: Mapping[str, StoredArm] = _key(ARMS, {})
    contrasts: tuple[ContrastSpec, ...] = _key(list_of(_section(ContrastSpec, lambda c: c.model_dump() | {
        "name": c.label}), "a list"), ())
    validity: ValiditySpec | None = _key(_section(ValiditySpec, lambda v: v.model_dump()))
    claims: tuple[ClaimSpec, ...] = _key(list_of(_section(ClaimSpec, lambda c: c.model_dump(exclude_none=True),
                                                          _claim), "a list"), ())
    premises: tuple[PremiseSpec, ...] = _key(list_of(_section(PremiseSpec, lambda p: p.model_dump(exclude_none=True)),
                                                     "a list"), ())
    confidence: float | None = _key(NUMBER)  # None: written before it was declared (readers take 0.95)
    gate: GateSpec = _key(_section(GateSpec, lambda g: g.model_dump()), GateSpec())
    sequential: StoredSequential | None = _key(SEQUENTIAL)
    tuned: TunedParams | None = _key(document(TunedParams), omit=True)
    # the arm under test: claims read for or against it (not part of the design)
    mechanism: str | None = _key(STRING, omit=True)
    metrics: Mapping[str, Metric] = _key(METRICS, {})
    detail_scatters: tuple[DetailScatter, ...] = _key(_declared(DetailScatter), ())
    pareto_views: tuple[ParetoView, ...] = _key(_declared(ParetoView), ())
    device: str | None = _key(STRING)
    device_class: str | None = _key(STRING)
    device_name: str | None = _key(STRING)
    # the design the folder's trials belong to (store.check_design)
    design: DesignLock | None = _key(document(DesignLock, "not a field of a design"), omit=True)
    # the expansion at the current seeds; None: written before it was
    trial_ids: tuple[str, ...] | None = _key(TEXTS, omit=True)
    # the ledger id of the registered design the run confirms; None: exploratory
    registration: str | None = _key(STRING, omit=True)
    rest: Mapping[str, Any] = stored_rest()

    @property
    def named_metrics(self) -> set[str]:
        """The metrics the claims and the validity check name."""
        return {c.metric for c in self.claims} | ({self.validity.metric} if self.validity else set())

    def arm_labels(self, arm: str | None = None) -> list[str]:
        """Declared labels in suite order, optionally of one arm."""
        return [label for name, entry in self.arms.items() if arm is None or name == arm for label in entry.labels]

    def includes(self, trial_id: str, seed: int | None) -> bool:
        """Whether a stored trial belongs to the suite's current expansion and seeds: a trial of a changed
        param, sweep or arm, or of seeds the design does not have, is stale and set aside by every reader
        (report, gate, plan, reproduce), so a rerun reports what a fresh run would. A folder written before
        expansions were recorded is read by its seeds alone."""
        if self.trial_ids is not None:
            return trial_id in self.trial_ids
        return not self.seeds or seed in self.seeds

    @classmethod
    def read(cls, path: Path, data: Any) -> StoredSuite:
        """``from_stored`` for the file at ``path``: any problem is one line that names it."""
        try:
            return cls.from_stored(data)
        except StoredSuiteError as exc:
            raise StoredSuiteError(f"{path}: {exc}") from None

    @classmethod
    def from_stored(cls, data: Any) -> StoredSuite:
        """The typed suite of a suite.json's content; StoredSuiteError names the key that is wrong."""
        try:
            return from_stored(cls, data)
        except StoredFieldError as exc:
            raise StoredSuiteError(str(exc)) from None
