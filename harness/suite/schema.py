"""The shape of a suite file, validated with pydantic before anything runs."""
from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Iterable, Literal, Mapping, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from harness.core.stored_fields import Shape, StoredFieldError
from harness.suite.claim_needs import CLAIM_TEST_NEEDS, Needs, needs_problem

ClaimTestName = Literal[tuple(CLAIM_TEST_NEEDS)]  # type: ignore[valid-type]  # the table's names, in its order
SweepAxes = dict[str, list[Any]]

# Names that become folder, file or experiment names (suite, profile, arm, contrast): a plain word.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
SAFE_NAME_RULE = "1-64 characters from A-Z a-z 0-9 _ . -, not starting with '.' or '-'"
# Seeds seed python, numpy and torch (torch.manual_seed takes at most 64 bits; a signed 64-bit
# integer also survives JSON readers and SQL columns unchanged).
SEED_LIMIT = 2**63
# What a results folder holds beside its <suite> folders (mlflow.db.broken-<time> too), so no suite may be named so.
RESERVED_SUITE_NAMES = ("mlflow.db", "mlartifacts", "cache", "reproductions")


def check_name(name: str, what: str) -> str:
    """``name`` if it is safe as a file or folder name, else a ValueError naming the rule."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise ValueError(f"{what} name {name!r} is not a plain word ({SAFE_NAME_RULE}); it is used in paths")
    return name


def check_seeds(seeds: Iterable[int]) -> list[int]:
    """Seeds as given, refused when one repeats or does not fit the random number generators."""
    seeds, seen = list(seeds), set()
    for seed in seeds:
        if not 0 <= seed < SEED_LIMIT:
            raise ValueError(f"seed {seed} is out of range; a seed is an integer 0 <= seed < 2**63")
        if seed in seen:
            raise ValueError(f"seed {seed} is given twice; each seed runs once")
        seen.add(seed)
    return seeds


class Strict(BaseModel):
    # NaN compares false with every bound and tolerance, so it would pass any check it reached
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _non_empty_axes(axes: SweepAxes | None) -> SweepAxes | None:
    for name, values in (axes or {}).items():
        if not values:
            raise ValueError(f"sweep axis {name!r} has no values")
    return axes


class ContrastSpec(Strict):
    treatment: str
    control: str
    name: str | None = None
    margins: dict[str, float] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str | None) -> str | None:
        return name if name is None else check_name(name, "contrast")

    @property
    def label(self) -> str:
        return self.name or f"{self.treatment}-vs-{self.control}"


class ClaimSpec(Strict):
    """A primary hypothesis. Non-inferiority and equivalence name a ``reference`` contrast that shows
    the control works in this run (assay sensitivity); their margin is absolute (``margin``, metric
    units) or a fraction of the reference effect (``relative_margin``). Superiority may declare an
    absolute ``margin``, the smallest gain worth having: it passes only above it and fails once the
    gain is surely below it, so a mechanism that does (almost) nothing is decided, not left open."""

    contrast: str
    metric: str
    test: ClaimTestName
    margin: float | None = Field(None, ge=0)
    relative_margin: float | None = Field(None, gt=0, lt=1)
    reference: str | None = None
    min: float | None = None
    max: float | None = None

    @property
    def needs(self) -> Needs:
        """What the claim's test needs of it (its row of ``CLAIM_TEST_NEEDS``)."""
        return CLAIM_TEST_NEEDS[self.test]

    @model_validator(mode="after")
    def _needs(self) -> "ClaimSpec":
        problem = needs_problem(self.test, self.margin, self.relative_margin, self.reference, self.min, self.max)
        if problem:
            raise ValueError(problem)
        return self


