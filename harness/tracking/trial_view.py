"""How a trial shows in MLflow beyond its record: which final metrics earn a chart, and its workload as
a dataset input.

MLflow's chart view draws one chart per metric name, so an informational metric (no direction) that
is zero says nothing and pushes the charts that answer out of sight: such a zero is not mirrored (the
trial JSON keeps it). A claim or validity metric always has a direction, so it is never left out.

The workload is the data a trial trains and is scored on. It is fixed by the task's code, the seed and
the params no arm sets (the paired arms of a seed see the same data), so its digest hashes exactly those:
the Datasets column then shows which trials share their data, and a dataset filter picks one seed's pair.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from harness.core.metrics import metric_family
from harness.core.record import TrialRecord
from harness.core.trial_environment import TaskEnvironment
from harness.suite.stored import StoredSuite
from harness.tracking.mlflow_names import flatten, mlflow_key

DATASET_SOURCE_TYPE = "code"  # MLflow's kind for data a program builds rather than reads from a path
DATASET_CONTEXT_TAG = "mlflow.data.context"
PROFILE_CHARS = 5000


@dataclass(frozen=True)
class WorkloadDataset:
    """A trial's workload as MLflow's dataset entity takes it."""

    name: str
    digest: str
    source: str  # JSON: the task and its code hash
    profile: str  # JSON: the seed, the sweep point and the params that fix the data

    def as_input(self) -> Any:
        from mlflow.entities import Dataset, DatasetInput, InputTag

        dataset = Dataset(name=self.name, digest=self.digest, source_type=DATASET_SOURCE_TYPE, source=self.source,
                          profile=self.profile)
        return DatasetInput(dataset, tags=[InputTag(DATASET_CONTEXT_TAG, "training")])


@dataclass(frozen=True)
class TrialView:
    """What of the suite decides how its trials show: the keys arms set, the metrics without a direction
    and the suite file's name."""

    arm_keys: frozenset[str] = frozenset()
    informational: frozenset[str] = frozenset()
    source: str = ""

    @classmethod
    def of(cls, suite: StoredSuite) -> TrialView:
        arm_keys = {key for arm in suite.arms.values() for key in flatten("", dict(arm.params))}
        arm_keys |= {mlflow_key(key) for arm in suite.arms.values() for key in arm.sweep}
        informational = {name for name, metric in suite.metrics.items() if metric.direction == "none"}
        return cls(frozenset(arm_keys), frozenset(informational), suite.source or "")

    def shown(self, key: str, value: float | None) -> bool:
        """Whether a final metric is mirrored: a value, and not an informational zero."""
        return value is not None and not (value == 0 and self._informational(key))

    def shown_metrics(self, record: TrialRecord) -> dict[str, float]:
        return {key: value for key, value in record.metrics.items() if self.shown(key, value)}

    def _informational(self, key: str) -> bool:
        return key in self.informational or metric_family(key) in self.informational

    def workload(self, record: TrialRecord) -> WorkloadDataset:
        params = {key: value for key, value in flatten("", dict(record.params)).items() if key not in self.arm_keys}
        code = TaskEnvironment.of(record.environment).task_code_sha256
        identity = {"task": record.task, "task_version": record.task_version, "task_code_sha256": code,
                    "seed": record.seed, "params": params}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
        name = f"{record.suite} seed={record.seed}" + (f" {record.point_label}" if record.point_label else "")
        source = json.dumps({"task": record.task, "task_version": record.task_version, "task_code_sha256": code})
        profile = {"seed": record.seed, "point": record.point_label, "params": params}
        text = json.dumps(profile, sort_keys=True)
        if len(text) > PROFILE_CHARS:  # MLflow keeps a short profile; the digest still covers every param
            text = json.dumps({**profile, "params": f"{len(params)} params"}, sort_keys=True)
        return WorkloadDataset(name, digest, source, text)
