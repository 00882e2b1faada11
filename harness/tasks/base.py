"""The contract between the spine and a task.

A task owns its data, training and evaluation; the spine owns seeds, identity, storage,
tracking and statistics, and lends every task the same services through ``TrialContext``:
named random streams, a cache for artifacts shared across trials, and the training loop.
Everything the spine needs to know about a task is declared here: its params schema (a
pydantic model that forbids unknown keys), its metrics (direction, unit, kind, plot hints), the
detail scatters it records, smoke params and a version that enters every trial's identity hash.
"""
from __future__ import annotations

import enum
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Iterator, Literal, Mapping, Sequence, TypeVar, Union, get_args, get_origin

import annotated_types
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo

from harness.core.metrics import DetailScatter, Metric, ParetoView, metric_family
from harness.services.cache import artifact_key, artifact_path, load_or_build
from harness.services.training_loop import StepResult, StopRule, TrialLogger, fit, fit_together
from harness.services.seeding import forked_rng, numpy_stream, seed_everything, torch_stream
from harness.tasks.param_paths import leaf_fields, nest

T = TypeVar("T")


class TaskParams(BaseModel):
    """Base for every task's params: unknown keys are errors, values are validated, numbers are
    finite (no NaN or infinity), and every number declares its bounds where it is declared
    (``steps: int = Field(120, ge=1)``; tuple items as ``tuple[Annotated[int, Field(ge=1)], ...]``),
    so that ``harness validate`` refuses ``steps: -5`` naming the file, key and bound. The
    contract test checks with ``unbounded_params`` that every registered task does."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_BOUNDS = ((annotated_types.Gt, "gt", ">"), (annotated_types.Ge, "ge", ">="),
           (annotated_types.Lt, "lt", "<"), (annotated_types.Le, "le", "<="))


def _constraints(metadata: Any) -> list[Any]:
    out: list[Any] = []
    for item in metadata:
        out.extend(_constraints(item.metadata) if isinstance(item, FieldInfo) else [item])
    return out


def _numbers(annotation: Any, metadata: list[Any]) -> Iterator[list[Any]]:
    """The constraints on each number an annotation holds (an int, a float, tuple items, ...)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        yield from _numbers(base, [*metadata, *_constraints(extra)])
    elif annotation in (int, float):
        yield metadata
    elif origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from _numbers(member, metadata)
    elif origin in (tuple, list, set, frozenset):
        for member in get_args(annotation):
            if member is not Ellipsis:
                yield from _numbers(member, [])


def param_bounds(params: type[BaseModel]) -> dict[str, str]:
    """Declared bounds of each numeric param (``">= 1"``, ``"> 0, <= 1"``; ``""`` for none)."""
    out: dict[str, str] = {}
    for name, info in leaf_fields(params).items():
        texts: list[str] = []
        for constraints in _numbers(info.annotation, _constraints(info.metadata)):
            text = ", ".join(f"{symbol} {getattr(c, attr)}" for kind, attr, symbol in _BOUNDS
                             for c in constraints if isinstance(c, kind))
            if text not in texts:
                texts.append(text)
        if texts:
            out[name] = "; ".join(texts)
    return out


def param_choices(params: type[BaseModel]) -> dict[str, tuple[Any, ...]]:
    """The values each choice param (a ``Literal``, an ``Enum``, optionally None) may take: what ``harness
    list`` shows, so a suite's author need not read the task's source to spell one."""
    out: dict[str, tuple[Any, ...]] = {}
    for name, info in leaf_fields(params).items():
        choices = tuple(_choices(info.annotation))
        if len(choices) > 1:  # one value is a tag (a workload's kind), not a choice
            out[name] = choices
    return out


def _choices(annotation: Any) -> Iterator[Any]:
    origin = get_origin(annotation)
    if origin is Literal:
        yield from get_args(annotation)
    elif origin is Annotated:
        yield from _choices(get_args(annotation)[0])
    elif origin in (Union, types.UnionType):
        members = get_args(annotation)
        found = [choice for member in members for choice in _choices(member)]
        if found:  # a choice or nothing: None is one of the values
            yield from found + [None] * (type(None) in members)
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        yield from (member.value for member in annotation)


def training_budget(steps: float, batch: int) -> dict[str, float]:
    """The fair-arm facts every trained arm reports (compared within a seed by the analysis): the
    optimizer steps it trained and the examples its batches held (steps x batch)."""
    return {"budget/steps": float(steps), "budget/examples": float(steps) * batch}


def training_budget_metrics(steps: str, examples: str) -> tuple[Metric, Metric]:
    """The declarations of ``training_budget``: the descriptions say what a step and an example are."""
    return (Metric(name="budget/steps", direction="none", unit="steps", kind="info", description=steps),
            Metric(name="budget/examples", direction="none", unit="examples", kind="info", description=examples))


def unbounded_params(params: type[BaseModel]) -> list[str]:
    """Numeric params (or tuple items) without a lower bound: every task must declare one."""
    unbounded = []
    for name, info in leaf_fields(params).items():
        for constraints in _numbers(info.annotation, _constraints(info.metadata)):
            if not any(isinstance(c, (annotated_types.Gt, annotated_types.Ge)) for c in constraints):
                unbounded.append(name)
                break
    return unbounded