class SequentialSpec(Strict):
    """Look after the suite's seeds and after every ``batch`` more, up to ``max_seeds``, stopping once
    every claim is decided (group-sequential design; harness/analysis/stats/sequential_design.py)."""

    max_seeds: int = Field(ge=2, le=1000)
    batch: int = Field(1, ge=1, le=1000)  # le: as max_seeds
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"
    futility: float | None = Field(0.10, ge=0, lt=1, description="conditional power below which a claim stops")
    futility_from: float = Field(0.0, ge=0, lt=1, description=(
        "share of max_seeds before which no claim stops as futile (an early look's estimate is too noisy "
        "to give up on)"))
    skew_bound: float | None = Field(None, gt=0, le=3, description=(  # le: MAX_SKEW_BOUND (analysis.stats)
        "declared |skewness| of the per-seed differences: claims, premises and validity cross on critical "
        "values calibrated to it (harness/analysis/stats/skew_calibration.py)"))
    top_up: bool = Field(False, description=(
        "later seeds may come from other runs (another results folder or machine) merged into the run: the "
        "audit's single_run check then asks only that the runs follow one another and share no seed"))

    @model_serializer(mode="wrap")
    def _bound_only_when_declared(self, handler: Any) -> Any:
        """Stored only when declared: the designs locked before they existed keep their hash."""
        stored = handler(self)
        if self.skew_bound is None:
            stored.pop("skew_bound", None)
        if not self.top_up:
            stored.pop("top_up", None)
        return stored


def sequential_as_stored(spec: SequentialSpec, first: int) -> dict[str, Any]:
    """A suite's schedule as suite.json keeps it (``sequential``, and in its design lock): the spec's fields and
    ``first``, the seeds of the first look (the suite's seeds). ``futility_from`` only when set: the designs
    locked before it existed keep their hash."""
    stored = spec.model_dump()
    if not stored["futility_from"]:
        del stored["futility_from"]
    return {"first": first, **stored}


def sequential_from_stored(stored: Mapping[str, Any]) -> tuple[int, SequentialSpec]:
    """The first look and the spec of a schedule as suite.json keeps it (``sequential_as_stored``): the one
    reader of that dict. A received suite.json may say anything, so a schedule harness could not have written
    (a key of the wrong type or out of bounds, one it does not know, a first look past ``max_seeds``) is a
    ValueError naming the key. A schedule stored without ``futility`` stops no claim as futile, as it always
    read (harness writes it)."""
    if not isinstance(stored, Mapping):
        raise ValueError(f"expected a mapping, got {type(stored).__name__}")
    fields = dict(stored)
    if "first" not in fields:
        raise ValueError("first: missing")
    first = fields.pop("first")
    try:
        spec = SequentialSpec.model_validate({"futility": None, **fields}, strict=True)
    except ValidationError as exc:
        where, message, value = _first_error(exc)
        raise ValueError(f"{where}: {message} (got {reprlib.repr(value)})") from None
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= spec.max_seeds:
        raise ValueError(f"first: {first!r} is not a seed count in [1, max_seeds={spec.max_seeds}]")
    return first, spec


_Section = TypeVar("_Section", bound=BaseModel)


def section_from_stored(model: type[_Section], value: Mapping[str, Any], where: str) -> _Section:
    """One section of a suite.json (a contrast, claim, premise, the validity check, the gate) as its suite-file
    model, each field checked against the model's type and bounds; StoredFieldError names the key (``where``
    the section's). The model's cross-field rules are not applied again: they were checked when the run was
    declared, and a rule added since (a claim's reference) must not make an older folder unreadable."""
    fields = model.model_fields
    unknown = [name for name in value if name not in fields]
    if unknown:
        raise StoredFieldError(f"{where}.{unknown[0]}: not a field this harness knows (one of {', '.join(fields)})")
    missing = [name for name, info in fields.items() if info.is_required() and name not in value]
    if missing:
        raise StoredFieldError(f"{where}.{missing[0]}: missing")
    values = {}
    for name, item in value.items():
        try:
            values[name] = _adapter(model, name).validate_python(item)
        except ValidationError as exc:
            inner, message, _ = _first_error(exc)
            raise StoredFieldError(f"{'.'.join(filter(None, [where, name, inner]))}: {message}") from None
    return model.model_construct(_fields_set=set(fields), **values)


