"""Each arm's params as its trials get them, with the place each value comes from.

Precedence, lowest first: the task's defaults, the suite's ``params``, the profile's ``params``,
the arm's own params, the profile's ``arms.<arm>`` override, then sweep values (the arm's ``sweep``
and the suite's). An arm's own value therefore beats a profile's ``params``: a profile shrinks it
under its ``arms:``. The suite keeps its layers in that order (``Suite.param_layers``); another
source (a tuning lock) is one more layer inserted at its place, and is named here without change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.suite.resolved_suite import Suite
from harness.suite.points import sweep_points
from harness.tasks.param_paths import flatten, layered

TASK_DEFAULT = "task default"


@dataclass(frozen=True)
class ResolvedParam:
    name: str
    value: Any  # the validated value; a list of values when swept
    source: str


def resolved_params(suite: Suite) -> dict[str, list[ResolvedParam]]:
    """Arm name -> every param of the task, validated, with its source."""
    out: dict[str, list[ResolvedParam]] = {}
    for arm in suite.arms.values():
        sources: dict[str, str] = {}
        for layer in suite.param_layers:
            if layer.arm in (None, arm.name):
                sources.update((key, layer.source) for key in layer.params)
        swept = {**{k: ("suite sweep", v) for k, v in suite.sweep.items()},
                 **{k: ("arm sweep", v) for k, v in arm.sweep.items()}}
        first = {**next(iter(sweep_points(arm.sweep))), **next(iter(sweep_points(suite.sweep)))}
        validated = suite.task.validate_params(layered(suite.params, arm.params, first)).model_dump(mode="json")
        values = flatten(suite.task.Params, validated)
        out[arm.name] = [
            ResolvedParam(key, swept[key][1], swept[key][0]) if key in swept
            else ResolvedParam(key, value, sources.get(key, TASK_DEFAULT))
            for key, value in values.items()
        ]
    return out


def render_resolved(suite: Suite) -> str:
    """The resolved params as an indented block per arm, for ``harness validate --resolved``."""
    lines = []
    for arm, params in resolved_params(suite).items():
        lines.append(f"  arm {arm}:")
        width = max((len(f"{p.name} = {p.value!r}") for p in params), default=0)
        lines.extend(f"    {f'{p.name} = {p.value!r}':<{width}}  ({p.source})" for p in params)
    return "\n".join(lines)
