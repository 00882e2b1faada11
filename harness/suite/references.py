"""Checks across a resolved suite: every contrast, validity control and claim names arms and
contrasts that exist, params validate with the task's own schema at every sweep point, and the
suite does not expand past the trial limit."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.core.metrics import metric_key_problem, tracking_name
from harness.suite.resolved_suite import Arm, Suite, SuiteError
from harness.suite.points import point_label, sweep_points
from harness.suite.schema import (
    ClaimSpec,
    SuiteSpec,
    SweepAxes,
)
from harness.suite.yaml_safety import exists, located
from harness.tasks import metric_family
from harness.tasks.param_paths import error_key, layered

MAX_TRIALS = 10_000


def _trial_factors(suite: Suite) -> tuple[int, int, int]:
    points = math.prod(len(values) for values in suite.sweep.values())
    variants = sum(math.prod(len(values) for values in arm.sweep.values()) for arm in suite.arms.values())
    return len(suite.seeds), points, variants


def check_size(path: Path, suite: Suite, max_trials: int) -> None:
    """Refuse a suite that expands to more trials than the limit, before anything expands it."""
    seeds, points, variants = _trial_factors(suite)
    if seeds * points * variants > max_trials:
        raise SuiteError(
            f"{path}: suite {suite.name!r} ({suite.profile}) expands to {seeds * points * variants:,} trials ({seeds} "
            f"seed(s) x {points:,} sweep point(s) x {variants:,} arm variant(s)), above the limit of {max_trials:,}; "
            "shrink the sweeps or raise the limit with --max-trials"
        )


def check_references(path: Path, node, spec: SuiteSpec, suite: Suite) -> None:
    """Contrasts, validity and claims must name arms, contrasts and metrics that exist."""
    arms = list(spec.arms)
    for i, contrast in enumerate(spec.contrasts):
        for role in ("treatment", "control"):
            name = getattr(contrast, role)
            if name not in arms:
                raise SuiteError(
                    f"{located(path, node, ['contrasts', i, role])}: contrasts[{i}].{role}: "
                    f"unknown arm {name!r}; arms: {', '.join(arms)}"
                )
    if spec.mechanism is not None and spec.mechanism not in arms:
        raise SuiteError(f"{located(path, node, ['mechanism'])}: mechanism: unknown arm {spec.mechanism!r}; "
                         f"arms: {', '.join(arms)}")
    if spec.validity:
        for role in ("control", "positive", "negative"):
            name = getattr(spec.validity, role)
            if name is not None and name not in arms:
                raise SuiteError(
                    f"{located(path, node, ['validity', role])}: validity.{role}: unknown arm {name!r}; arms: {', '.join(arms)}"
                )
    labels_seen: dict[str, int] = {}
    for i, contrast in enumerate(spec.contrasts):
        if contrast.label in labels_seen:
            raise SuiteError(
                f"{located(path, node, ['contrasts', i])}: contrasts[{i}]: contrast {contrast.label!r} is declared twice "
                f"(first as contrasts[{labels_seen[contrast.label]}]); give one a 'name'"
            )
        labels_seen[contrast.label] = i
    declared = suite.task.metric_specs()
    metric_refs = [(["validity", "metric"], spec.validity.metric)] if spec.validity else []
    labels = {c.label for c in spec.contrasts}
    for i, claim in enumerate(spec.claims):
        if claim.contrast not in labels:
            raise SuiteError(
                f"{located(path, node, ['claims', i, 'contrast'])}: claims[{i}].contrast: unknown contrast "
                f"{claim.contrast!r}; contrasts: {', '.join(sorted(labels)) or '(none declared)'}"
            )
        metric_refs.append((["claims", i, "metric"], claim.metric))
        if claim.reference is not None:
            _check_reference(path, node, spec, i, claim, labels)
    metric_refs.extend(_check_premises(path, node, spec, labels))
    metric_refs += [(["contrasts", i, "margins", key], key) for i, c in enumerate(spec.contrasts) for key in c.margins]
    for loc, key in metric_refs:
        problem = metric_key_problem(key)
        if problem:  # the key itself is shown only through repr: it may hold a newline or an escape
            raise SuiteError(f"{located(path, node, loc)}: {'.'.join(map(str, loc[:3]))}: {problem}")
        if loc[0] == "contrasts":
            continue  # a margin may name any metric the task reports
        if metric_family(key) not in declared:
            raise SuiteError(
                f"{located(path, node, loc)}: {'.'.join(map(str, loc))}: task {suite.task_name!r} declares no metric "
                f"{metric_family(key)!r}; metrics: {', '.join(sorted(declared))}"
            )
    check_claim_names(path, node, spec)


def check_claim_names(path: Path, node, spec: SuiteSpec) -> None:
    """One claim per contrast and metric (a design rule: each claim is the one hypothesis declared for
    them), and no two claims of a contrast on metrics that share an MLflow name (``acc@1`` and
    ``acc_at_1``): each claim's result is one tag of the suite's run, and one would overwrite the other."""
    first: dict[tuple[str, str], int] = {}
    for i, claim in enumerate(spec.claims):
        name = (claim.contrast, tracking_name(claim.metric))
        if name in first:
            other = spec.claims[first[name]]
            where = f"{located(path, node, ['claims', i, 'metric'])}: claims[{i}].metric"
            if other.metric == claim.metric:
                raise SuiteError(
                    f"{where}: contrast {claim.contrast!r} already makes a claim on {claim.metric!r} (claims[{first[name]}]): "
                    "a design makes one claim per contrast and metric, the one hypothesis it declares for them "
                    "before the run; keep the one you mean"
                )
            raise SuiteError(
                f"{where}: {claim.metric!r} of contrast {claim.contrast!r} has the same MLflow name {name[1]!r} as "
                f"claims[{first[name]}] ({other.metric!r}), so one claim's result would overwrite the other's; "
                "rename one metric"
            )
        first[name] = i


def _check_premises(path: Path, node, spec: SuiteSpec, labels: set[str]) -> list[tuple[list[Any], str]]:
    """Each premise names a known arm or contrast and claims that exist, once per name; returns
    where each premise's metric is written, for the metric check."""
    claimed = [c.contrast for c in spec.claims]
    seen: dict[str, int] = {}
    metric_refs: list[tuple[list[Any], str]] = []
    for i, premise in enumerate(spec.premises):
        if premise.name in seen:
            raise SuiteError(f"{located(path, node, ['premises', i, 'name'])}: premises[{i}].name: premise "
                             f"{premise.name!r} is declared twice (first as premises[{seen[premise.name]}])")
        seen[premise.name] = i
        if premise.arm is not None and premise.arm not in spec.arms:
            raise SuiteError(f"{located(path, node, ['premises', i, 'arm'])}: premises[{i}].arm: unknown arm "
                             f"{premise.arm!r}; arms: {', '.join(spec.arms)}")
        if premise.contrast is not None and premise.contrast not in labels:
            raise SuiteError(f"{located(path, node, ['premises', i, 'contrast'])}: premises[{i}].contrast: unknown "
                             f"contrast {premise.contrast!r}; contrasts: {', '.join(sorted(labels)) or '(none declared)'}")
        for j, name in enumerate(premise.claims or ()):
            if name not in claimed:
                raise SuiteError(f"{located(path, node, ['premises', i, 'claims', j])}: premises[{i}].claims[{j}]: no "
                                 f"claim on contrast {name!r}; claimed contrasts: {', '.join(sorted(set(claimed))) or '(no claims)'}")
        metric_refs.append((["premises", i, "metric"], premise.metric))
    return metric_refs