def _first_error(exc: ValidationError) -> tuple[str, str, Any]:
    """The first of pydantic's errors: where it is (dotted), what pydantic says, and the value it refused."""
    error = exc.errors()[0]
    return ".".join(map(str, error["loc"])), error["msg"], error["input"]


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    kind = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    return TypeAdapter(kind, config=ConfigDict(allow_inf_nan=False))


@dataclass(frozen=True)
class StoredSequential:
    """A sequential design as suite.json and its design lock keep it (``sequential``): the spec and ``first``,
    the seeds of its first look (the suite's seeds)."""

    first: int
    spec: SequentialSpec

    @property
    def max_seeds(self) -> int:
        return self.spec.max_seeds


def _read_sequential(stored: dict[str, Any], where: str) -> StoredSequential:
    try:
        first, spec = sequential_from_stored(stored)
    except ValueError as exc:  # a received suite.json may say anything
        raise StoredFieldError(f"{where}: not a sequential design harness writes ({exc})") from None
    return StoredSequential(first, spec)


# a stored sequential design, read by ``sequential_from_stored`` and written by ``sequential_as_stored``
SEQUENTIAL = Shape("a mapping", lambda value: isinstance(value, dict), _read_sequential,
                   lambda sequential: sequential_as_stored(sequential.spec, sequential.first))


class ValiditySpec(Strict):
    control: str
    metric: str
    positive: str | None = None
    negative: str | None = None


class PremiseSpec(Strict):
    """A fact about the testbed the claims rely on (the mechanism's regime is present, the arms got
    equal budgets): a bound on one arm's metric or on a contrast's paired difference, checked at
    every sweep point before the claims it names can be read (harness/analysis/decide/premises.py)."""

    name: str
    arm: str | None = None
    contrast: str | None = None
    metric: str
    at_least: float | None = None
    at_most: float | None = None
    claims: list[str] | None = Field(None, min_length=1)  # contrasts whose claims depend on it; None: all

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        return check_name(name, "premise")

    @model_validator(mode="after")
    def _needs(self) -> "PremiseSpec":
        if (self.arm is None) == (self.contrast is None):
            raise ValueError("a premise names exactly one of 'arm' (its values) or 'contrast' (its paired difference)")
        if self.at_least is None and self.at_most is None:
            raise ValueError("a premise needs 'at_least' and/or 'at_most'")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"at_least {self.at_least:g} is above at_most {self.at_most:g}: no value can hold")
        return self

    def describe(self) -> str:
        """'precision asked_slot_auroc >= 0.9, for claims on precision-vs-mean_pool' (harness validate)."""
        subject = f"arm {self.arm}" if self.arm is not None else f"contrast {self.contrast} (paired difference)"
        bounds = " and ".join(f"{symbol} {value:g}" for symbol, value in ((">=", self.at_least), ("<=", self.at_most))
                              if value is not None)
        scope = f"claims on {', '.join(self.claims)}" if self.claims else "every claim"
        return f"premise {self.name}: {subject} {self.metric} {bounds}, for {scope}"


class GateSpec(Strict):
    """Regression tolerances: quality absolute (metric units), speed ratios relative."""

    default_tolerance: float = Field(0.05, ge=0)
    speed: bool = True  # gate speed ratios at all (off where timings are too small to mean anything)
    speed_tolerance: float = Field(0.25, ge=0, lt=1)
    tolerances: dict[str, float] = Field(default_factory=dict)


class ArmOverrides(BaseModel):
    """An arm: param overrides plus an optional arm-level ``sweep`` (one variant per value)."""

    model_config = ConfigDict(extra="allow")

    @property
    def params(self) -> dict[str, Any]:
        return {k: v for k, v in (self.model_extra or {}).items() if k != "sweep"}

    @property
    def sweep(self) -> SweepAxes:
        return dict((self.model_extra or {}).get("sweep") or {})


