"""The task contract as an importable check, for the harness's own tests and for a researcher's package.

A task in another repository runs the same contract the built-in tasks do, from its own pytest
(``harness new-task`` writes that test)::

    from harness.testing import check_declarations, check_task_contract

    def test_contract(tmp_path):
        check_task_contract(MyTask, tmp_path)

Each check raises ``ContractViolation`` (an ``AssertionError``, so pytest shows its message) naming
the task and what it broke.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from harness.execution.executor import run_single
from harness.core.record import TrialRecord
from harness.core.trial_environment import TrialEnvironment
from harness.tasks import Task
from harness.tasks.base import metric_family, param_bounds, unbounded_params


class ContractViolation(AssertionError):
    """A task that breaks the contract: the message names the task and the rule."""


def _require(condition: object, task_cls: type[Task], message: str) -> None:
    if not condition:
        raise ContractViolation(f"{task_cls.name}: {message}")


def check_declarations(task_cls: type[Task]) -> None:
    """What a task declares, without running it: smoke params that validate, bounds on every number,
    finite numbers only, and plot pairings that name declared metric families."""
    _require(task_cls.smoke_params, task_cls, "set smoke_params (params that make a run take seconds on a CPU)")
    task_cls.validate_params(task_cls.smoke_params)
    unbounded = unbounded_params(task_cls.Params)
    _require(not unbounded, task_cls, f"give these params Field(ge=..) or Field(gt=..): {', '.join(unbounded)}")
    _require(all(param_bounds(task_cls.Params).values()), task_cls, "every numeric param declares its bounds")
    _require(task_cls.Params.model_config.get("allow_inf_nan") is False, task_cls,
             "Params must refuse NaN and infinity (subclass harness.tasks.TaskParams)")
    families = task_cls.metric_specs()
    for metric in task_cls.metrics:
        _require(metric.pairs_with is None or metric.pairs_with in families, task_cls,
                 f"metric {metric.name} pairs_with {metric.pairs_with!r}, which is not a declared metric")


def _not_speed(task_cls: type[Task], record: TrialRecord) -> dict[str, float | None]:
    declared = task_cls.metric_specs()
    return {k: v for k, v in record.metrics.items() if declared[metric_family(k)].kind != "speed"}


def _finished(task_cls: type[Task], record: TrialRecord, which: str) -> None:
    if not record.finished:
        trace = record.details.get("traceback", "")
        raise ContractViolation(f"{task_cls.name}: the {which} smoke run failed: {record.error}\n{trace}")


def check_task_contract(task_cls: type[Task], work_root: Path, params: Mapping[str, Any] | None = None,
                        seed: int = 0, device: str = "cpu") -> TrialRecord:
    """Run the task twice with its smoke params (or ``params``) sharing one cache folder under
    ``work_root``, and require: both runs finish; every reported key belongs to a declared metric
    family; every metric but speed reruns bit-identically; the second run loads what the first
    cached; the device is the spine's to record. Returns the first run's record."""
    check_declarations(task_cls)
    chosen = task_cls.smoke_params if params is None else params
    first = run_single(task_cls, chosen, seed=seed, device=device, work_root=work_root)
    _finished(task_cls, first, "first")
    second = run_single(task_cls, chosen, seed=seed, device=device, work_root=work_root)
    _finished(task_cls, second, "second")

    declared = task_cls.metric_specs()
    undeclared = sorted(k for k in first.metrics if metric_family(k) not in declared)
    _require(first.metrics, task_cls, "run() returned no metrics")
    _require(not undeclared, task_cls, f"reports undeclared metrics {undeclared}; declare them in `metrics`")
    _require(set(second.metrics) == set(first.metrics), task_cls, "a rerun reported other metric keys")
    moved = sorted(k for k, v in _not_speed(task_cls, first).items() if _not_speed(task_cls, second).get(k) != v)
    _require(not moved, task_cls, f"a rerun at the same seed moved {moved}: draw every random thing from "
                                  "ctx.stream(purpose) and build shared artifacts with ctx.cached")
    # every artifact the rerun asks for is the one the first run cached, loaded; an artifact built inside
    # another's build is not asked for again once the outer one loads, and that rebuilds nothing either
    built, again = first.details.get("cache", {}), second.details.get("cache", {})
    _require(bool(again) == bool(built), task_cls, "the rerun asked the cache for nothing, though the first run did")
    for kind, entry in again.items():
        _require(kind in built and entry == dict(built[kind], loaded=True), task_cls,
                 f"the rerun rebuilt cached artifact {kind!r} instead of loading it: its identity must not vary")
    _require("device" not in first.details, task_cls, "the spine records the device (record.environment)")
    _require(TrialEnvironment.of(first.environment).device_name, task_cls, "the record names no device")
    return first