def _check_reference(path: Path, node, spec: SuiteSpec, index: int, claim: ClaimSpec, labels: set[str]) -> None:
    """A claim's reference must be a declared contrast whose treatment is the claim's control."""
    where = f"{located(path, node, ['claims', index, 'reference'])}: claims[{index}].reference"
    if claim.reference not in labels:
        raise SuiteError(f"{where}: unknown contrast {claim.reference!r}; contrasts: {', '.join(sorted(labels))}")
    contrasts = {c.label: c for c in spec.contrasts}
    control = contrasts[claim.contrast].control
    if contrasts[claim.reference].treatment != control:
        raise SuiteError(
            f"{where}: contrast {claim.reference!r} must have the claim's control {control!r} as its treatment "
            f"(it shows that {control!r} works in this run), not {contrasts[claim.reference].treatment!r}"
        )


def check_params(path: Path, node, suite: Suite, sweep_locs: dict[str | None, list[Any]]) -> None:
    """Validate every arm's merged params at every sweep point with the task's own schema, and
    refuse sweep values that validate to the same params (``[4, "4", 4.0]``): each would run the
    same trial again."""
    points = sweep_points(suite.sweep)
    point_index = _indexes(suite.sweep)
    for arm in suite.arms.values():
        seen: dict[str, tuple[int, int]] = {}
        arm_points, arm_index = sweep_points(arm.sweep), _indexes(arm.sweep)
        for i, arm_point in enumerate(arm_points):
            variant_params = layered(arm.params, arm_point)
            for j, point in enumerate(points):
                merged = layered(suite.params, variant_params, point)
                try:
                    validated = suite.task.validate_params(merged)
                except ValidationError as exc:
                    raise SuiteError(_param_message(path, node, suite, arm, exc, arm_point, point, sweep_locs)) from None
                identity = json.dumps(validated.model_dump(mode="json"), sort_keys=True, default=str)
                if identity not in seen:
                    seen[identity] = (i, j)
                    continue
                first_i, first_j = seen[identity]
                if first_i != i:  # two values of the arm's own sweep
                    loc, axes, a, b, indexes = sweep_locs[arm.name], arm.sweep, arm_points[first_i], arm_point, arm_index
                    pair = (indexes[first_i], indexes[i])
                else:
                    loc, axes, a, b, indexes = sweep_locs[None], suite.sweep, points[first_j], point, point_index
                    pair = (indexes[first_j], indexes[j])
                axis = next(name for n, name in enumerate(axes) if pair[0][n] != pair[1][n])
                raise SuiteError(
                    f"{located(path, node, [*loc, axis, pair[1][list(axes).index(axis)]])}: {'.'.join(map(str, [*loc, axis]))}: "
                    f"values {a[axis]!r} and {b[axis]!r} give arm {arm.name!r} the same params "
                    f"({point_label(a)} and {point_label(b)}); each trial would run twice, remove one"
                )


