"""The contract every task honours (``harness.testing``), checked for each registered task and the
spine's toy task: each runs its ``smoke_params`` twice sharing one cache folder, so the second run
loads what the first built; every reported key belongs to a declared metric family, and every
metric but speed reruns bit-identically.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from feature_gate import FeatureGateTask
from toy_task import ToyTask

from harness.cli import main
from harness.tasks import Task, builtin_tasks, load_task
from harness.tasks.source import task_code
from harness.testing import ContractViolation, check_declarations, check_task_contract

TASKS: list[type[Task]] = [load_task(name) for name in sorted(builtin_tasks())] + [ToyTask, FeatureGateTask]
REPO = Path(__file__).resolve().parents[1]
EXAMPLE_SUITE = REPO / "examples" / "feature_gate" / "suite.yaml"


@pytest.mark.integration  # every real task, run twice
@pytest.mark.parametrize("task_cls", TASKS, ids=lambda cls: cls.name)
def test_task_runs_declares_its_metrics_and_reruns_bit_identically(task_cls: type[Task], tmp_path: Path) -> None:
    first = check_task_contract(task_cls, tmp_path)
    assert first.environment["device_name"]


@pytest.mark.parametrize("task_cls", TASKS, ids=lambda cls: cls.name)
def test_tasks_supply_valid_smoke_params_bounds_and_plot_hints(task_cls: type[Task]) -> None:
    check_declarations(task_cls)


@pytest.mark.parametrize("name", sorted(builtin_tasks()))
def test_a_shipped_mechanism_is_one_folder_under_its_name(name: str) -> None:
    """Its task, its model (mechanism/) and a README naming every shipped suite that runs it, and the
    code hashed into its trial ids all inside harness/tasks/<name>/."""
    module = builtin_tasks()[name].partition(":")[0]
    assert module == f"harness.tasks.{name}.task"
    folder = REPO / "harness" / "tasks" / name
    assert (folder / "mechanism" / "__init__.py").is_file()
    suites = sorted(path.name for path in (REPO / "suites").glob("*.yaml")
                    if (yaml.safe_load(path.read_text()) or {}).get("task") == name)
    readme = (folder / "README.md").read_text()
    assert suites and all(f"suites/{suite}" in readme for suite in suites), (suites, readme)
    installed = Path(importlib.import_module(f"harness.tasks.{name}").__file__).resolve().parent  # tox: site-packages
    hashed = task_code(module).files.values()
    assert any("mechanism" in path.parts for path in hashed)
    assert all(path.resolve().is_relative_to(installed) for path in hashed)
    assert (installed / "README.md").is_file()  # shipped with the package


def test_the_contract_names_a_task_that_moves_on_a_rerun_or_reports_undeclared_metrics(tmp_path: Path) -> None:
    class Drifting(ToyTask):
        name = "drifting"
        runs = 0

        def run(self, params, ctx):  # a rerun at the same seed differs: state outside ctx's streams
            Drifting.runs += 1
            return {**super().run(params, ctx), "loss": float(Drifting.runs)}

    class Undeclared(ToyTask):
        name = "undeclared"

        def run(self, params, ctx):
            return {**super().run(params, ctx), "surprise": 1.0}

    smoke = {"steps": 2, "samples": 8}
    with pytest.raises(ContractViolation, match=r"drifting: a rerun at the same seed moved \['loss'\]"):
        check_task_contract(Drifting, tmp_path / "a", smoke)
    with pytest.raises(ContractViolation, match=r"undeclared: reports undeclared metrics \['surprise'\]"):
        check_task_contract(Undeclared, tmp_path / "b", smoke)


def test_the_contract_names_an_artifact_whose_identity_varies_and_accepts_one_built_inside_another(
        tmp_path: Path) -> None:
    class Varying(ToyTask):
        name = "varying"
        runs = 0

        def run(self, params, ctx):  # the identity carries state from outside the trial: every rerun rebuilds
            Varying.runs += 1
            ctx.cached("table", {"run": Varying.runs}, build=lambda: {"rows": 1})
            return super().run(params, ctx)

    class Nested(ToyTask):
        name = "nested"

        def run(self, params, ctx):  # the inner artifact is asked for only while the outer one is built
            ctx.cached("outer", {"of": "inner"}, build=lambda: {"inner": ctx.cached("inner", {}, build=lambda: 2)})
            return super().run(params, ctx)

    smoke = {"steps": 2, "samples": 8}
    with pytest.raises(ContractViolation, match=r"varying: the rerun rebuilt cached artifact 'table'"):
        check_task_contract(Varying, tmp_path / "a", smoke)
    record = check_task_contract(Nested, tmp_path / "b", smoke)
    assert set(record.details["cache"]) == {"outer", "inner"}


def test_metric_axes_name_what_the_qualifier_counts() -> None:
    er2, routing = load_task("er2"), load_task("routing")
    assert er2.metric_for("recall@128").axis == "context (tokens)"  # er2_mqar: recall at each context
    assert er2.metric_for("nmse@256").axis == "context (tokens)"
    assert er2.metric_for("state_bytes").pairs_with == "kv_cache_bytes"
    assert routing.metric_for("recall@4").axis == "k (documents retrieved)"
    assert routing.metric_for("score_qps@10000").axis == "bank size (chunks)"
    assert [s.detail for s in load_task("vocab").detail_scatters] == ["gate_vs_interference"]


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
