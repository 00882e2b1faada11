"""Suite -> trials (arm variant x seed x sweep point), each identified by a content hash."""
from __future__ import annotations

from harness.core.record import Trial, config_hash
from harness.suite.resolved_suite import Suite
from harness.suite.points import arm_label, sweep_points
from harness.tasks.param_paths import layered
from harness.tasks.source import task_code


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


def validity_control_apart(suite: Suite) -> list[str]:
    """A warning when validity measures the testbed against an arm that no claim of the mechanism compares it
    with: a VALID suite then says the controls can be told apart from that arm (the weakest, say), not from
    the control the claims read. Without a declared mechanism, every claimed contrast's control counts."""
    if suite.validity is None or not suite.claims:
        return []
    contrasts = {c.label: c for c in suite.contrasts}
    pairs = [(contrasts[c.contrast].treatment, contrasts[c.contrast].control) for c in suite.claims
             if c.contrast in contrasts]
    if suite.mechanism:
        compared = {arm for pair in pairs if suite.mechanism in pair for arm in pair if arm != suite.mechanism}
    else:
        compared = {control for _, control in pairs}
    if not compared or suite.validity.control in compared:
        return []
    return [f"warning: {suite.name} ({suite.profile}): validity's control is {suite.validity.control}, but the claims "
            f"compare {suite.mechanism or 'their treatments'} with {', '.join(sorted(compared))}: a VALID suite would "
            f"say its controls are told apart from {suite.validity.control}, not from the arm the claims read (make "
            "that arm validity's control)"]


def suite_warnings(suite: Suite) -> list[str]:
    """What ``harness validate`` and ``harness run`` say about a suite's design before any trial runs."""
    return identical_arms(suite) + validity_control_apart(suite)


def planned_trials(suite: Suite) -> int:
    """Trials a run of the suite may take: every look of a sequential design up to its max_seeds."""
    per_seed = len(expand_trials(suite)) // max(len(suite.seeds), 1)
    seeds = max(suite.sequential.max_seeds, len(suite.seeds)) if suite.sequential is not None else len(suite.seeds)
    return per_seed * seeds
