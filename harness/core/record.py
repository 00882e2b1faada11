"""The trial and its record: what one trial is (``Trial``: suite, arm, seed, sweep point, params, code,
identified by a content hash) and the one shape of what it produced (``TrialRecord``, which holds its
``Trial``), from the executor that builds it to the store, the MLflow mirror, analysis, the gate and reproduce.

A record is a frozen ``TrialRecord``; JSON exists only at the store's edge. Records enter the program
from JSON only through ``from_json``, which checks every field and fills the ones older records lack,
so no reader has to guess at a field's type or presence; ``to_json`` is the checked way out. A record
written by a newer harness (a higher ``schema``) is refused rather than misread.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Mapping

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


@dataclass(frozen=True)
class Trial:
    """One trial of a suite: an arm variant at a seed and sweep point, with the params it runs."""

    suite: str
    profile: str
    task: str
    task_version: str
    arm: str
    arm_label: str
    seed: int
    point: dict[str, Any]  # the sweep point: axis -> value
    params: dict[str, Any]  # the validated params the task runs with
    # sha256 of the task's source (harness.tasks.source); "" for records made before it was kept. A record
    # stores it in its environment, not beside the other fields, so two trials are the same trial without it.
    code: str = field(default="", compare=False)

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


_TRIAL_FIELDS = ("suite", "profile", "task", "task_version", "arm", "arm_label", "seed", "point", "params")


@dataclass(frozen=True)
class TrialRecord:
    """What one trial produced: the trial (``trial``; its fields read through the record, as ``record.seed``)
    and its outcome. Frozen, so every reader sees the record as it was stored; its values are plain JSON-able
    data. ``trial_id`` and ``point_label`` are as stored (a record may predate how they are computed now)."""

    trial_id: str
    trial: Trial
    point_label: str
    status: Status
    error: str | None = None  # why a failed trial failed
    metrics: dict[str, float | None] = field(default_factory=dict)  # final values; None where not finite
    curves: dict[str, list[list[float | None]]] = field(default_factory=dict)  # name -> [[step, value], ...]
    details: dict[str, Any] = field(default_factory=dict)  # JSON-able task details (per-item values, cache use, traceback)
    environment: dict[str, str] = field(default_factory=dict)  # code, libraries, hardware, determinism
    packages: list[str] = field(default_factory=list)  # name==version of the process that ran the trial
    started_at: str = ""  # ISO 8601, UTC
    wall_seconds: float = 0.0
    schema: int = RECORD_SCHEMA

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
        text = self.environment.get(SEED_BATCH, "")
        return tuple(int(seed) for seed in text.split(",")) if text else ()

    def with_details(self, **extra: Any) -> TrialRecord:
        """The same record with ``extra`` added to its details (speed measured under load)."""
        return dataclasses.replace(self, details={**self.details, **extra})


class RecordError(ValueError):
    """Data that is not a trial record; the message names the field and what was expected."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{name} must be a string, not {value!r}")
    return value


def _trial_id(name: str, value: Any) -> str:
    if not _text(name, value):
        raise RecordError(f"{name} must not be empty")
    return value


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordError(f"{name} must be an object, not {value!r}")
    return dict(value)


