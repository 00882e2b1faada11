"""Suite -> trials (arm variant x seed x sweep point), each identified by a content hash."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from harness.record import trial_title
from harness.suite.model import Suite
from harness.suite.points import arm_label, point_label, sweep_points
from harness.tasks.param_paths import layered
from harness.tasks.source import task_code


def config_hash(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Trial:
    suite: str
    profile: str
    task: str
    task_version: str
    arm: str
    arm_label: str
    seed: int
    point: dict[str, Any]
    params: dict[str, Any]
    code: str = ""  # sha256 of the task's source (harness.tasks.source); "" for records made before it was kept

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


def expand_trials(suite: Suite) -> list[Trial]:
    """Seeds outermost so that an interrupted run has complete seeds for every arm."""
    trials = []
    code = task_code(suite.task.__module__).sha256
    for seed in suite.seeds:
        for point in sweep_points(suite.sweep):
            for arm in suite.arms.values():
                for arm_point in sweep_points(arm.sweep):
                    params = suite.task.validate_params(layered(suite.params, arm.params, arm_point, point))
                    trials.append(
                        Trial(
                            suite=suite.name,
                            profile=suite.profile,
                            task=suite.task_name,
                            task_version=suite.task.version,
                            arm=arm.name,
                            arm_label=arm_label(arm.name, arm_point),
                            seed=seed,
                            point=point,
                            params=params.model_dump(mode="json"),
                            code=code,
                        )
                    )
    return trials


def identical_arms(suite: Suite) -> list[str]:
    """A warning per group of arms that resolve to the same params (the same task, so the same code) at
    a sweep point: their trials will report the same numbers, so a contrast of them tests nothing (a
    mechanism never switched on). Said before any trial runs, not after their budget is spent."""
    groups: dict[tuple[str, str], list[str]] = {}
    first = [t for t in expand_trials(suite) if t.seed == suite.seeds[0]] if suite.seeds else []
    for trial in first:
        groups.setdefault((trial.point_label, config_hash(trial.params)), []).append(trial.arm_label)
    points: dict[tuple[str, ...], list[str]] = {}
    for (point, _), labels in groups.items():
        if len(labels) > 1:
            points.setdefault(tuple(labels), []).append(point)
    return [f"warning: {suite.name} ({suite.profile}): arms {', '.join(labels)} resolve to identical params and "
            f"the same task code{' at ' + ', '.join(where) if any(where) else ''}: their trials will give the same "
            f"results (is the mechanism switched on?)" for labels, where in points.items()]


def planned_trials(suite: Suite) -> int:
    """Trials a run of the suite may take: every look of a sequential design up to its max_seeds."""
    per_seed = len(expand_trials(suite)) // max(len(suite.seeds), 1)
    seeds = max(suite.sequential.max_seeds, len(suite.seeds)) if suite.sequential is not None else len(suite.seeds)
    return per_seed * seeds
