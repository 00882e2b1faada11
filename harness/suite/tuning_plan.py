"""A suite's ``tune:`` block: which arms are tuned on which grid, the tuning suite that runs the grids,
and the committed lock (``<suite stem>.tuned.json``) that hands each arm its chosen params.

Tuning runs on seeds no confirmatory run ever uses, every tuned arm gets a grid of the same size
(an equal tuning budget), and a run applies only a lock made for the tune block it reads: the lock
carries the hash of that block and a checksum of itself, so a stale or hand-edited lock is refused.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import fmean
from typing import Any, Mapping, Sequence, TypeVar

from harness.core.metrics import better_sign
from harness.store import canonical_json
from harness.suite.resolved_suite import Arm, ParamLayer, Suite, SuiteError
from harness.suite.points import sweep_points
from harness.suite.references import check_params, check_size
from harness.suite.schema import SuiteSpec, SweepAxes, TuneSpec
from harness.suite.stored import TunedArm, TunedParams
from harness.suite.tuning_lock import LockedArm, LockedPoint, TuningLock, lock_path
from harness.suite.yaml_safety import located
from harness.tasks.param_paths import ParamPathError, flatten, layered, leaf_fields

_Point = TypeVar("_Point")

TUNE_PROFILE_PREFIX = "tune-"  # the tuning run of profile P is stored as <suite>/tune-P


@dataclass(frozen=True)
class ArmTuning:
    """One tuned arm: the grid it runs and the tuned keys it sets itself (those keep its own value)."""

    space: SweepAxes
    kept: dict[str, Any]

    @property
    def size(self) -> int:
        return math.prod(len(values) for values in self.space.values()) if self.space else 0


def tune_hash(spec: TuneSpec) -> str:
    """What a lock was made for: the tune block as data (formatting and comments do not count)."""
    return hashlib.sha256(canonical_json(spec.model_dump(mode="json")).encode()).hexdigest()[:16]


def tune_plan(spec: TuneSpec, arms: dict[str, Arm]) -> dict[str, ArmTuning]:
    """Each tuned arm present in ``arms`` with its grid; an arm that sets a tuned key keeps its value."""
    plan = {}
    for name in spec.arms if spec.arms is not None else list(arms):
        if name not in arms:
            continue
        space = spec.arm_spaces.get(name, spec.space)
        kept = {key: arms[name].params[key] for key in space if key in arms[name].params}
        plan[name] = ArmTuning({k: v for k, v in space.items() if k not in kept}, kept)
    return plan


def tuning_suite(suite: Suite, spec: TuneSpec) -> Suite:
    """The suite that runs every tuned arm's grid (as an arm sweep) on the tuning seeds, without claims."""
    arms = {name: replace(suite.arms[name], sweep={**suite.arms[name].sweep, **tuning.space})
            for name, tuning in tune_plan(spec, suite.arms).items() if tuning.space}
    return replace(suite, profile=TUNE_PROFILE_PREFIX + suite.profile, seeds=list(spec.seeds), sequential=None,
                   arms=arms, contrasts=[], validity=None, claims=[], tuned=None)


def confirmatory_seeds(spec: SuiteSpec) -> set[int]:
    """Every seed a confirmatory run of any profile may use, later looks of a sequential design included."""
    designs = [(spec.seeds, spec.sequential)]
    for profile in spec.profiles.values():
        seeds = profile.seeds if profile.seeds is not None else spec.seeds
        sequential = None if profile.seeds is not None else spec.sequential
        if "sequential" in profile.model_fields_set:
            sequential = profile.sequential
        designs.append((seeds, sequential))
    used: set[int] = set()
    for seeds, sequential in designs:
        used.update(seeds)
        if sequential is not None and seeds:
            used.update(range(max(seeds) + 1, max(seeds) + 1 + sequential.max_seeds - len(seeds)))
    return used


