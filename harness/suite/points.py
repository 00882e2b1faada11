"""Sweep points and their labels: how a suite's sweep axes become the points every arm runs at, and
the ``name=value`` label by which results, reports and baselines name a point."""
from __future__ import annotations

import itertools
from typing import Any

from harness.core.record import point_label
from harness.suite.schema import SweepAxes


def sweep_points(axes: SweepAxes) -> list[dict[str, Any]]:
    """Cartesian product of sweep axes in declaration order; one empty point without axes."""
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*(axes[n] for n in names))]


def arm_label(arm_name: str, point: dict[str, Any]) -> str:
    """An arm's label at one point of its own sweep: ``name[axis=value]``, or the name without a sweep."""
    return f"{arm_name}[{point_label(point)}]" if point else arm_name