def _indexes(axes: SweepAxes) -> list[tuple[int, ...]]:
    """The position of each sweep point's value on each axis, in ``sweep_points`` order."""
    return list(itertools.product(*(range(len(values)) for values in axes.values())))


def _param_message(path: Path, node, suite: Suite, arm: Arm, exc: ValidationError, arm_point: dict[str, Any],
                   point: dict[str, Any], sweep_locs: dict[str | None, list[Any]]) -> str:
    err = exc.errors()[0]
    if not err["loc"]:  # a check across params (the task's model validator)
        loc = ["arms", arm.name] if arm.params or arm.sweep else ["params"]
        problem = str(err["msg"]).removeprefix("Value error, ")
        return f"{located(path, node, loc)}: arm {arm.name!r}: params: {problem}"
    extra = err["type"] == "extra_forbidden"
    key, valid = error_key(suite.task.Params, err["loc"][:-1] if extra else err["loc"])
    if extra:
        key = ".".join(filter(None, (key, str(err["loc"][-1]))))
    profile = ["profiles", suite.profile]
    if _written(key, arm_point):
        bases = [sweep_locs[arm.name]]
    elif _written(key, point):
        bases = [sweep_locs[None]]
    elif _written(key, arm.params):
        bases = [[*profile, "arms", arm.name], ["arms", arm.name]]
    else:
        bases = [[*profile, "params"], ["params"]]
    written = [_written(key, layer) for layer in (arm_point, point, arm.params, suite.params)]
    shown = next((w for w in written if w), key)
    candidates = [[*base, *parts] for base in bases for parts in (shown.split("."), [shown])]
    loc = next((c for c in candidates if exists(node, c)), [*bases[-1], shown])
    if extra:
        tag = next((p for p in err["loc"][:-1] if isinstance(p, str) and p not in key.split(".")), None)
        owner = f"{key.rpartition('.')[0]!r}" + (f" (kind {tag!r})" if tag else "") if "." in key else "the task"
        problem = f"unknown param {key!r} for task {suite.task_name!r}; {owner} takes: {', '.join(valid)}"
    elif valid:  # a check across the fields of a nested model (its validator)
        problem = f"params: {str(err['msg']).removeprefix('Value error, ')}"
    else:
        problem = f"param {key!r}: {str(err['msg']).removeprefix('Value error, ')}"
        if "input" in err and not isinstance(err["input"], dict):
            problem += f" (got {err['input']!r})"
    return f"{located(path, node, loc)}: arm {arm.name!r}: {problem}"


def _written(key: str, params: dict[str, Any]) -> str | None:
    """The key of ``params`` that sets ``key`` or a field inside it (``workload.kind`` for ``workload``)."""
    return next((k for k in params if k == key or k.startswith(f"{key}.")), None)
