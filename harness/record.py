"""The trial record: the one shape of what a trial produced, from the executor that builds it to the
store, the MLflow mirror, analysis, the gate and reproduce.

A record is a ``TrialRecord`` (a typed dict, so it is also the JSON object the store keeps). Records
enter the program only through ``from_json``, which checks every field and fills the ones older
records lack, so no reader has to guess at a field's type or presence; ``to_json`` is the checked
way out. A record written by a newer harness (a higher ``schema``) is refused rather than misread.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, TypedDict

RECORD_SCHEMA = 1
FINISHED, FAILED = "finished", "failed"
STATUSES = (FINISHED, FAILED)


class TrialRecord(TypedDict):
    schema: int
    trial_id: str
    suite: str
    profile: str
    task: str
    task_version: str
    arm: str
    arm_label: str
    seed: int
    point: dict[str, Any]  # the sweep point: axis -> value
    point_label: str
    params: dict[str, Any]  # the validated params the task ran with
    status: str  # FINISHED or FAILED
    error: str | None  # why a failed trial failed
    metrics: dict[str, float | None]  # final values; None where the value was not finite
    curves: dict[str, list[list[float | None]]]  # name -> [[step, value], ...]
    details: dict[str, Any]  # JSON-able task details (per-item values, cache use, traceback)
    environment: dict[str, str]  # code, libraries, hardware and determinism (tracking.environment)
    packages: list[str]  # name==version of the process that ran the trial
    started_at: str  # ISO 8601, UTC
    wall_seconds: float


class RecordError(ValueError):
    """Data that is not a trial record; the message names the field and what was expected."""


# fields a record written before they existed may lack, and the value that stands in for them
_DEFAULTS: dict[str, Any] = {
    "error": None, "curves": {}, "details": {}, "environment": {}, "packages": [], "started_at": "",
    "wall_seconds": 0.0,
}
_TEXT = ("trial_id", "suite", "profile", "task", "task_version", "arm", "arm_label", "point_label", "started_at")
_MAPPINGS = ("point", "params", "details")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _metric(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if not _is_number(value):
        raise RecordError(f"metrics[{key!r}] must be a number or null, not {value!r}")
    return float(value) if math.isfinite(value) else None


def _curve(name: str, points: Any) -> list[list[float | None]]:
    if not isinstance(points, list):
        raise RecordError(f"curves[{name!r}] must be a list of [step, value] points")
    checked = []
    for point in points:
        if (not isinstance(point, list) or len(point) != 2 or not _is_number(point[0]) or not math.isfinite(point[0])
                or not (point[1] is None or _is_number(point[1]))):
            raise RecordError(f"curves[{name!r}] holds {point!r}, not a [step, value] point")
        value = point[1] if point[1] is None or math.isfinite(point[1]) else None
        checked.append([point[0], value])
    return checked


def from_json(data: Any) -> TrialRecord:
    """A checked record from parsed JSON (or any mapping); RecordError names the first bad field."""
    if not isinstance(data, Mapping):
        raise RecordError(f"a trial record is a JSON object, not {type(data).__name__}")
    record = {**_DEFAULTS, **data}
    schema = record.get("schema", RECORD_SCHEMA)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise RecordError(f"schema must be a positive integer, not {schema!r}")
    if schema > RECORD_SCHEMA:
        raise RecordError(f"written by a newer harness (record schema {schema}; this one reads up to {RECORD_SCHEMA})")
    missing = [key for key in TrialRecord.__annotations__ if key not in record and key != "schema"]
    if missing:
        raise RecordError(f"missing {', '.join(missing)}")
    for key in _TEXT:
        if not isinstance(record[key], str):
            raise RecordError(f"{key} must be a string, not {record[key]!r}")
    if not record["trial_id"]:
        raise RecordError("trial_id must not be empty")
    for key in _MAPPINGS:
        if not isinstance(record[key], Mapping):
            raise RecordError(f"{key} must be an object, not {record[key]!r}")
    if not isinstance(record["seed"], int) or isinstance(record["seed"], bool):
        raise RecordError(f"seed must be an integer, not {record['seed']!r}")
    if record["status"] not in STATUSES:
        raise RecordError(f"status must be one of {', '.join(STATUSES)}, not {record['status']!r}")
    if record["error"] is not None and not isinstance(record["error"], str):
        raise RecordError(f"error must be a string or null, not {record['error']!r}")
    if not isinstance(record["metrics"], Mapping):
        raise RecordError(f"metrics must be an object of numbers, not {record['metrics']!r}")
    if not isinstance(record["curves"], Mapping):
        raise RecordError(f"curves must be an object of point lists, not {record['curves']!r}")
    environment = record["environment"]
    if not isinstance(environment, Mapping) or not all(isinstance(v, str) for v in environment.values()):
        raise RecordError("environment must be an object of strings")
    packages = record["packages"]
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise RecordError("packages must be a list of strings")
    if not _is_number(record["wall_seconds"]) or not record["wall_seconds"] >= 0:
        raise RecordError(f"wall_seconds must be a non-negative number, not {record['wall_seconds']!r}")
    return TrialRecord(
        schema=RECORD_SCHEMA,
        trial_id=record["trial_id"], suite=record["suite"], profile=record["profile"], task=record["task"],
        task_version=record["task_version"], arm=record["arm"], arm_label=record["arm_label"], seed=record["seed"],
        point=dict(record["point"]), point_label=record["point_label"], params=dict(record["params"]),
        status=record["status"], error=record["error"],
        metrics={str(k): _metric(str(k), v) for k, v in record["metrics"].items()},
        curves={str(k): _curve(str(k), v) for k, v in record["curves"].items()},
        details=dict(record["details"]), environment=dict(environment), packages=list(packages),
        started_at=record["started_at"], wall_seconds=float(record["wall_seconds"]),
    )


def to_json(record: TrialRecord) -> dict[str, Any]:
    """The record as the JSON object the store writes, checked on the way out as on the way in."""
    return dict(from_json(record))
