"""Suite files -> validated, profile-applied suites.

Every user mistake surfaces here, before any trial runs, as a ``SuiteError`` whose message
names the file, the line when known, the key, and what was expected.
"""
from __future__ import annotations

import copy
import itertools
import json
import math
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import ValidationError

from harness.suite.points import point_label, sweep_points
from harness.suite.schema import (
    ClaimSpec,
    CollectionSpec,
    ContrastSpec,
    GateSpec,
    SuiteSpec,
    SweepAxes,
    ValiditySpec,
    check_name,
    check_seeds,
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


# Bounds on what one suite file may ask for, so that a hostile or mistaken file fails at once
# instead of hanging `validate` or filling the disk: nodes after expanding YAML aliases (a few
# hundred in the shipped suites), nesting depth, and trials after expanding seeds and sweeps.
MAX_SUITE_NODES = 100_000
MAX_DEPTH = 50
MAX_TRIALS = 10_000
MAX_SUITE_BYTES = 1 << 20  # 1 MiB, ~200x the largest shipped suite; more with a --max-suite-nodes above 104,857
BYTES_PER_NODE = 10


class _TooManyNodes(yaml.YAMLError):
    """More nodes composed than the limit allows, counted as the document is read."""

    def __init__(self, mark: yaml.Mark) -> None:
        super().__init__()
        self.mark = mark


class _SuiteLoader(yaml.SafeLoader):
    """A safe loader that refuses nesting beyond ``MAX_DEPTH`` and more than ``max_nodes`` nodes
    while composing (pyyaml composes recursively: 500 levels would otherwise end in a
    RecursionError, and a long list would be built whole, at kilobytes of memory a node, before
    ``_check_nodes`` counted it)."""

    def __init__(self, stream: str, max_nodes: int = MAX_SUITE_NODES) -> None:
        super().__init__(stream)
        self._depth, self._nodes, self._max_nodes = 0, 0, max_nodes

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            if self._nodes > self._max_nodes:
                raise _TooManyNodes(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _read_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes, refused at once when it is not a regular file (a FIFO would block, /dev/zero
    never end) or holds more than ``limit`` bytes."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise SuiteError(f"{path}: not a regular file; a suite is a YAML file")
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read suite file ({exc.strerror})") from None
    if len(raw) > limit:
        raise SuiteError(f"{path}: larger than {limit:,} bytes; a suite file is a few KB "
                         f"(raise the limit with --max-suite-nodes, which allows {BYTES_PER_NODE} bytes a node)")
    return raw


def _read_yaml(path: Path, max_nodes: int = MAX_SUITE_NODES) -> tuple[Any, yaml.Node | None]:
    raw = _read_bytes(path, max(MAX_SUITE_BYTES, max_nodes * BYTES_PER_NODE))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the suite as UTF-8"
        ) from None
    loader = None
    try:
        loader = _SuiteLoader(text, max_nodes)  # the reader refuses control characters at once
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(path, loader, node, max_nodes)
        data = loader.construct_document(node) if node is not None else None
    except _TooManyNodes as exc:
        raise SuiteError(f"{path}:{exc.mark.line + 1}: expands to more than {max_nodes:,} YAML nodes by this line "
                         "(raise the limit with --max-suite-nodes)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
        raise SuiteError(f"{where}: malformed YAML: {_one_line(problem)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_nodes(path: Path, loader: yaml.SafeLoader, root: yaml.Node, max_nodes: int) -> None:
    """Refuse duplicate mapping keys, recursive aliases, and documents that are too large or too
    deep once aliases are expanded (the classic alias bomb is tiny as text)."""
    size: dict[int, int] = {}  # node id -> nodes in its expanded subtree
    depth: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str, ...], bool]] = [(root, (), False)]
    while stack:
        node, where, done = stack.pop()
        key = id(node)
        if done:
            entered.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            dotted = ".".join(where) or "(top level)"
            line = f"{path}:{node.start_mark.line + 1}"
            if size[key] > max_nodes:
                raise SuiteError(
                    f"{line}: {dotted}: expands to more than {max_nodes:,} YAML nodes (aliases included); "
                    "is an alias repeated by mistake? (raise the limit with --max-suite-nodes)"
                )
            if depth[key] > MAX_DEPTH:
                raise SuiteError(f"{line}: {dotted}: nested deeper than {MAX_DEPTH} levels once aliases are expanded")
            continue
        if key in size:
            continue
        if key in entered:
            raise SuiteError(f"{path}:{node.start_mark.line + 1}: {'.'.join(where)}: an alias refers to itself (recursive YAML)")
        entered.add(key)
        stack.append((node, where, True))
        if isinstance(node, yaml.MappingNode):
            _check_keys(path, loader, node, where)
            # children pushed last-first, so nodes are visited in document order: an anchored node is
            # first reached where it is defined (anchors precede their aliases), which messages name
            for key_node, value_node in reversed(node.value):
                label = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                stack.append((value_node, (*where, label), False))
                stack.append((key_node, where, False))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, (*where, str(i)), False) for i, child in reversed(list(enumerate(node.value))))