@dataclass
class TrialContext:
    """Everything a trial gets from the spine besides its params, and the services tasks share:
    named random streams, a cross-process artifact cache and the training loop."""

    seed: int
    device: torch.device
    logger: TrialLogger
    cache_dir: Path  # shared by trials of a suite: e.g. a teacher trained once per seed
    work_dir: Path  # private to this trial: files written here become artifacts
    arm: str = ""
    task: str = ""  # the task's name and version enter every cache key
    task_version: str = ""
    trial_id: str = ""  # recorded beside each artifact the trial builds: its provenance
    extra: dict[str, Any] = field(default_factory=dict)
    _sections: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)

    def seed_globals(self) -> None:
        """Seed the global generators (python, numpy, torch) with this trial's seed, as the spine does before
        ``run``: a batched task calls it before building each seed's part, so each starts as it would alone."""
        seed_everything(self.seed, self.device)

    def stream(self, *purpose: object) -> torch.Generator:
        """A CPU generator fixed by the seed and the purpose: every arm draws the same values."""
        return torch_stream(self.seed, *purpose)

    def numpy_stream(self, *purpose: object) -> np.random.Generator:
        """The numpy counterpart of ``stream`` (same derivation)."""
        return numpy_stream(self.seed, *purpose)

    def cached(
        self,
        kind: str,
        identity: Mapping[str, Any],
        build: Callable[[], Any],
        restore: Callable[[Any], T] = lambda payload: payload,
    ) -> T:
        """``restore(payload)``: the payload built once per (task, version, kind, identity, seed,
        device type) and shared by every trial and process of the suite.

        ``build`` returns tensors or containers of them (a state dict); it runs with the global
        RNG forked, so a trial continues identically whether it built or loaded. Whether the
        artifact was loaded, the sha256 of its bytes and the trial that built it are recorded under the detail
        ``cache``.
        """
        key = artifact_key(self.task, self.task_version, kind, self.seed, self.device.type, identity)

        def forked_build() -> Any:
            with forked_rng(self.device):
                return build()

        path = artifact_path(self.cache_dir, self.task, kind, key)
        artifact = load_or_build(path, forked_build, self.device, self.trial_id)
        self._record("cache", kind, {"key": key, "loaded": artifact.loaded, "sha256": artifact.sha256,
                                     "built_by": artifact.built_by})
        return restore(artifact.payload)

    def fit(
        self, steps: int, step: Callable[[int], StepResult], name: str = "train", log_every: int = 1,
        until: StopRule | None = None,
    ) -> dict[str, float]:
        """Run a training loop (see ``harness.services.training_loop.fit``; ``until`` may stop it before
        ``steps``); its final values are recorded under the detail ``fit`` and returned."""
        final = fit(self.logger, steps, step, name, log_every, until)
        self._record("fit", name, {"steps": steps, "final": final})
        return final

    @staticmethod
    def fit_seeds(contexts: Sequence["TrialContext"], steps: int, step: Callable[[int], Sequence[StepResult]],
                  name: str = "train", log_every: int = 1) -> list[dict[str, float]]:
        """``fit`` for several seeds trained as one model: ``step`` returns one result per context, each
        logged, checked and recorded under the detail ``fit`` of its own context; every seed runs ``steps``."""
        finals = fit_together([c.logger for c in contexts], steps, step, name, log_every)
        for ctx, final in zip(contexts, finals):
            ctx._record("fit", name, {"steps": steps, "final": final})
        return finals

    def _record(self, section: str, name: str, value: Any) -> None:
        self._sections.setdefault(section, {})[name] = value
        self.logger.record(section, dict(self._sections[section]))


class Task(ABC):
    """Subclass, set the class attributes, implement ``run`` and register it."""

    name: ClassVar[str]
    version: ClassVar[str]
    Params: ClassVar[type[TaskParams]]
    metrics: ClassVar[tuple[Metric, ...]]
    description: ClassVar[str] = ""
    detail_scatters: ClassVar[tuple[DetailScatter, ...]] = ()
    pareto_views: ClassVar[tuple[ParetoView, ...]] = ()
    # Params that make one run take seconds on a CPU: the contract test runs every task with them.
    smoke_params: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def metric_specs(cls) -> dict[str, Metric]:
        return {m.name: m for m in cls.metrics}

    @classmethod
    def metric_for(cls, key: str) -> Metric | None:
        return cls.metric_specs().get(metric_family(key))

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> TaskParams:
        """Params as dotted leaves (``teacher.steps``) or nested mappings -> the validated model."""
        return cls.Params.model_validate(nest(params))

    # Whether ``run_seeds`` trains the seeds of one arm and point as one batched model (a suite's seed_batch);
    # a task that batches only some arms overrides ``batches_seeds`` instead.
    seed_batching: ClassVar[bool] = False

    @classmethod
    def batches_seeds(cls, params: TaskParams) -> bool:
        """Whether ``run_seeds`` trains the seeds of an arm with these params as one batched model; the seeds
        of an arm it does not batch (nothing trained, say) run one at a time, each its own job."""
        return cls.seed_batching

    @abstractmethod
    def run(self, params: TaskParams, ctx: TrialContext) -> Mapping[str, float]:
        """Train and evaluate one arm at one seed; return final metrics by key."""

    def run_seeds(self, params: TaskParams, contexts: Sequence[TrialContext]) -> list[Mapping[str, float]]:
        """Train and evaluate one arm at several seeds (``contexts``, in seed order) as one batched model; one
        result per seed, as ``run`` would return it. Each seed keeps its own initialisation
        (``TrialContext.seed_globals`` before building its part), data order and random streams, and logs to
        its own context. Only tasks whose ``batches_seeds`` says so implement it; the values may differ from
        ``run``'s in the last bits (batched kernels reduce in another order), never more."""
        raise NotImplementedError(f"task {self.name} does not train seeds as one batched model")