def check_tune(path: Path, node, spec: SuiteSpec, suite: Suite, max_trials: int) -> None:
    """``spec.tune`` against the suite at its profile (all arms): seeds, metric, keys, grids, budget."""
    tune = spec.tune

    def where(*loc: Any) -> str:
        return located(path, node, ["tune", *loc])

    overlap = [i for i, seed in enumerate(tune.seeds) if seed in confirmatory_seeds(spec)]
    if overlap:
        seed = tune.seeds[overlap[0]]
        raise SuiteError(f"{where('seeds', overlap[0])}: tune.seeds: seed {seed} is also a confirmatory seed (of a "
                         "profile or a sequential design's later looks); tuning seeds must be disjoint from them")
    metric = suite.task.metric_for(tune.metric)
    if metric is None or metric.direction == "none":
        named = sorted(m.name for m in suite.task.metrics if m.direction != "none")
        problem = "declares no metric" if metric is None else "declares no direction for metric"
        raise SuiteError(f"{where('metric')}: tune.metric: task {suite.task_name!r} {problem} {tune.metric!r}; "
                         f"metrics with a direction: {', '.join(named)}")
    for i, name in enumerate(tune.arms or []):
        if name not in suite.arms:
            raise SuiteError(f"{where('arms', i)}: tune.arms[{i}]: unknown arm {name!r}; arms: {', '.join(suite.arms)}")
    tuned = tune.arms if tune.arms is not None else list(suite.arms)
    for name in tune.arm_spaces:
        if name not in tuned:
            raise SuiteError(f"{where('arm_spaces', name)}: tune.arm_spaces.{name}: arm {name!r} is not tuned; "
                             f"tuned arms: {', '.join(tuned)}")
    spaces = [(["space"], tune.space), *((["arm_spaces", n], s) for n, s in tune.arm_spaces.items())]
    for loc, space in spaces:
        _check_space(path, node, suite, loc, space)
    plan = tune_plan(tune, suite.arms)
    sizes = {name: tuning.size for name, tuning in plan.items() if tuning.space}
    if not sizes:
        raise SuiteError(f"{where()}: tune: no arm is left to tune: every tuned arm sets the tuned keys itself")
    if len(set(sizes.values())) > 1 and not tune.unequal_grids:
        listed = ", ".join(f"{name} {size}" for name, size in sizes.items())
        raise SuiteError(f"{where('space')}: tune: tuned arms get grids of different sizes ({listed} points; arms "
                         "that set a tuned key keep it and lose that axis); give every arm the same tuning budget "
                         "or say why not in tune.unequal_grids")
    tuning = tuning_suite(suite, tune)
    check_size(path, tuning, max_trials)
    locs: dict[str | None, list[Any]] = {None: ["sweep"]}
    locs.update({name: ["tune", "arm_spaces", name] if name in tune.arm_spaces else ["tune", "space"] for name in plan})
    check_params(path, node, tuning, locs)


def _check_space(path: Path, node, suite: Suite, loc: list[Any], space: SweepAxes) -> None:
    dotted = ".".join(["tune", *loc])
    if not space:
        raise SuiteError(f"{located(path, node, ['tune', *loc])}: {dotted}: expected a mapping of param -> "
                         "non-empty list of values, got an empty grid")
    for key, values in space.items():
        here = f"{located(path, node, ['tune', *loc, key])}: {dotted}.{key}"
        try:
            flatten(suite.task.Params, {key: None}, owner=f"task {suite.task_name!r}")
        except ParamPathError as exc:
            raise SuiteError(f"{here}: {exc}") from None
        if key not in leaf_fields(suite.task.Params):
            raise SuiteError(f"{here}: {key!r} is a nested param; tune its fields one by one")
        if not values:
            raise SuiteError(f"{here}: expected a non-empty list of values (an empty grid tunes nothing)")
        swept_by = "the suite's sweep" if key in suite.sweep else next(
            (f"arm {a.name!r}'s sweep" for a in suite.arms.values() if key in a.sweep), None)
        if swept_by:
            raise SuiteError(f"{here}: {key!r} is swept by {swept_by}; a swept param cannot also be tuned")


def apply_lock(path: Path, node, spec: SuiteSpec, suite: Suite, any_version: bool = False) -> Suite:
    """The suite with its lock's chosen params applied to the tuned arms, or unchanged without a lock
    (``any_version``: also a lock tuned on another version of the task)."""
    lock = lock_path(path)
    if not lock.exists():
        return suite
    document = TuningLock.read(lock, path)
    if spec.tune is None:
        raise SuiteError(f"{lock}: a tuning lock lies beside the suite but {path} has no tune: block; "
                         "restore the block or remove the lock")
    if document.tune_hash != tune_hash(spec.tune):
        raise SuiteError(f"{located(path, node, ['tune'])}: tune: the lock {lock.name} was made for another tune "
                         f"block (hash {document.tune_hash}, the block now hashes to {tune_hash(spec.tune)}); "
                         f"rerun `harness tune {path}` or restore the block")
    if document.task_version != suite.task.version and not any_version:
        raise SuiteError(f"{lock}: stale lock: tuned on task {suite.task_name!r} version "
                         f"{document.task_version}, the task is now version {suite.task.version}; "
                         f"rerun `harness tune {path}`")
    overlap = sorted(set(suite.seeds) & set(document.seeds))
    if overlap:
        raise SuiteError(f"--seeds: seed(s) {', '.join(map(str, overlap))} tuned the arms in {lock.name}; "
                         "a confirmatory run needs other seeds")
    arms, tuned, layers = dict(suite.arms), {}, []
    for name, tuning in tune_plan(spec.tune, suite.arms).items():
        entry = document.arm(name)
        if entry is None:
            raise SuiteError(f"{lock}: arms.{name}: not an arm's entry; rerun `harness tune {path}`")
        if sorted(entry.kept) != sorted(tuning.kept):
            raise SuiteError(f"{located(path, node, ['arms', name])}: arms.{name}: the arm now sets "
                             f"{', '.join(sorted(tuning.kept)) or 'no tuned key'} itself, but {lock.name} was tuned "
                             f"with {', '.join(sorted(entry.kept)) or 'none'} kept; rerun `harness tune {path}`")
        check_choice(lock, spec.tune, suite, name, tuning, entry)
        arms[name] = replace(arms[name], params=layered(arms[name].params, entry.chosen))
        tuned[name] = TunedArm(entry.chosen, entry.kept)
        layers.append(ParamLayer(f"lock {lock.name}", name, dict(entry.chosen)))
    return replace(suite, arms=arms, param_layers=(*suite.param_layers, *layers),
                   tuned=TunedParams(lock.name, document.tune_hash, tuned))


