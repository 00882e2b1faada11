"""The trial and its record: what one trial is (``Trial``: suite, arm, seed, sweep point, params, code,
identified by a content hash) and the one shape of what it produced (``TrialRecord``, which holds its
``Trial``), from the executor that builds it to the store, the MLflow mirror, analysis, the gate and reproduce.

A record is a frozen ``TrialRecord``; JSON exists only at the store's edge. Its fields are declared with the
document layer (``core.stored_fields``), which reads and writes them: records enter the program from JSON
only through ``from_json``, which checks every field and fills the ones older records lack, so no reader has
to guess at a field's type or presence; ``to_json`` is the checked way out. A record written by a newer
harness (a higher ``schema``) is refused rather than misread.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping

from harness.core.stored_fields import (
    ANY,
    INTEGER,
    PRESENT,
    STRING,
    TEXT,
    TEXT_MAPPING,
    Schema,
    Shape,
    StoredFieldError,
    as_stored,
    document,
    from_stored,
    optional,
    stored,
)
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment

RECORD_SCHEMA = 1
MAX_MAGNITUDE = 1e100  # beyond it a difference's square (the statistics) overflows; no measurement is that large
MLFLOW_KEY_LENGTH = 250  # MLflow refuses a longer metric name, so its trial could never be mirrored
MAX_STEP = 2**63 - 1  # MLflow stores a curve step as a 64-bit integer
SEED_BATCH = "seed_batch"  # environment and detail key: the seeds a trial was trained with as one batched model


class Status(StrEnum):
    """How a trial ended: its task returned metrics, or it failed (an error, an exit, a timeout, a dead worker)."""

    FINISHED = "finished"
    FAILED = "failed"


def trial_title(arm_label: str, seed: int, point_label: str) -> str:
    """'arm seed=N point': how progress lines, failure lists and comparisons name one trial."""
    return f"{arm_label} seed={seed}" + (f" {point_label}" if point_label else "")


def point_label(point: Mapping[str, Any]) -> str:
    """A sweep point's ``axis=value,...`` label, by which results, reports and baselines name it."""
    return ",".join(f"{k}={v}" for k, v in point.items())


