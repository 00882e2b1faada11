"""The contract every task honours, checked for each registered task and the spine's toy task.

Each task runs its ``smoke_params`` twice through ``run_single`` sharing one cache folder, so
the second run loads what the first built: the run finishes, every reported key belongs to a
declared metric family, and every metric but speed reruns bit-identically.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from feature_gate import FeatureGateTask
from toy_task import ToyTask

from harness.cli import main

from harness.execution.executor import run_single
from harness.tasks import REGISTRY, Task, load_task
from harness.tasks.base import metric_family

TASKS: list[type[Task]] = [load_task(name) for name in sorted(REGISTRY)] + [ToyTask, FeatureGateTask]
EXAMPLE_SUITE = Path(__file__).resolve().parents[1] / "examples" / "feature_gate" / "suite.yaml"


def _not_speed(task_cls: type[Task], record: dict) -> dict[str, float | None]:
    declared = task_cls.metric_specs()
    return {k: v for k, v in record["metrics"].items() if declared[metric_family(k)].kind != "speed"}


@pytest.mark.integration  # every real task, run twice
@pytest.mark.parametrize("task_cls", TASKS, ids=lambda cls: cls.name)
def test_task_runs_declares_its_metrics_and_reruns_bit_identically(task_cls: type[Task], tmp_path: Path) -> None:
    first = run_single(task_cls, task_cls.smoke_params, seed=0, work_root=tmp_path)
    assert first["status"] == "finished", (first["error"], first["details"].get("traceback"))
    second = run_single(task_cls, task_cls.smoke_params, seed=0, work_root=tmp_path)
    assert second["status"] == "finished", (second["error"], second["details"].get("traceback"))

    declared = task_cls.metric_specs()
    undeclared = sorted(k for k in first["metrics"] if metric_family(k) not in declared)
    assert first["metrics"] and not undeclared, f"{task_cls.name} reports undeclared metrics {undeclared}"
    assert set(second["metrics"]) == set(first["metrics"])
    assert _not_speed(task_cls, second) == _not_speed(task_cls, first)

    for kind, entry in first["details"].get("cache", {}).items():  # the rerun loads what the first built
        assert second["details"]["cache"][kind] == dict(entry, loaded=True)
    assert "device" not in first["details"], "the spine records the device (record['environment'])"
    assert first["environment"]["device_name"]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_tasks_supply_valid_smoke_params_and_plot_hints(name: str) -> None:
    task_cls = load_task(name)
    assert task_cls.smoke_params, f"{name} must supply smoke_params for the contract test"
    task_cls.validate_params(task_cls.smoke_params)
    families = task_cls.metric_specs()
    for metric in task_cls.metrics:
        assert metric.pairs_with is None or metric.pairs_with in families, metric


def test_metric_axes_name_what_the_qualifier_counts() -> None:
    er2, routing = load_task("er2"), load_task("routing")
    assert er2.metric_for("recall@128").axis == "context (tokens)"  # er2_mqar: recall at each context
    assert er2.metric_for("nmse@256").axis == "context (tokens)"
    assert er2.metric_for("state_bytes").pairs_with == "kv_cache_bytes"
    assert routing.metric_for("recall@4").axis == "k (documents retrieved)"
    assert routing.metric_for("score_qps@10000").axis == "bank size (chunks)"
    assert [s.detail for s in load_task("vocab").detail_scatters] == ["gate_vs_interference"]


@pytest.mark.parametrize("task_cls", TASKS, ids=lambda cls: cls.name)
def test_every_numeric_param_declares_its_bounds(task_cls: type[Task]) -> None:
    from harness.tasks.base import param_bounds, unbounded_params

    assert unbounded_params(task_cls.Params) == [], f"{task_cls.name}: give these params Field(ge=..) or Field(gt=..)"
    assert task_cls.Params.model_config.get("allow_inf_nan") is False  # NaN and infinity are refused everywhere
    assert all(bound for bound in param_bounds(task_cls.Params).values())


def test_bounds_are_found_in_optional_and_tuple_params() -> None:
    from typing import Annotated

    from pydantic import Field

    from harness.tasks.base import TaskParams, param_bounds, unbounded_params

    class Params(TaskParams):
        plain: int = 1
        bounded: float = Field(0.5, gt=0, le=1)
        optional: int | None = Field(None, ge=2)
        items: tuple[Annotated[int, Field(ge=1)], ...] = (1,)
        loose_items: tuple[int, ...] = (1,)
        flag: bool = True

    assert unbounded_params(Params) == ["plain", "loose_items"]
    assert param_bounds(Params) == {"plain": "", "bounded": "> 0, <= 1", "optional": ">= 2", "items": ">= 1",
                                    "loose_items": ""}


@pytest.mark.integration  # the template's suite end to end, in-process
def test_the_example_suite_validates_and_its_smoke_profile_runs(tmp_path: Path) -> None:
    """The new-task template works as the guide says: its suite validates, and its smoke profile
    runs every arm to a report with validity and claims."""
    runner = CliRunner()
    validated = runner.invoke(main, ["validate", str(EXAMPLE_SUITE)])
    assert validated.exit_code == 0 and "task feature_gate:FeatureGateTask v1, 4 arms" in validated.output
    ran = runner.invoke(main, ["run", str(EXAMPLE_SUITE), "--profile", "smoke", "--results", str(tmp_path),
                               "--no-mlflow"])
    assert ran.exit_code == 0, ran.output
    trials = sorted((tmp_path / "feature_gate" / "smoke" / "trials").glob("*.json"))
    assert len(trials) == 4 * 2
    assert "validity:" in ran.output and "gated-vs-linear" in ran.output