def _check_keys(path: Path, loader: yaml.SafeLoader, node: yaml.MappingNode, where: tuple[str, ...]) -> None:
    """A key written twice in one mapping is an error (pyyaml would silently keep the last)."""
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if key in first:
            dotted = ".".join((*where, str(key)))
            raise SuiteError(
                f"{path}:{line}: {dotted}: duplicate key {key!r} (first at line {first[key]}); each key may appear once"
            )
        first[key] = line


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


def _exists(node: yaml.Node | None, loc: Sequence[Any]) -> bool:
    """Whether the document has a value at loc (mapping keys and sequence indexes)."""
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return False
    return node is not None


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
    max_trials: int = MAX_TRIALS,
    max_nodes: int = MAX_SUITE_NODES,
) -> list[Suite]:
    """Load a suite file (or a collection of includes) and apply profile and filters.

    ``max_trials`` bounds the trials one suite expands to, ``max_nodes`` the YAML nodes of one
    file once aliases are expanded; both are refused with a message naming the override flag.
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
    limits = _Limits(max_trials, max_nodes)
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


def _collect(path: Path, profile: str, seeds, arms, out: list[Suite], stack: tuple[Path, ...],
             seen: dict[Path, Path], limits: _Limits) -> None:
    resolved = path.resolve()
    if resolved in stack:
        chain = " -> ".join(str(p) for p in (*stack, resolved))
        raise SuiteError(f"{path}: include cycle: {chain}")
    if resolved in seen:  # also bounds the work of an include tree that names files many times
        raise SuiteError(f"{path}: included more than once (first from {seen[resolved]}); include each file once")
    seen[resolved] = stack[-1] if stack else resolved
    data, node = _read_yaml(path, limits.nodes)
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
        if not child_path.is_file():
            raise SuiteError(f"{_where(path, node, ['include', index])}: include: no such file {str(child)!r}")
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
                raise SuiteError(f"{_where(path, node, [section, name])}: {section}.{name}: {exc}") from None


def _axes(path: Path, node, loc: list[Any], axes: Any) -> SweepAxes:
    """A sweep: a mapping of param name -> non-empty list of values."""
    dotted = ".".join(map(str, loc))
    if axes is None:
        return {}
    if not isinstance(axes, dict):
        raise SuiteError(f"{_where(path, node, loc)}: {dotted}: expected a mapping of param -> list of values")
    for name, values in axes.items():
        if not isinstance(values, list) or not values:
            raise SuiteError(
                f"{_where(path, node, [*loc, name])}: {dotted}.{name}: expected a non-empty list of values, got {values!r}"
            )
    return dict(axes)


def _resolve(path: Path, node, data: dict, profile: str, seeds, arm_filter, limits: _Limits) -> Suite:
    _check_names(path, node, data)
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
    arm_sweeps = {
        name: _axes(path, node, ["arms", name, "sweep"], (a.model_extra or {}).get("sweep"))
        for name, a in arm_specs.items()
    }
    # where each sweep was written, for messages about its values
    sweep_locs: dict[str | None, list[Any]] = {None: ["sweep"], **{n: ["arms", n, "sweep"] for n in arm_specs}}
    if profile != DEFAULT_PROFILE:
        if profile not in spec.profiles:
            valid = ", ".join([DEFAULT_PROFILE, *sorted(spec.profiles)])
            raise SuiteError(f"{path}: unknown profile {profile!r} for suite {spec.suite!r}; valid profiles: {valid}")
        chosen = spec.profiles[profile]
        params = _deep_merge(params, chosen.params)
        if chosen.sweep is not None:
            sweep = dict(chosen.sweep)
            sweep_locs[None] = ["profiles", profile, "sweep"]
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
                sweep_locs[name] = ["profiles", profile, "arms", name, "sweep"]
                arm_sweeps[name] = _axes(path, node, sweep_locs[name], override.pop("sweep"))
            arm_params[name] = _deep_merge(arm_params[name], override)
    if seeds is not None:
        run_seeds = list(seeds)
    if not run_seeds:
        raise SuiteError(f"{path}: no seeds to run")

    if arm_filter is not None:
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
    _check_size(path, suite, limits.trials)
    for arm in arms.values():
        shadowed = next((axis for axis in arm.sweep if axis in sweep), None)
        if shadowed is not None:
            loc = [*sweep_locs[arm.name], shadowed]
            raise SuiteError(
                f"{_where(path, node, loc)}: {'.'.join(map(str, loc))}: {shadowed!r} is also swept by the suite's sweep, "
                "which would override every value of this one; sweep it in one place"
            )
    _check_references(path, node, spec, suite)
    _check_params(path, node, suite, sweep_locs)
    return suite


def count_trials(suite: Suite) -> int:
    """Trials a suite expands to (seeds x sweep points x arm variants), counted without expanding."""
    return math.prod(_trial_factors(suite))


def _trial_factors(suite: Suite) -> tuple[int, int, int]:
    points = math.prod(len(values) for values in suite.sweep.values())
    variants = sum(math.prod(len(values) for values in arm.sweep.values()) for arm in suite.arms.values())
    return len(suite.seeds), points, variants


def _check_size(path: Path, suite: Suite, max_trials: int) -> None:
    """Refuse a suite that expands to more trials than the limit, before anything expands it."""
    seeds, points, variants = _trial_factors(suite)
    if seeds * points * variants > max_trials:
        raise SuiteError(
            f"{path}: suite {suite.name!r} ({suite.profile}) expands to {seeds * points * variants:,} trials ({seeds} "
            f"seed(s) x {points:,} sweep point(s) x {variants:,} arm variant(s)), above the limit of {max_trials:,}; "
            "shrink the sweeps or raise the limit with --max-trials"
        )


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
    labels_seen: dict[str, int] = {}
    for i, contrast in enumerate(spec.contrasts):
        if contrast.label in labels_seen:
            raise SuiteError(
                f"{_where(path, node, ['contrasts', i])}: contrasts[{i}]: contrast {contrast.label!r} is declared twice "
                f"(first as contrasts[{labels_seen[contrast.label]}]); give one a 'name'"
            )
        labels_seen[contrast.label] = i
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


def _check_params(path: Path, node, suite: Suite, sweep_locs: dict[str | None, list[Any]]) -> None:
    """Validate every arm's merged params at every sweep point with the task's own schema, and
    refuse sweep values that validate to the same params (``[4, "4", 4.0]``): each would run the
    same trial again."""
    points = sweep_points(suite.sweep)
    point_index = _indexes(suite.sweep)
    for arm in suite.arms.values():
        seen: dict[str, tuple[int, int]] = {}
        arm_points, arm_index = sweep_points(arm.sweep), _indexes(arm.sweep)
        for i, arm_point in enumerate(arm_points):
            variant_params = {**arm.params, **arm_point}
            for j, point in enumerate(points):
                merged = {**suite.params, **variant_params, **point}
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
                    f"{_where(path, node, [*loc, axis, pair[1][list(axes).index(axis)]])}: {'.'.join(map(str, [*loc, axis]))}: "
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
        return f"{_where(path, node, loc)}: arm {arm.name!r}: params: {problem}"
    key = str(err["loc"][0])
    profile = ["profiles", suite.profile]
    if key in arm_point:
        candidates = [[*sweep_locs[arm.name], key]]
    elif key in point:
        candidates = [[*sweep_locs[None], key]]
    elif key in arm.params:
        candidates = [[*profile, "arms", arm.name, key], ["arms", arm.name, key]]
    else:
        candidates = [[*profile, "params", key], ["params", key]]
    loc = next((c for c in candidates if _exists(node, c)), candidates[-1])
    if err["type"] == "extra_forbidden":
        valid = ", ".join(sorted(suite.task.Params.model_fields))
        problem = f"unknown param {key!r} for task {suite.task_name!r}; valid params: {valid}"
    else:
        problem = f"param {key!r}: {err['msg']}"
        if "input" in err and err["loc"]:
            problem += f" (got {err['input']!r})"
    return f"{_where(path, node, loc)}: arm {arm.name!r}: {problem}"
