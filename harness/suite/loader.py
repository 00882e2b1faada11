"""Suite files -> validated, profile-applied suites.

Every user mistake surfaces here, before any trial runs, as a ``SuiteError`` whose message
names the file, the line when known, the key, and what was expected.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import ValidationError

from harness.suite.schema import (
    ClaimSpec,
    CollectionSpec,
    ContrastSpec,
    GateSpec,
    SuiteSpec,
    SweepAxes,
    ValiditySpec,
)
from harness.tasks import Task, UnknownTaskError, load_task, metric_family

DEFAULT_PROFILE = "default"


class SuiteError(ValueError):
    """A malformed suite: the message is meant for the user, one line, no traceback."""


@dataclass(frozen=True)
class Arm:
    name: str
    params: dict[str, Any]
    sweep: SweepAxes


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

    def describe(self) -> dict[str, Any]:
        """The resolved suite as plain data (stored with the results and logged to MLflow)."""
        return {
            "suite": self.name,
            "description": self.description,
            "source": str(self.source),
            "profile": self.profile,
            "task": self.task_name,
            "task_version": self.task.version,
            "seeds": self.seeds,
            "params": self.params,
            "sweep": self.sweep,
            "arms": {a.name: {"params": a.params, "sweep": a.sweep} for a in self.arms.values()},
            "contrasts": [c.model_dump() | {"name": c.label} for c in self.contrasts],
            "validity": self.validity.model_dump() if self.validity else None,
            "claims": [c.model_dump(exclude_none=True) for c in self.claims],
            "confidence": self.confidence,
            "gate": self.gate.model_dump(),
        }


def _read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read suite file ({exc.strerror})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SuiteError(f"{where}: malformed YAML: {problem}") from None
    return data, node


def _line_of(node: yaml.Node | None, loc: Sequence[Any]) -> int | None:
    """1-based line of the deepest node reachable along loc (a pydantic error location)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == str(key)), None)
            if match is None:
                key_node = next((k for k, _ in node.value if k.value == str(key)), None)
                return key_node.start_mark.line + 1 if key_node is not None else line
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _where(path: Path, node: yaml.Node | None, loc: Sequence[Any]) -> str:
    line = _line_of(node, loc)
    return f"{path}:{line}" if line else str(path)


def _validation_message(path: Path, node: yaml.Node | None, exc: ValidationError, prefix: Sequence[Any] = ()) -> str:
    err = exc.errors()[0]
    loc = [*prefix, *err["loc"]]
    key = ".".join(str(p) for p in loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        problem = f"unknown key {str(err['loc'][-1])!r}"
    elif err["type"] == "missing":
        problem = "required key is missing"
    else:
        problem = err["msg"]
    return f"{_where(path, node, loc)}: {key}: {problem}"


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
) -> list[Suite]:
    """Load a suite file (or a collection of includes) and apply profile and filters."""
    suites: list[Suite] = []
    _collect(Path(path), profile, seeds, arms, suites, stack=())
    names = [s.name for s in suites]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SuiteError(f"{path}: suite name(s) included more than once: {', '.join(duplicates)}")
    return suites


def _collect(path: Path, profile: str, seeds, arms, out: list[Suite], stack: tuple[Path, ...]) -> None:
    resolved = path.resolve()
    if resolved in stack:
        chain = " -> ".join(str(p) for p in (*stack, resolved))
        raise SuiteError(f"{path}: include cycle: {chain}")
    data, node = _read_yaml(path)
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: a suite file must be a mapping with 'suite:' or 'include:' at the top")
    includes = data.get("include", [])
    if "suite" not in data:
        try:
            CollectionSpec.model_validate(data)
        except ValidationError as exc:
            raise SuiteError(_validation_message(path, node, exc)) from None
    elif includes:
        data = {k: v for k, v in data.items() if k != "include"}
    if not isinstance(includes, list):
        raise SuiteError(f"{_where(path, node, ['include'])}: include: expected a list of suite files")
    for index, child in enumerate(includes):
        child_path = (path.parent / str(child))
        if not child_path.exists():
            raise SuiteError(f"{_where(path, node, ['include', index])}: include: no such file {str(child)!r}")
        _collect(child_path, profile, seeds, arms, out, (*stack, resolved))
    if "suite" in data:
        out.append(_resolve(path, node, data, profile, seeds, arms))