def grid_points(suite: Suite, arm: str, tuning: ArmTuning) -> list[dict[str, Any]]:
    """The arm's grid points as the task validates them (``1`` -> ``1.0``), as its trials record them."""
    base = layered(suite.params, suite.arms[arm].params)
    points = []
    variant, sweep = sweep_points(suite.arms[arm].sweep)[0], sweep_points(suite.sweep)[0]  # the grid's keys are not swept
    for point in sweep_points(tuning.space):
        validated = suite.task.validate_params(layered(base, variant, point, sweep)).model_dump(mode="json")
        points.append({key: at_dotted(validated, key) for key in point})
    return points


def at_dotted(params: Mapping[str, Any], key: str) -> Any:
    """A param's value by its dotted key (``router_training.lr`` reads a nested param); None where absent."""
    value: Any = params
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def point_mean(values: dict[int, float], failed: int, seeds: Sequence[int]) -> float | None:
    """A grid point's score: the mean of its per-seed values in the tuning seeds' order, or None unless
    every trial of the point finished with a value on every tuning seed."""
    if failed or any(seed not in values for seed in seeds):
        return None
    return fmean(values[seed] for seed in seeds)


def best_point(means: Sequence[float | None], direction: str) -> int | None:
    """The index of the best mean by ``direction`` (the middle of equals); None when no point has one."""
    return best_of(range(len(means)), means, direction)


def tied_best(points: Sequence[_Point], means: Sequence[float | None], direction: str) -> list[_Point]:
    """Every point whose mean is the best by ``direction``, in grid order; empty when no point has one."""
    sign = better_sign(direction)
    scored = [(point, mean) for point, mean in zip(points, means) if mean is not None]
    if not scored:
        return []
    best = max(sign * mean for _, mean in scored)
    return [point for point, mean in scored if sign * mean == best]


def best_of(points: Sequence[_Point], means: Sequence[float | None], direction: str) -> _Point | None:
    """The point of the best mean by ``direction``; None when no point has one.

    Points tied at the best give the middle one in grid order (the first of two): an arm whose metric does
    not move with the tuned param (a control at chance on every point) then sits inside its grid, where the
    first of equals would put it on the edge and read as a grid that stopped too soon.
    """
    tied = tied_best(points, means, direction)
    return tied[(len(tied) - 1) // 2] if tied else None


def check_choice(lock: Path, spec: TuneSpec, suite: Suite, arm: str, tuning: ArmTuning, entry: LockedArm) -> None:
    """Refuse a lock whose choice for ``arm`` is not the one its own per-seed grid values give by the tune
    block's rule, or whose grid is not the arm's grid: the checksum only says the lock was not edited by
    accident, since whoever edits it can recompute it."""
    refuse = f"{lock}: arms.{arm}"
    chosen = entry.chosen
    expected = grid_points(suite, arm, tuning) if tuning.space else []
    if not isinstance(chosen, dict) or (expected and chosen not in expected) or (not expected and chosen):
        raise SuiteError(f"{refuse}: the chosen params {_shown(chosen)} are not a point of the arm's grid; "
                         f"rerun `harness tune {suite.source}`")
    grid = entry.grid or ()
    if entry.grid is None or [point.params for point in grid] != expected:
        raise SuiteError(f"{refuse}: the lock's grid is not the arm's tuning grid; rerun `harness tune {suite.source}`")
    if not expected:
        return  # the arm sets every tuned key itself: nothing to choose
    means = [point_mean(_values(point, spec.seeds), point.failed, spec.seeds) for point in grid]
    direction = suite.task.metric_for(spec.metric).direction
    wanted = best_of(expected, means, direction)
    # any point tied at the best is a fair choice: locks written before ties gave the middle point chose the first
    if chosen not in tied_best(expected, means, direction):
        rule = f"the best mean {spec.metric} over tuning seeds {', '.join(map(str, spec.seeds))}"
        gives = f"give {_shown(wanted)}" if wanted is not None else "give no point"
        raise SuiteError(f"{refuse}: the lock chose {_shown(chosen)}, but its own per-seed values {gives} by "
                         f"the tune block's rule ({rule}); a lock cannot choose for an arm: rerun "
                         f"`harness tune {suite.source}`")


def _values(point: LockedPoint, seeds: Sequence[int]) -> dict[int, float]:
    """The point's value on each tuning seed that has one (the lock's reader checked each is a finite number)."""
    return {seed: float(value) for seed, value in point.values.items() if seed in seeds and value is not None}


def _shown(params: Any) -> str:
    """Params as one short line of text (a forged lock may hold anything)."""
    text = json.dumps(params, sort_keys=True, default=str) if isinstance(params, (dict, list)) else repr(params)
    return text if len(text) <= 200 else text[:200] + "..."