def _seed(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordError(f"{name} must be an integer, not {value!r}")
    return value


def _status(name: str, value: Any) -> Status:
    if value not in set(Status):
        raise RecordError(f"{name} must be one of {', '.join(Status)}, not {value!r}")
    return Status(value)


def _error(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise RecordError(f"{name} must be a string or null, not {value!r}")
    return value


def _metric(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if not _is_number(value):
        raise RecordError(f"metrics[{key!r}] must be a number or null, not {value!r}")
    return float(value) if usable(value) else None


def _key(name: str, key: Any) -> str:
    problem = key_problem(str(key))
    if problem:
        raise RecordError(f"{name}: {problem}")
    return str(key)


def _metrics(name: str, value: Any) -> dict[str, float | None]:
    if not isinstance(value, Mapping):
        raise RecordError(f"{name} must be an object of numbers, not {value!r}")
    return {_key(name, k): _metric(str(k), v) for k, v in value.items()}


def _curve(name: str, points: Any) -> list[list[float | None]]:
    if not isinstance(points, list):
        raise RecordError(f"curves[{name!r}] must be a list of [step, value] points")
    checked = []
    for point in points:
        if (not isinstance(point, list) or len(point) != 2 or not _is_number(point[0]) or not math.isfinite(point[0])
                or abs(point[0]) > MAX_STEP or not (point[1] is None or _is_number(point[1]))):
            raise RecordError(f"curves[{name!r}] holds {point!r}, not a [step, value] point")
        value = point[1] if point[1] is None or usable(point[1]) else None
        checked.append([point[0], value])
    return checked


def _curves(name: str, value: Any) -> dict[str, list[list[float | None]]]:
    if not isinstance(value, Mapping):
        raise RecordError(f"{name} must be an object of point lists, not {value!r}")
    return {_key(name, k): _curve(str(k), v) for k, v in value.items()}


def _environment(name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise RecordError(f"{name} must be an object of strings")
    return dict(value)


def _packages(name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise RecordError(f"{name} must be a list of strings")
    return list(value)


def _wall_seconds(name: str, value: Any) -> float:
    if not _is_number(value) or not value >= 0:
        raise RecordError(f"{name} must be a non-negative number, not {value!r}")
    return float(value)


# each field's check, in the order a bad record is reported; each returns the value the record keeps
_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "trial_id": _trial_id, "suite": _text, "profile": _text, "task": _text, "task_version": _text, "arm": _text,
    "arm_label": _text, "point_label": _text, "started_at": _text, "point": _mapping, "params": _mapping,
    "details": _mapping, "seed": _seed, "status": _status, "error": _error, "metrics": _metrics, "curves": _curves,
    "environment": _environment, "packages": _packages, "wall_seconds": _wall_seconds,
}
_OUTCOME = {spec.name: spec for spec in dataclasses.fields(TrialRecord) if spec.name not in ("trial", "schema")}
_REQUIRED = ("trial_id", *_TRIAL_FIELDS, "point_label", "status")  # every record has had these


def _default(name: str) -> Any:
    """The value standing in for a field that a record written before it existed lacks."""
    spec = _OUTCOME[name]
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


def from_json(data: Any) -> TrialRecord:
    """A checked record from parsed JSON (or any mapping); RecordError names the first bad field."""
    if not isinstance(data, Mapping):
        raise RecordError(f"a trial record is a JSON object, not {type(data).__name__}")
    schema = data.get("schema", RECORD_SCHEMA)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise RecordError(f"schema must be a positive integer, not {schema!r}")
    if schema > RECORD_SCHEMA:
        raise RecordError(f"written by a newer harness (record schema {schema}; this one reads up to {RECORD_SCHEMA})")
    missing = [name for name in _CHECKS if name in _REQUIRED and name not in data]
    if missing:
        raise RecordError(f"missing {', '.join(missing)}")
    checked = {name: check(name, data[name] if name in data else _default(name)) for name, check in _CHECKS.items()}
    trial = Trial(**{name: checked.pop(name) for name in _TRIAL_FIELDS},
                  code=checked["environment"].get("task_code_sha256", ""))
    return TrialRecord(trial=trial, **checked)


def _fields(record: TrialRecord) -> dict[str, Any]:
    """The record's fields as the store writes them: the trial's (but its code, which the environment holds
    as task_code_sha256) beside the rest."""
    trial = {name: getattr(record.trial, name) for name in _TRIAL_FIELDS}
    return trial | {name: getattr(record, name) for name in _OUTCOME} | {"schema": record.schema}


def to_json(record: TrialRecord) -> dict[str, Any]:
    """The record as the JSON object the store writes, checked on the way out as on the way in."""
    checked = from_json(_fields(record))
    return copy.deepcopy(_fields(checked)) | {"status": str(checked.status)}
