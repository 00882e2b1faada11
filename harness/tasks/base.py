"""The contract between the spine and a task.

A task owns its data, training and evaluation; the spine owns seeds, identity, storage,
tracking and statistics. Everything the spine needs to know about a task is declared here:
its params schema (a pydantic model that forbids unknown keys), its metrics (direction, unit,
kind) and a version that enters every trial's identity hash.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Mapping, Protocol

import torch
from pydantic import BaseModel, ConfigDict

Direction = Literal["higher", "lower", "none"]
MetricKind = Literal["quality", "speed", "memory", "info"]


@dataclass(frozen=True)
class Metric:
    """A metric family. Reported keys may add a qualifier after '@' (``nmse@1024``)."""

    name: str
    direction: Direction
    unit: str
    kind: MetricKind
    description: str = ""
    key: bool = False  # shown in the end-of-run table

    @property
    def better_sign(self) -> int:
        """+1 when larger is better, -1 when smaller is better, 0 when neither."""
        return {"higher": 1, "lower": -1, "none": 0}[self.direction]


def metric_family(key: str) -> str:
    """``nmse@1024`` -> ``nmse``: the declared metric a reported key belongs to."""
    return key.split("@", 1)[0]


class TaskParams(BaseModel):
    """Base for every task's params: unknown keys are errors, values are validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TrialLogger(Protocol):
    """What a task may call while it runs (implemented by the executor)."""

    def log_metric(self, key: str, value: float, step: int) -> None:
        """A step metric (training curve); stored in the trial JSON and mirrored to MLflow."""

    def record(self, key: str, value: Any) -> None:
        """JSON-able detail kept with the trial (per-document values for pairing, tables)."""

    def progress(self, total: int, description: str = "") -> "ProgressHandle":
        """A progress bar inside the trial (e.g. over training steps)."""


class ProgressHandle(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


@dataclass
class TrialContext:
    """Everything a trial gets from the spine besides its params."""

    seed: int
    device: torch.device
    logger: TrialLogger
    cache_dir: Path  # shared by trials of a suite: e.g. a teacher trained once per seed
    work_dir: Path  # private to this trial: files written here become artifacts
    arm: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Task(ABC):
    """Subclass, set the class attributes, implement ``run`` and register it."""

    name: ClassVar[str]
    version: ClassVar[str]
    Params: ClassVar[type[TaskParams]]
    metrics: ClassVar[tuple[Metric, ...]]
    description: ClassVar[str] = ""

    @classmethod
    def metric_specs(cls) -> dict[str, Metric]:
        return {m.name: m for m in cls.metrics}

    @classmethod
    def metric_for(cls, key: str) -> Metric | None:
        return cls.metric_specs().get(metric_family(key))

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> TaskParams:
        return cls.Params.model_validate(dict(params))

    @abstractmethod
    def run(self, params: TaskParams, ctx: TrialContext) -> Mapping[str, float]:
        """Train and evaluate one arm at one seed; return final metrics by key."""
