"""Suite files -> validated, profile-applied suites.

Every user mistake surfaces here, before any trial runs, as a ``SuiteError`` whose message
names the file, the line when known, the key, and what was expected. This module composes a
suite (includes, profiles, arm filters); ``yaml_safety`` reads the file, ``references`` checks
the result.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from harness.suite.resolved_suite import DEFAULT_PROFILE, Arm, ParamLayer, Suite, SuiteError
from harness.suite.references import MAX_TRIALS, check_params, check_references, check_size
from harness.suite.tuning_plan import apply_lock, check_tune
from harness.suite.schema import (
    CollectionSpec,
    SEED_LIMIT,
    GateSpec,
    SequentialSpec,
    SuiteSpec,
    SweepAxes,
    check_name,
    check_seeds,
)
from harness.suite.yaml_safety import MAX_SUITE_NODES, located, read_yaml, validation_message
from harness.tasks import UnknownTaskError, load_task
from harness.tasks.base import Task
from harness.tasks.param_paths import ParamPathError, flatten, layered, leaf_fields


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_suites(
    path: str | Path,
    profile: str = DEFAULT_PROFILE,
    seeds: Sequence[int] | None = None,
    arms: Sequence[str] | None = None,
    max_trials: int = MAX_TRIALS,
    max_nodes: int = MAX_SUITE_NODES,
    apply_locks: bool = True,
    lock_of_any_version: bool = False,
) -> list[Suite]:
    """Load a suite file (or a collection of includes) and apply profile and filters.

    ``max_trials`` bounds the trials one suite expands to, ``max_nodes`` the YAML nodes of one
    file once aliases are expanded; both are refused with a message naming the override flag.
    ``apply_locks``: give tuned arms the params of the tuning lock beside their suite file (off
    for ``harness tune``, which makes the lock). ``lock_of_any_version``: apply a lock tuned on another task
    version too (the audit reads an old commit's lock with today's task, whose version may have moved on).
    """
    suites: list[Suite] = []
    if seeds is not None:
        try:
            seeds = check_seeds(seeds)
        except ValueError as exc:
            raise SuiteError(f"--seeds: {exc}") from None
    if arms is not None:
        if not arms:
            raise SuiteError("--arms: no arm names given (leave --arms out to run every arm)")
        repeated = sorted({a for a in arms if list(arms).count(a) > 1})
        if repeated:
            raise SuiteError(f"--arms: arm(s) given twice: {', '.join(repeated)}")
    limits = _Limits(max_trials, max_nodes, apply_locks, lock_of_any_version)
    _collect(Path(path), profile, seeds, arms, suites, stack=(), seen={}, limits=limits)
    names = [s.name for s in suites]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SuiteError(f"{path}: suite name(s) included more than once: {', '.join(duplicates)}")
    return suites


@dataclass(frozen=True)
class _Limits:
    trials: int
    nodes: int
    apply_locks: bool = True
    lock_of_any_version: bool = False


def _collect(path: Path, profile: str, seeds, arms, out: list[Suite], stack: tuple[Path, ...],
             seen: dict[Path, Path], limits: _Limits) -> None:
    resolved = path.resolve()
    if resolved in stack:
        chain = " -> ".join(str(p) for p in (*stack, resolved))
        raise SuiteError(f"{path}: include cycle: {chain}")
    if resolved in seen:  # also bounds the work of an include tree that names files many times
        raise SuiteError(f"{path}: included more than once (first from {seen[resolved]}); include each file once")
    seen[resolved] = stack[-1] if stack else resolved
    data, node = read_yaml(path, limits.nodes)
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: a suite file must be a mapping with 'suite:' or 'include:' at the top")
    includes = data.get("include", [])
    if "suite" not in data:
        try:
            CollectionSpec.model_validate(data)
        except ValidationError as exc:
            raise SuiteError(validation_message(path, node, exc)) from None
    elif includes:
        data = {k: v for k, v in data.items() if k != "include"}
    if not isinstance(includes, list):
        raise SuiteError(f"{located(path, node, ['include'])}: include: expected a list of suite files")
    for index, child in enumerate(includes):
        child_path = (path.parent / str(child))
        if not child_path.is_file():
            raise SuiteError(f"{located(path, node, ['include', index])}: include: no such file {str(child)!r}")
        _collect(child_path, profile, seeds, arms, out, (*stack, resolved), seen, limits)
    if "suite" in data:
        out.append(_resolve(path, node, data, profile, seeds, arms, limits))


def _check_names(path: Path, node, data: dict) -> None:
    """Arm and profile names become folder and file names: plain words only (checked here, where
    the line of each name is known)."""
    for section, what in (("arms", "arm"), ("profiles", "profile")):
        entries = data.get(section)
        for name in entries if isinstance(entries, dict) else ():
            try:
                check_name(name, what)
            except ValueError as exc:
                raise SuiteError(f"{located(path, node, [section, name])}: {section}.{name}: {exc}") from None


def _axes(path: Path, node, loc: list[Any], axes: Any) -> SweepAxes:
    """A sweep: a mapping of param name -> non-empty list of values."""
    dotted = ".".join(map(str, loc))
    if axes is None:
        return {}
    if not isinstance(axes, dict):
        raise SuiteError(f"{located(path, node, loc)}: {dotted}: expected a mapping of param -> list of values")
    for name, values in axes.items():
        if not isinstance(values, list) or not values:
            raise SuiteError(
                f"{located(path, node, [*loc, name])}: {dotted}.{name}: expected a non-empty list of values, got {values!r}"
            )
    return dict(axes)


@dataclass
class _Where:
    """A suite file being resolved: its path, its YAML node (for line numbers), its spec and task."""

    path: Path
    node: Any
    spec: SuiteSpec
    task: type[Task]

    def leaves(self, loc: list[Any], values: dict[str, Any]) -> dict[str, Any]:
        return _leaves(self.path, self.node, loc, self.task, values)

    def located(self, loc: list[Any]) -> str:
        return located(self.path, self.node, loc)


@dataclass
class _Draft:
    """A suite as its layers apply (the suite file's, then its profile's, then the command line's): the
    params and sweeps, the seeds and design, and where each sweep was written (for messages about it)."""

    params: dict[str, Any]
    sweep: SweepAxes
    arm_params: dict[str, dict[str, Any]]
    arm_sweeps: dict[str, SweepAxes]
    sweep_locs: dict[str | None, list[Any]]
    layers: list[ParamLayer]  # lowest precedence first
    arm_layers: list[ParamLayer]
    seeds: list[int]
    gate: GateSpec
    sequential: SequentialSpec | None
    sequential_loc: list[Any]
    seed_batch: int = 1


def _resolve(path: Path, node, data: dict, profile: str, seeds, arm_filter, limits: _Limits) -> Suite:
    """A suite file's data as one validated suite: its spec, at ``profile``, at ``seeds`` (the command
    line's, else the profile's or the file's), with the arms ``arm_filter`` keeps, checked, its lock applied."""
    where = _parsed(path, node, data)
    draft = _draft(where)
    if profile != DEFAULT_PROFILE:
        _apply_profile(where, draft, profile)
    if seeds is not None:
        draft.seeds, draft.sequential = list(seeds), None  # --seeds: exactly these, a fixed design
    if not draft.seeds:
        raise SuiteError(f"{path}: no seeds to run")
    if draft.sequential is not None:
        _check_design(path, node, draft.sequential_loc, draft.seeds, draft.sequential)
    suite = _suite(where, draft, profile, _kept_arms(where, draft, arm_filter), arm_filter)
    _check(where, draft, suite, limits)
    if limits.apply_locks:
        locked = apply_lock(path, node, where.spec, suite, limits.lock_of_any_version)
        if locked is not suite:
            check_params(path, node, locked, draft.sweep_locs)
        suite = locked
    return suite


def _parsed(path: Path, node, data: dict) -> _Where:
    """The file's data validated against the schema, and its task found."""
    _check_names(path, node, data)
    try:
        spec = SuiteSpec.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(validation_message(path, node, exc)) from None
    try:
        task = load_task(spec.task)
    except UnknownTaskError as exc:
        raise SuiteError(f"{located(path, node, ['task'])}: task: {exc}") from None
    return _Where(path, node, spec, task)


def _draft(where: _Where) -> _Draft:
    """The suite file's own layer: its params, sweeps, arms, seeds, gate and design."""
    spec = where.spec
    params = where.leaves(["params"], spec.params)
    arm_params = {name: where.leaves(["arms", name], a.params) for name, a in spec.arms.items()}
    arm_sweeps = {name: _axes(where.path, where.node, ["arms", name, "sweep"], (a.model_extra or {}).get("sweep"))
                  for name, a in spec.arms.items()}
    return _Draft(
        params=params, sweep=dict(spec.sweep), arm_params=arm_params, arm_sweeps=arm_sweeps,
        sweep_locs={None: ["sweep"], **{name: ["arms", name, "sweep"] for name in spec.arms}},
        layers=[ParamLayer("suite params", None, dict(params))],
        arm_layers=[ParamLayer("arm", name, dict(p)) for name, p in arm_params.items()],
        seeds=list(spec.seeds), gate=spec.gate, sequential=spec.sequential, sequential_loc=["sequential"],
        seed_batch=spec.seed_batch,
    )


def _apply_profile(where: _Where, draft: _Draft, profile: str) -> None:
    """The profile's layer over the file's: params, sweeps, seeds (a profile's seeds make a fixed design
    unless it names its own), the design, the gate and each arm's overrides."""
    spec, path = where.spec, where.path
    if profile not in spec.profiles:
        valid = ", ".join([DEFAULT_PROFILE, *sorted(spec.profiles)])
        raise SuiteError(f"{path}: unknown profile {profile!r} for suite {spec.suite!r}; valid profiles: {valid}")
    chosen = spec.profiles[profile]
    if chosen.seed_batch is not None:
        draft.seed_batch = chosen.seed_batch
    profile_params = where.leaves(["profiles", profile, "params"], chosen.params)
    draft.params = layered(draft.params, profile_params)
    draft.layers.append(ParamLayer(f"profile {profile} params", None, profile_params))
    if chosen.sweep is not None:
        draft.sweep = dict(chosen.sweep)
        draft.sweep_locs[None] = ["profiles", profile, "sweep"]
    if chosen.seeds is not None:
        draft.seeds = list(chosen.seeds)
        draft.sequential = None
    if "sequential" in chosen.model_fields_set:
        draft.sequential, draft.sequential_loc = chosen.sequential, ["profiles", profile, "sequential"]
    if chosen.gate:
        try:
            draft.gate = GateSpec.model_validate(_deep_merge(spec.gate.model_dump(), chosen.gate))
        except ValidationError as exc:
            raise SuiteError(validation_message(path, where.node, exc, ["profiles", profile, "gate"])) from None
    for name, override in chosen.arms.items():
        if name not in draft.arm_params:
            raise SuiteError(
                f"{where.located(['profiles', profile, 'arms', name])}: profiles.{profile}.arms: "
                f"unknown arm {name!r}; arms: {', '.join(draft.arm_params)}"
            )
        override = dict(override)
        if "sweep" in override:
            draft.sweep_locs[name] = ["profiles", profile, "arms", name, "sweep"]
            draft.arm_sweeps[name] = _axes(path, where.node, draft.sweep_locs[name], override.pop("sweep"))
        override = where.leaves(["profiles", profile, "arms", name], override)
        draft.arm_params[name] = layered(draft.arm_params[name], override)
        draft.arm_layers.append(ParamLayer(f"profile {profile} arms.{name}", name, override))


def _kept_arms(where: _Where, draft: _Draft, arm_filter: Sequence[str] | None) -> dict[str, Arm]:
    """The arms a run keeps (``--arms``), each with its resolved params and sweep."""
    kept = draft.arm_params
    if arm_filter is not None:
        unknown = [a for a in arm_filter if a not in draft.arm_params]
        if unknown:
            raise SuiteError(f"--arms: unknown arm(s) {', '.join(unknown)} in suite {where.spec.suite!r}; arms: "
                             f"{', '.join(draft.arm_params)}")
        kept = {k: v for k, v in draft.arm_params.items() if k in arm_filter}
    return {name: Arm(name, p, draft.arm_sweeps[name]) for name, p in kept.items()}


def _suite(where: _Where, draft: _Draft, profile: str, arms: dict[str, Arm], arm_filter: Sequence[str] | None) -> Suite:
    """The suite the draft resolves to (the contrasts of arms ``--arms`` left out left out too)."""
    spec = where.spec
    return Suite(
        name=spec.suite, description=spec.description, source=where.path, profile=profile, task_name=spec.task,
        task=where.task, seeds=draft.seeds, params=draft.params, sweep=draft.sweep, arms=arms,
        contrasts=[c for c in spec.contrasts if not arm_filter or (c.treatment in arms and c.control in arms)],
        validity=spec.validity, claims=spec.claims, gate=draft.gate, confidence=spec.confidence,
        profiles=sorted(spec.profiles), sequential=draft.sequential, premises=spec.premises,
        param_layers=(*draft.layers, *draft.arm_layers), tune=spec.tune, mechanism=spec.mechanism,
        seed_batch=draft.seed_batch,
    )


def _check(where: _Where, draft: _Draft, suite: Suite, limits: _Limits) -> None:
    """The resolved suite's size, sweeps, references, params and tune block."""
    path, node = where.path, where.node
    check_size(path, suite, limits.trials)
    for arm in suite.arms.values():
        shadowed = next((axis for axis in arm.sweep if axis in suite.sweep), None)
        if shadowed is not None:
            loc = [*draft.sweep_locs[arm.name], shadowed]
            raise SuiteError(
                f"{located(path, node, loc)}: {'.'.join(map(str, loc))}: {shadowed!r} is also swept by the suite's sweep, "
                "which would override every value of this one; sweep it in one place"
            )
    for name, axes in (("", suite.sweep), *((a.name, a.sweep) for a in suite.arms.values())):
        _check_axes(path, node, draft.sweep_locs[name or None], where.task, axes)
    check_references(path, node, where.spec, suite)
    check_params(path, node, suite, draft.sweep_locs)
    if where.spec.tune is not None:  # with every arm: the tuning budget is the same however a run filters arms
        every_arm = {name: Arm(name, p, draft.arm_sweeps[name]) for name, p in draft.arm_params.items()}
        check_tune(path, node, where.spec, replace(suite, arms=every_arm), limits.trials)


def _leaves(path: Path, node, loc: list[Any], task: type[Task], values: dict[str, Any]) -> dict[str, Any]:
    """A layer of params as dotted leaves, so that layering replaces only the fields it names; a key
    that names no param of the task is refused where it is written."""
    try:
        return flatten(task.Params, values, owner=f"task {task.name!r}")
    except ParamPathError as exc:
        where = [*loc, *exc.keys]
        raise SuiteError(f"{located(path, node, where)}: {'.'.join(map(str, where))}: {exc}") from None


def _check_axes(path: Path, node, loc: list[Any], task: type[Task], axes: SweepAxes) -> None:
    """Each sweep axis names one param a value can be given to (a nested model is swept field by field)."""
    for axis in axes:
        _leaves(path, node, loc, task, {axis: None})
        if axis not in leaf_fields(task.Params):
            inner = ", ".join(f for f in leaf_fields(task.Params) if f.startswith(f"{axis}."))
            raise SuiteError(f"{located(path, node, [*loc, axis])}: {'.'.join(map(str, [*loc, axis]))}: {axis!r} is a "
                             f"nested param; sweep its fields one by one ({inner})")


def _check_design(path: Path, node, loc: list[Any], seeds: list[int], design: SequentialSpec) -> None:
    """A sequential design needs a t interval at its first look and room to grow."""
    if len(seeds) < 2:
        raise SuiteError(f"{located(path, node, ['seeds'])}: seeds: a sequential design's first look needs at "
                         f"least 2 seeds (a t interval), got {len(seeds)}")
    if design.max_seeds < len(seeds):
        raise SuiteError(f"{located(path, node, [*loc, 'max_seeds'])}: {'.'.join(loc)}.max_seeds: "
                         f"{design.max_seeds} is fewer than the {len(seeds)} seeds of the first look")
    if max(seeds) + design.max_seeds - len(seeds) >= SEED_LIMIT:
        raise SuiteError(f"{located(path, node, [*loc, 'max_seeds'])}: {'.'.join(loc)}.max_seeds: the seeds after "
                         f"{max(seeds)} would pass 2**63")
