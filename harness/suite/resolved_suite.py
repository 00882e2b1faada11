"""The resolved suite: what the loader hands the runner (arms, seeds, sweep, contrasts, claims), and
the one error every suite mistake becomes."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.suite.schema import (
    ClaimSpec,
    ContrastSpec,
    GateSpec,
    PremiseSpec,
    SequentialSpec,
    SweepAxes,
    StoredSequential,
    TuneSpec,
    ValiditySpec,
)
from harness.core.stored_fields import stored_value
from harness.suite.design import DESIGN_KEYS, DesignLock
from harness.suite.points import arm_label, sweep_points
from harness.suite.stored import StoredArm, StoredSuite, TunedParams
from harness.tasks import Task

DEFAULT_PROFILE = "default"


class SuiteError(ValueError):
    """A malformed suite: the message is meant for the user, one line, no traceback."""


@dataclass(frozen=True)
class Arm:
    name: str
    params: dict[str, Any]
    sweep: SweepAxes


@dataclass(frozen=True)
class ParamLayer:
    """Params one place in the suite file sets (``source``: "suite", "profile smoke", "arm", ...),
    for every arm (``arm`` None) or one; a suite keeps them lowest precedence first."""

    source: str
    arm: str | None
    params: dict[str, Any]


@dataclass
class Suite:
    """One suite with its profile applied: everything needed to expand and run trials."""

    name: str
    description: str
    source: Path
    profile: str
    task_name: str
    task: type[Task]
    seeds: list[int]
    params: dict[str, Any]
    sweep: SweepAxes
    arms: dict[str, Arm]
    contrasts: list[ContrastSpec]
    validity: ValiditySpec | None
    claims: list[ClaimSpec]
    gate: GateSpec
    confidence: float = 0.95
    profiles: list[str] = field(default_factory=list)
    sequential: SequentialSpec | None = None  # seeds is then the first look
    premises: list[PremiseSpec] = field(default_factory=list)
    param_layers: tuple[ParamLayer, ...] = ()  # where params came from (harness validate --resolved)
    tune: TuneSpec | None = None  # the suite's tune: block
    tuned: TunedParams | None = None  # the params a tuning lock gave the arms (harness.suite.tuning_plan)
    mechanism: str | None = None  # the arm under test (claims read for or against it)
    registration: str | None = None  # the ledger id of the registered design this run confirms; None: exploratory
    seed_pool: tuple[int, ...] = ()  # a registered design's seeds in order (the first look first); () : the next integers
    seed_batch: int = 1  # seeds of one arm and point trained as one model, where the task can (Task.batches_seeds)

    @property
    def speed_claims(self) -> list[str]:
        """The claimed metrics the task declares as speed: timings a confirmatory claim reads, which
        trials running side by side would take under each other's load."""
        return [c.metric for c in self.claims
                if (metric := self.task.metric_for(c.metric)) is not None and metric.kind == "speed"]

    def next_seeds(self, count: int) -> list[int]:
        """The seeds a sequential run adds after its current ones: a registered design's next seeds, otherwise
        the next integers."""
        if self.seed_pool:
            return list(self.seed_pool[len(self.seeds):len(self.seeds) + count])
        start = max(self.seeds) + 1
        return list(range(start, start + count))

    def locked_design(self) -> DesignLock:
        """What a results folder's trials are analysed under and may not change once they exist: the
        first look's seeds, the sequential schedule, the claims, premises, validity and confidence."""
        stored = self.stored()
        return DesignLock.from_stored({"seeds": list(self.seeds),
                                       **{key: stored_value(stored, key) for key in DESIGN_KEYS[1:-1]},
                                       "registration": self.registration})

    def stored(self) -> StoredSuite:
        """The resolved suite as a results folder stores it (suite.json); the runner adds the task's
        declarations, the device, the locked design and the expansion."""
        return StoredSuite(
            suite=self.name, description=self.description, source=str(self.source), profile=self.profile,
            task=self.task_name, task_version=self.task.version, seeds=tuple(self.seeds), params=self.params,
            sweep=self.sweep, arms={a.name: StoredArm(tuple(arm_label(a.name, p) for p in sweep_points(a.sweep)),
                                                      a.params, a.sweep) for a in self.arms.values()},
            contrasts=tuple(self.contrasts), validity=self.validity, claims=tuple(self.claims),
            premises=tuple(self.premises), confidence=self.confidence, gate=self.gate,
            sequential=None if self.sequential is None else StoredSequential(len(self.seeds), self.sequential),
            tuned=self.tuned, mechanism=self.mechanism, registration=self.registration,
        )
