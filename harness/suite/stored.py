"""The resolved suite as a results folder stores it (``<suite>/<profile>/suite.json``), read back typed.

Analysis and gating read a run's suite through ``StoredSuite`` alone, so each stored field is checked in
one place and a hand-edited or newer file is refused in one line naming the file and the key, instead
of failing somewhere downstream. ``as_stored`` gives the dict the writer stores (the same bytes once
written canonically); keys this version does not know are kept as they were. Folders written before a
field was recorded read with its old default (no ``design``, no ``trial_ids``, partial ``arms``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Callable, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from harness.core.metrics import DetailScatter, Metric, ParetoView
from harness.suite.claim_needs import CLAIM_TEST_NEEDS, REQUIRED_MARGIN
from harness.suite.schema import ClaimSpec, ContrastSpec, GateSpec, PremiseSpec, ValiditySpec

SCHEMA_VERSION = 1  # bump when a field changes meaning; a reader refuses a folder of a newer one
_Spec = TypeVar("_Spec", bound=BaseModel)
_Declared = TypeVar("_Declared")


class StoredSuiteError(ValueError):
    """A suite.json this harness cannot read: one line naming the file and the key."""


@dataclass(frozen=True)
class StoredArm:
    labels: tuple[str, ...]  # the arm's label at each of its sweep points, in order
    params: Mapping[str, Any] = field(default_factory=dict)
    sweep: Mapping[str, list[Any]] = field(default_factory=dict)

    def as_stored(self) -> dict[str, Any]:
        return {"params": dict(self.params), "sweep": dict(self.sweep), "labels": list(self.labels)}


@dataclass(frozen=True)
class StoredSuite:
    """One run folder's resolved suite, task declarations and device (``suite.json``)."""

    suite: str | None = None
    profile: str | None = None
    description: str | None = None
    source: str | None = None
    task: str | None = None
    task_version: Any = None  # compared as text: written as the task declares it
    seeds: tuple[int, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    sweep: Mapping[str, list[Any]] = field(default_factory=dict)
    arms: Mapping[str, StoredArm] = field(default_factory=dict)
    contrasts: tuple[ContrastSpec, ...] = ()
    validity: ValiditySpec | None = None
    claims: tuple[ClaimSpec, ...] = ()
    premises: tuple[PremiseSpec, ...] = ()
    confidence: float | None = None  # None: written before it was declared (readers take 0.95)
    gate: GateSpec = field(default_factory=GateSpec)
    sequential: Mapping[str, Any] | None = None  # checked where it is read (suite.schema.sequential_from_stored)
    tuned: Mapping[str, Any] | None = None
    mechanism: str | None = None  # the arm under test: claims read for or against it (not part of the design)
    metrics: Mapping[str, Metric] = field(default_factory=dict)
    detail_scatters: tuple[DetailScatter, ...] = ()
    pareto_views: tuple[ParetoView, ...] = ()
    device: str | None = None
    device_class: str | None = None
    device_name: str | None = None
    design: Mapping[str, Any] | None = None  # the design the folder's trials belong to (store.check_design)
    trial_ids: tuple[str, ...] | None = None  # the expansion at the current seeds; None: written before it was
    registration: str | None = None  # the ledger id of the registered design the run confirms; None: exploratory
    schema: int = SCHEMA_VERSION
    unknown: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not read, kept as written

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
        if not isinstance(data, dict):
            raise StoredSuiteError(f"holds {type(data).__name__}, not a stored suite")
        schema = _value(data, "schema", int, SCHEMA_VERSION)
        if schema > SCHEMA_VERSION:
            raise StoredSuiteError(f"schema: version {schema} is newer than this harness reads (up to "
                                   f"{SCHEMA_VERSION}); analyse it with the harness version that wrote it")
        arms = {str(name): _arm(name, entry) for name, entry in _value(data, "arms", dict, {}).items()}
        metrics = {}
        for name, spec in _value(data, "metrics", dict, {}).items():
            try:
                metrics[str(name)] = Metric.from_stored(str(name), _mapping(spec, f"metrics.{name}"))
            except ValueError as exc:
                raise StoredSuiteError(f"metrics.{name}: {exc}") from None
        validity = _value(data, "validity", dict, None)
        return cls(
            suite=_value(data, "suite", str, None),
            profile=_value(data, "profile", str, None),
            description=_value(data, "description", str, None),
            source=_value(data, "source", str, None),
            task=_value(data, "task", str, None),
            task_version=_value(data, "task_version", (str, int), None),
            seeds=tuple(_items(data, "seeds", lambda s, key: _typed(s, int, key))),
            params=_value(data, "params", dict, {}),
            sweep={str(k): _typed(v, list, f"sweep.{k}") for k, v in _value(data, "sweep", dict, {}).items()},
            arms=arms,
            contrasts=tuple(_items(data, "contrasts", lambda c, key: _spec(ContrastSpec, c, key))),
            validity=None if validity is None else _spec(ValiditySpec, validity, "validity"),
            claims=tuple(_items(data, "claims", _claim)),
            premises=tuple(_items(data, "premises", lambda p, key: _spec(PremiseSpec, p, key))),
            confidence=_value(data, "confidence", (int, float), None),
            gate=_spec(GateSpec, _value(data, "gate", dict, {}), "gate"),
            sequential=_value(data, "sequential", dict, None),
            tuned=_value(data, "tuned", dict, None),
            mechanism=_value(data, "mechanism", str, None),
            metrics=metrics,
            # a declaration the plots cannot use is skipped, not fatal: the run's numbers do not depend on it
            detail_scatters=_declared(DetailScatter, _value(data, "detail_scatters", list, [])),
            pareto_views=_declared(ParetoView, _value(data, "pareto_views", list, [])),
            device=_value(data, "device", str, None),
            device_class=_value(data, "device_class", str, None),
            device_name=_value(data, "device_name", str, None),
            design=_value(data, "design", dict, None),
            trial_ids=None if data.get("trial_ids") is None else tuple(
                _items(data, "trial_ids", lambda t, key: _typed(t, str, key))),
            registration=_value(data, "registration", str, None),
            schema=schema,
            unknown={k: v for k, v in data.items() if k not in _KNOWN},
        )

    def as_stored(self) -> dict[str, Any]:
        """The dict the writer stores: ``from_stored(s.as_stored()) == s``, and a suite.json of this schema
        gives back its own content (keys absent from it and optional in it stay absent)."""
        stored: dict[str, Any] = {
            "schema": self.schema,
            "suite": self.suite,
            "description": self.description,
            "source": self.source,
            "profile": self.profile,
            "task": self.task,
            "task_version": self.task_version,
            "seeds": list(self.seeds),
            "params": dict(self.params),
            "sweep": dict(self.sweep),
            "arms": {name: arm.as_stored() for name, arm in self.arms.items()},
            "contrasts": [c.model_dump() | {"name": c.label} for c in self.contrasts],
            "validity": self.validity.model_dump() if self.validity else None,
            "claims": [c.model_dump(exclude_none=True) for c in self.claims],
            "premises": [p.model_dump(exclude_none=True) for p in self.premises],
            "confidence": self.confidence,
            "gate": self.gate.model_dump(),
            "sequential": None if self.sequential is None else dict(self.sequential),
            "metrics": {name: metric.as_stored() for name, metric in self.metrics.items()},
            "detail_scatters": [asdict(s) for s in self.detail_scatters],
            "pareto_views": [asdict(v) for v in self.pareto_views],
            "device": self.device,
            "device_class": self.device_class,
            "device_name": self.device_name,
        }
        optional = {"tuned": self.tuned, "design": self.design, "mechanism": self.mechanism,
                    "trial_ids": None if self.trial_ids is None else list(self.trial_ids),
                    "registration": self.registration}
        stored.update({key: value for key, value in optional.items() if value is not None})
        return stored | dict(self.unknown)


_KNOWN = frozenset(StoredSuite.__dataclass_fields__) - {"unknown"}


def _typed(value: Any, kind: type | tuple[type, ...], key: str) -> Any:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise StoredSuiteError(f"{key}: expected {_READABLE.get(names, names)}, got {_shown(value)}")
    return value


_READABLE = {"str": "text", "int": "an integer", "int or float": "a number", "dict": "a mapping",
             "list": "a list", "str or int": "text or an integer"}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _value(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any, where: str = "") -> Any:
    """``data[key]`` of the expected type; the default when absent or null (``where``: the section it is in)."""
    value = data.get(key)
    return default if value is None else _typed(value, kind, f"{where}.{key}" if where else key)


def _mapping(value: Any, key: str) -> dict[str, Any]:
    return _typed(value, dict, key)


def _items(data: Mapping[str, Any], key: str, parse: Callable[[Any, str], Any]) -> list[Any]:
    return [parse(item, f"{key}[{n}]") for n, item in enumerate(_value(data, key, list, []))]


def _spec(model: type[_Spec], value: Any, key: str) -> _Spec:
    """One stored section as its suite-file model, each field checked against the model's type and
    bounds. The model's cross-field rules are not applied again: they were checked when the run was
    declared, and a rule added since (a claim's reference) must not make an older folder unreadable."""
    data = _mapping(value, key)
    fields = model.model_fields
    for name in data:
        if name not in fields:
            raise StoredSuiteError(f"{key}.{name}: not a field this harness knows (one of {', '.join(fields)})")
    values = {}
    for name, info in fields.items():
        if name not in data:
            if info.is_required():
                raise StoredSuiteError(f"{key}.{name}: missing")
            continue
        try:
            values[name] = _adapter(model, name).validate_python(data[name])
        except ValidationError as exc:
            error = exc.errors()[0]
            raise StoredSuiteError(f"{'.'.join([key, name, *map(str, error['loc'])])}: {error['msg']}") from None
    return model.model_construct(_fields_set=set(fields), **values)


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    kind = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    return TypeAdapter(kind, config=ConfigDict(allow_inf_nan=False))


def _claim(value: Any, key: str) -> ClaimSpec:
    """A stored claim; a margined test without its margin (which every claim of that test had when it was
    declared) is refused here, not met as a None in every report that states the claim."""
    claim = _spec(ClaimSpec, value, key)
    if CLAIM_TEST_NEEDS[claim.test].margin == REQUIRED_MARGIN and claim.margin is None and claim.relative_margin is None:
        raise StoredSuiteError(f"{key}: test {claim.test!r} without a 'margin' or 'relative_margin'")
    return claim


def _arm(name: str, entry: Any) -> StoredArm:
    """An arm's entry; one written without labels is labelled by its name (a run of no sweep)."""
    key = f"arms.{name}"
    entry = {} if entry is None else _mapping(entry, key)
    labels = [_typed(label, str, f"{key}.labels[{n}]")
              for n, label in enumerate(_value(entry, "labels", list, [], key))]
    return StoredArm(tuple(labels or [str(name)]), _value(entry, "params", dict, {}, key),
                     _value(entry, "sweep", dict, {}, key))


def _declared(kind: Callable[..., _Declared], entries: list[Any]) -> tuple[_Declared, ...]:
    """The plot declarations that are one (a malformed entry is skipped, as the plots always did)."""
    found = []
    for entry in entries:
        try:
            found.append(kind(**entry))
        except TypeError:
            continue
    return tuple(found)