class TuneSpec(Strict):
    """Per-arm tuning before the confirmatory run (``harness tune``): every tuned arm runs its grid on
    the tuning seeds and the best point by ``metric`` (its declared direction) goes into a committed lock."""

    seeds: list[int] = Field(min_length=1)  # disjoint from every confirmatory seed
    metric: str
    space: SweepAxes  # the grid of every tuned arm
    arms: list[str] | None = None  # default: every arm
    arm_spaces: dict[str, SweepAxes] = Field(default_factory=dict)  # an arm's own grid, replacing `space`
    unequal_grids: str | None = Field(None, min_length=1, description="why tuned arms may get grids of other sizes")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: list[int]) -> list[int]:
        return check_seeds(seeds)


MAX_SEED_BATCH = 64
SEED_BATCH_HELP = ("seeds of one arm and point trained as one batched model, where the task can (values may differ "
                   "in the last bits from one at a time; each trial records its batch)")


class ProfileSpec(Strict):
    description: str = ""
    seeds: list[int] | None = None  # a fixed design unless the profile declares its own `sequential`
    sequential: SequentialSpec | None = None  # `sequential: null` makes the profile fixed
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: SweepAxes | None = None
    arms: dict[str, dict[str, Any]] = Field(default_factory=dict)
    gate: dict[str, Any] = Field(default_factory=dict)  # merged over the suite's gate section
    seed_batch: int | None = Field(None, ge=1, le=MAX_SEED_BATCH, description=SEED_BATCH_HELP)

    @field_validator("sweep")
    @classmethod
    def _axes(cls, axes: SweepAxes | None) -> SweepAxes | None:
        return _non_empty_axes(axes)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: list[int] | None) -> list[int] | None:
        return seeds if seeds is None else check_seeds(seeds)


class SuiteSpec(Strict):
    """One suite as written (before a profile is applied)."""

    suite: str
    description: str = ""
    task: str
    seeds: list[int] = Field(min_length=1)
    sequential: SequentialSpec | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: SweepAxes = Field(default_factory=dict)
    arms: dict[str, ArmOverrides]
    mechanism: str | None = None  # the arm under test: each claim on it reads for or against it
    contrasts: list[ContrastSpec] = Field(default_factory=list)
    validity: ValiditySpec | None = None
    claims: list[ClaimSpec] = Field(default_factory=list)
    premises: list[PremiseSpec] = Field(default_factory=list)
    confidence: float = Field(0.95, gt=0, lt=1, description="confidence level of every interval and test")
    profiles: dict[str, ProfileSpec] = Field(default_factory=dict)
    gate: GateSpec = Field(default_factory=GateSpec)
    tune: TuneSpec | None = None
    seed_batch: int = Field(1, ge=1, le=MAX_SEED_BATCH, description=SEED_BATCH_HELP)

    @field_validator("sweep")
    @classmethod
    def _axes(cls, axes: SweepAxes) -> SweepAxes:
        return _non_empty_axes(axes)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: list[int]) -> list[int]:
        return check_seeds(seeds)

    @field_validator("arms")
    @classmethod
    def _has_arms(cls, arms: dict[str, ArmOverrides]) -> dict[str, ArmOverrides]:
        if not arms:
            raise ValueError("a suite needs at least one arm")
        return arms  # arm and profile names are checked by the loader, which knows their lines

    @field_validator("suite")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        check_name(name, "suite")
        if name in RESERVED_SUITE_NAMES or name.startswith("mlflow.db"):
            raise ValueError(f"suite name {name!r} is reserved: the results folder keeps its own "
                             f"{', '.join(RESERVED_SUITE_NAMES)} there")
        return name


class CollectionSpec(Strict):
    """A file that only includes other suite files (e.g. suites/all.yaml)."""

    include: list[str] = Field(min_length=1)
    description: str = ""