def _resolve(path: Path, node, data: dict, profile: str, seeds, arm_filter) -> Suite:
    try:
        spec = SuiteSpec.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(_validation_message(path, node, exc)) from None
    try:
        task = load_task(spec.task)
    except UnknownTaskError as exc:
        raise SuiteError(f"{_where(path, node, ['task'])}: task: {exc}") from None

    params, sweep, arm_specs, run_seeds = dict(spec.params), dict(spec.sweep), dict(spec.arms), list(spec.seeds)
    gate = spec.gate
    arm_params = {name: a.params for name, a in arm_specs.items()}
    arm_sweeps = {name: a.sweep for name, a in arm_specs.items()}
    if profile != DEFAULT_PROFILE:
        if profile not in spec.profiles:
            valid = ", ".join([DEFAULT_PROFILE, *sorted(spec.profiles)])
            raise SuiteError(f"{path}: unknown profile {profile!r} for suite {spec.suite!r}; valid profiles: {valid}")
        chosen = spec.profiles[profile]
        params = _deep_merge(params, chosen.params)
        if chosen.sweep is not None:
            sweep = dict(chosen.sweep)
        if chosen.seeds is not None:
            run_seeds = list(chosen.seeds)
        if chosen.gate:
            try:
                gate = GateSpec.model_validate(_deep_merge(spec.gate.model_dump(), chosen.gate))
            except ValidationError as exc:
                raise SuiteError(_validation_message(path, node, exc, ["profiles", profile, "gate"])) from None
        for name, override in chosen.arms.items():
            if name not in arm_params:
                raise SuiteError(
                    f"{_where(path, node, ['profiles', profile, 'arms', name])}: profiles.{profile}.arms: "
                    f"unknown arm {name!r}; arms: {', '.join(arm_params)}"
                )
            override = dict(override)
            if "sweep" in override:
                arm_sweeps[name] = dict(override.pop("sweep") or {})
            arm_params[name] = _deep_merge(arm_params[name], override)
    if seeds is not None:
        run_seeds = list(seeds)
    if not run_seeds:
        raise SuiteError(f"{path}: no seeds to run")

    if arm_filter:
        unknown = [a for a in arm_filter if a not in arm_params]
        if unknown:
            raise SuiteError(f"--arms: unknown arm(s) {', '.join(unknown)} in suite {spec.suite!r}; arms: {', '.join(arm_params)}")
        arm_params = {k: v for k, v in arm_params.items() if k in arm_filter}

    arms = {name: Arm(name, p, arm_sweeps[name]) for name, p in arm_params.items()}
    suite = Suite(
        name=spec.suite, description=spec.description, source=path, profile=profile, task_name=spec.task,
        task=task, seeds=run_seeds, params=params, sweep=sweep, arms=arms,
        contrasts=[c for c in spec.contrasts if not arm_filter or (c.treatment in arms and c.control in arms)],
        validity=spec.validity, claims=spec.claims, gate=gate, confidence=spec.confidence, profiles=sorted(spec.profiles),
    )
    _check_references(path, node, spec, suite)
    _check_params(path, node, suite)
    return suite


def _check_references(path: Path, node, spec: SuiteSpec, suite: Suite) -> None:
    """Contrasts, validity and claims must name arms, contrasts and metrics that exist."""
    arms = list(spec.arms)
    for i, contrast in enumerate(spec.contrasts):
        for role in ("treatment", "control"):
            name = getattr(contrast, role)
            if name not in arms:
                raise SuiteError(
                    f"{_where(path, node, ['contrasts', i, role])}: contrasts[{i}].{role}: "
                    f"unknown arm {name!r}; arms: {', '.join(arms)}"
                )
    if spec.validity:
        for role in ("control", "positive", "negative"):
            name = getattr(spec.validity, role)
            if name is not None and name not in arms:
                raise SuiteError(
                    f"{_where(path, node, ['validity', role])}: validity.{role}: unknown arm {name!r}; arms: {', '.join(arms)}"
                )
    declared = suite.task.metric_specs()
    metric_refs = [(["validity", "metric"], spec.validity.metric)] if spec.validity else []
    labels = {c.label for c in spec.contrasts}
    for i, claim in enumerate(spec.claims):
        if claim.contrast not in labels:
            raise SuiteError(
                f"{_where(path, node, ['claims', i, 'contrast'])}: claims[{i}].contrast: unknown contrast "
                f"{claim.contrast!r}; contrasts: {', '.join(sorted(labels)) or '(none declared)'}"
            )
        metric_refs.append((["claims", i, "metric"], claim.metric))
        if claim.reference is not None:
            _check_reference(path, node, spec, i, claim, labels)
    for loc, key in metric_refs:
        if metric_family(key) not in declared:
            raise SuiteError(
                f"{_where(path, node, loc)}: {'.'.join(map(str, loc))}: task {suite.task_name!r} declares no metric "
                f"{metric_family(key)!r}; metrics: {', '.join(sorted(declared))}"
            )


def _check_reference(path: Path, node, spec: SuiteSpec, index: int, claim: ClaimSpec, labels: set[str]) -> None:
    """A claim's reference must be a declared contrast whose treatment is the claim's control."""
    where = f"{_where(path, node, ['claims', index, 'reference'])}: claims[{index}].reference"
    if claim.reference not in labels:
        raise SuiteError(f"{where}: unknown contrast {claim.reference!r}; contrasts: {', '.join(sorted(labels))}")
    contrasts = {c.label: c for c in spec.contrasts}
    control = contrasts[claim.contrast].control
    if contrasts[claim.reference].treatment != control:
        raise SuiteError(
            f"{where}: contrast {claim.reference!r} must have the claim's control {control!r} as its treatment "
            f"(it shows that {control!r} works in this run), not {contrasts[claim.reference].treatment!r}"
        )


def _check_params(path: Path, node, suite: Suite) -> None:
    """Validate every arm's merged params at every sweep point with the task's own schema."""
    from harness.execution.trials import arm_variants, sweep_points

    for arm in suite.arms.values():
        for variant_params in arm_variants(arm):
            for point in sweep_points(suite.sweep):
                merged = {**suite.params, **variant_params, **point}
                try:
                    suite.task.validate_params(merged)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    key = str(err["loc"][0]) if err["loc"] else "?"
                    loc = ["arms", arm.name, key] if key in arm.params else ["params", key]
                    if err["type"] == "extra_forbidden":
                        valid = ", ".join(sorted(suite.task.Params.model_fields))
                        problem = f"unknown param {key!r} for task {suite.task_name!r}; valid params: {valid}"
                    else:
                        problem = f"param {key!r}: {err['msg']}"
                    raise SuiteError(f"{_where(path, node, loc)}: arm {arm.name!r}: {problem}") from None