def config_hash(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# a JSON object, read as a dict of its own (a record's params, point and details)
OBJECT = Shape("a mapping", lambda value: isinstance(value, Mapping), lambda value, where: dict(value))


@dataclass(frozen=True)
class _Code:
    """Where a record keeps its trial's code: the task's source hash, in its environment."""

    environment: TaskEnvironment = stored(document(TaskEnvironment), missing=TaskEnvironment())


# a trial's code as its record stores it: read from its environment (task_code_sha256), written there too
CODE = Shape("a record", lambda value: True,
             lambda data, where: from_stored(_Code, data, where).environment.task_code_sha256, lambda code: {})


@dataclass(frozen=True)
class Trial:
    """One trial of a suite: an arm variant at a seed and sweep point, with the params it runs. Its fields
    are stored beside the rest of its record's (each under its name)."""

    suite: str = stored(STRING)
    profile: str = stored(STRING)
    task: str = stored(STRING)
    task_version: str = stored(STRING)
    arm: str = stored(STRING)
    arm_label: str = stored(STRING)
    seed: int = stored(INTEGER)
    point: dict[str, Any] = stored(OBJECT)  # the sweep point: axis -> value
    params: dict[str, Any] = stored(OBJECT)  # the validated params the task runs with
    # sha256 of the task's source (harness.tasks.source); "" for records made before it was kept. A record
    # stores it in its environment, not beside the other fields, so two trials are the same trial without it.
    code: str = stored(CODE, flat=True, default="", compare=False)

    @property
    def point_label(self) -> str:
        return point_label(self.point)

    @property
    def identity(self) -> dict[str, Any]:
        """What determines the result: the hash covers exactly this."""
        identity = {
            "task": self.task,
            "task_version": self.task_version,
            "arm": self.arm_label,
            "seed": self.seed,
            "params": self.params,
        }
        return identity | {"code": self.code} if self.code else identity

    @property
    def trial_id(self) -> str:
        return config_hash(self.identity)

    @property
    def title(self) -> str:
        return trial_title(self.arm_label, self.seed, self.point_label)


def usable(value: float) -> bool:
    """Whether analysis can take a value: finite and within ``MAX_MAGNITUDE``. Anything else is stored as
    null, as a NaN is (a dropped pair), so that 1e308 cannot overflow a sum into inf or a TypeError."""
    return math.isfinite(value) and abs(value) <= MAX_MAGNITUDE


def key_problem(key: str) -> str | None:
    """Why a metric or curve key can never be mirrored (longer than MLflow allows, as MLflow names it), or None."""
    length = len(key.replace("@", "_at_"))  # metrics.tracking_name: how the mirror spells a qualifier
    if length > MLFLOW_KEY_LENGTH:
        return f"metric key {key[:40]!r}... is {length} characters; MLflow keeps at most {MLFLOW_KEY_LENGTH}"
    return None


def _keyed(item: Shape, expected: str) -> Shape:
    """A mapping of metric or curve keys (each one MLflow can hold) to values of ``item``'s shape."""
    def load(value: Mapping[str, Any], where: str) -> dict[str, Any]:
        problems = [problem for problem in map(key_problem, map(str, value)) if problem]
        if problems:
            raise StoredFieldError(f"{where}: {problems[0]}")
        return {str(key): item.read(entry, f"{where}.{key}") for key, entry in value.items()}

    return Shape(expected, lambda value: isinstance(value, Mapping), load,
                 lambda value: {key: item.dump(entry) for key, entry in value.items()})


def _is_point(point: Any) -> bool:
    if not isinstance(point, list) or len(point) != 2:
        return False
    step, value = point
    return (_is_number(step) and math.isfinite(step) and abs(step) <= MAX_STEP
            and (value is None or _is_number(value)))


def _kept(value: float | None) -> float | None:
    """A task's value as the record keeps it: one analysis cannot take is null."""
    return value if value is None or usable(value) else None


# a final metric: a number, or null where it was not finite (an int read as a float)
METRIC = Shape("a number or null", lambda value: value is None or _is_number(value),
               lambda value, where: None if _kept(value) is None else float(value))
POINT = Shape("a [step, value] point", _is_point, lambda point, where: [point[0], _kept(point[1])])
CURVE = Shape("a list of [step, value] points", lambda value: isinstance(value, list),
              lambda points, where: [POINT.read(point, f"{where}[{n}]") for n, point in enumerate(points)])
STATUS = Shape(f"one of {', '.join(Status)}", lambda value: isinstance(value, str) and value in set(Status),
               lambda value, where: Status(value), str)
PACKAGES = Shape("a list of strings", lambda value: isinstance(value, list) and all(isinstance(p, str) for p in value),
                 lambda value, where: list(value))
SECONDS = Shape("a non-negative number", lambda value: _is_number(value) and value >= 0,
                lambda value, where: float(value))


@dataclass(frozen=True)
class TrialRecord:
    """What one trial produced: the trial (``trial``; its fields read through the record, as ``record.seed``)
    and its outcome. Frozen, so every reader sees the record as it was stored; its values are plain JSON-able
    data. ``trial_id`` and ``point_label`` are as stored (a record may predate how they are computed now).
    Each field is its key in the stored record (``stored``); a record written before a field existed reads
    with its default, and one written before records had a schema version is of the first."""

    stored_schema = Schema(RECORD_SCHEMA, missing=1)
    trial_id: str = stored(TEXT)
    trial: Trial = stored(Shape("a record", lambda data: True, lambda data, where: from_stored(Trial, data, where),
                                as_stored), flat=True)
    point_label: str = stored(STRING)
    status: Status = stored(STATUS)
    error: str | None = stored(optional(STRING), missing=None, default=None)  # why a failed trial failed
    # final values; None where not finite
    metrics: dict[str, float | None] = stored(_keyed(METRIC, "a mapping of numbers"), missing={},
                                              default_factory=dict)
    # name -> [[step, value], ...]
    curves: dict[str, list[list[float | None]]] = stored(_keyed(CURVE, "a mapping of point lists"), missing={},
                                                         default_factory=dict)
    # JSON-able task details (per-item values, cache use, traceback)
    details: dict[str, Any] = stored(OBJECT, missing={}, default_factory=dict)
    # code, libraries, hardware, determinism (typed by core.trial_environment)
    environment: dict[str, str] = stored(TEXT_MAPPING, missing={}, default_factory=dict)
    # name==version of the process that ran the trial
    packages: list[str] = stored(PACKAGES, missing=[], default_factory=list)
    started_at: str = stored(STRING, missing="", default="")  # ISO 8601, UTC
    wall_seconds: float = stored(SECONDS, missing=0.0, default=0.0)

    @property
    def suite(self) -> str:
        return self.trial.suite

    @property
    def profile(self) -> str:
        return self.trial.profile

    @property
    def task(self) -> str:
        return self.trial.task

    @property
    def task_version(self) -> str:
        return self.trial.task_version

    @property
    def arm(self) -> str:
        return self.trial.arm

    @property
    def arm_label(self) -> str:
        return self.trial.arm_label

    @property
    def seed(self) -> int:
        return self.trial.seed

    @property
    def point(self) -> dict[str, Any]:
        return self.trial.point

    @property
    def params(self) -> dict[str, Any]:
        return self.trial.params

    @property
    def finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def title(self) -> str:
        return trial_title(self.arm_label, self.seed, self.point_label)

    @property
    def seed_batch(self) -> tuple[int, ...]:
        """The seeds this trial was trained with as one batched model, in order; () when it ran alone."""
        return TrialEnvironment.of(self.environment).seed_batch or ()

    def with_details(self, **extra: Any) -> TrialRecord:
        """The same record with ``extra`` added to its details (speed measured under load)."""
        return dataclasses.replace(self, details={**self.details, **extra})


class RecordError(ValueError):
    """Data that is not a trial record; the message names the field and what was expected."""


@dataclass(frozen=True)
class RecordMark:
    """What says a stored mapping is a trial's record before its fields are checked: the trial id it names and
    whether it holds a status (of whatever shape: ``from_json`` checks it)."""

    trial_id: Any = stored(ANY, missing=None)
    status: bool = stored(PRESENT, missing=False)


def task_value(key: str, value: Any) -> float:
    """A value a task reported for ``key`` (a final metric or a curve point) as a float; ValueError naming the
    key for text (``"0.99"``) or a bool (``True``), which ``float()`` would turn into a number silently, and
    for a key MLflow cannot hold. Numbers of any kind (numpy, a 0-d tensor) are taken."""
    problem = key_problem(key)
    if problem:
        raise ValueError(problem)
    flag = isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")
    if flag or isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise ValueError(f"metric {key!r} is {value!r} ({type(value).__name__}), not a number: a task reports "
                         "numbers, never text or a bool")
    return float(value)


def task_step(key: str, step: Any) -> int:
    """A curve step as MLflow stores it (an integer within 64 bits); ValueError naming the curve otherwise."""
    if (isinstance(step, (bool, str, bytes)) or not hasattr(step, "__float__") or not math.isfinite(float(step))
            or abs(float(step)) > MAX_STEP):
        raise ValueError(f"curve {key!r}: step {step!r} is not an integer within MLflow's 64-bit step range")
    return int(step)


def from_json(data: Any) -> TrialRecord:
    """A checked record from parsed JSON (or any mapping); RecordError names the first bad field."""
    if isinstance(data, Mapping) and not isinstance(data, dict):
        data = dict(data)
    try:
        return from_stored(TrialRecord, data)
    except StoredFieldError as exc:
        raise RecordError(str(exc)) from None


def to_json(record: TrialRecord) -> dict[str, Any]:
    """The record as the JSON object the store writes, checked on the way out as on the way in (and written as
    it reads back: a value analysis cannot take is null)."""
    return as_stored(from_json(as_stored(record)))
