"""A reproduction's metrics against the recorded ones, trial by trial.

Every metric but speed (quality, memory, informational) must come back bit-identical on the
same device class: the spine seeds every trial and uses deterministic CPU kernels, so any
difference means the code, a library or the device changed something. Speed cannot repeat
exactly; it is reported as reproduced / recorded ratios with no pass or fail.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from harness.analysis.compare.environment_diff import Difference
from harness.core.record import TrialRecord

SPEED = "speed"


@dataclass(frozen=True)
class MetricCheck:
    """One metric of one trial, recorded and reproduced (None: not reported or not finite)."""

    trial: str
    trial_id: str
    key: str
    kind: str
    recorded: float | None
    reproduced: float | None

    @property
    def identical(self) -> bool:
        """Bit for bit: repr round-trips a float exactly and tells -0.0 from 0.0."""
        return repr(self.recorded) == repr(self.reproduced)

    @property
    def ratio(self) -> float | None:
        if self.recorded is None or self.reproduced is None or self.recorded == 0:
            return None
        return self.reproduced / self.recorded

    def as_dict(self) -> dict[str, Any]:
        return {"trial": self.trial, "trial_id": self.trial_id, "key": self.key, "kind": self.kind,
                "recorded": self.recorded, "reproduced": self.reproduced, "identical": self.identical,
                **({"ratio": self.ratio} if self.kind == SPEED else {})}


@dataclass(frozen=True)
class MetricComparison:
    exact: tuple[MetricCheck, ...]  # every metric but speed
    speed: tuple[MetricCheck, ...]
    status_changes: tuple[Difference, ...]  # trial title: recorded status -> reproduced status
    not_rerun: tuple[str, ...]  # trials of the original without a reproduction (interrupted)

    @property
    def differing(self) -> list[MetricCheck]:
        return [c for c in self.exact if not c.identical]

    @property
    def identical(self) -> bool:
        return not self.differing and not self.status_changes and not self.not_rerun

    def as_dict(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "compared": len(self.exact),
            "differing": [c.as_dict() for c in self.differing],
            "status_changes": [{"trial": d.key, "recorded": d.recorded, "reproduced": d.here} for d in self.status_changes],
            "not_rerun": list(self.not_rerun),
            "speed": [c.as_dict() for c in self.speed],
        }


def compare_metrics(original: Iterable[TrialRecord], reproduced: Iterable[TrialRecord],
                    metric_kinds: Callable[[str], Callable[[str], str]]) -> MetricComparison:
    """Match trials by id and compare every final metric either side reported; ``metric_kinds(task)``
    gives the declared kind of a key (speed is compared apart, everything else exactly)."""
    again = {r.trial_id: r for r in reproduced}
    exact: list[MetricCheck] = []
    speed: list[MetricCheck] = []
    changes: list[Difference] = []
    missing: list[str] = []
    for record in original:
        title = record.title
        other = again.get(record.trial_id)
        if other is None:
            missing.append(title)
            continue
        if record.status != other.status:
            changes.append(Difference(title, str(record.status), _status(other)))
            continue
        kinds = metric_kinds(str(record.task))
        before, after = record.metrics, other.metrics
        for key in sorted(before.keys() | after.keys()):
            kind = kinds(key)
            check = MetricCheck(title, record.trial_id, key, kind, metric_number(before.get(key)),
                                metric_number(after.get(key)))
            (speed if kind == SPEED else exact).append(check)
    return MetricComparison(tuple(exact), tuple(speed), tuple(changes), tuple(missing))


def geometric_mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def _status(record: TrialRecord) -> str:
    return f"{record.status} ({record.error})" if record.error else str(record.status)


def metric_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
