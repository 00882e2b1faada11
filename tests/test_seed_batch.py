"""Seeds trained as one batched model (issue: fill the hardware): the spine groups a look's trials into seed
batches, each seed keeps its own record and its values up to float reduction order, a failing batch costs no
seed its result, and reproduce, the gate and the audit's rerun honour the batch a trial was trained in."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from harness import api
from harness.core.record import SEED_BATCH, Trial
from harness.execution.executor import execute_seed_batch, execute_trial
from harness.execution.loop import seed_batches
from harness.store import RunFolder
from harness.suite.loader import load_suites
from harness.reproduction.record_rerun import sample
from harness.tasks.er2.task import ER2Task
from harness.tasks.source import task_code
from harness.core.terminal import Console
from seed_batch_task import StackedToy

ROOT = Path(__file__).resolve().parents[1]

SUITE = """\
suite: stacked
description: momentum vs plain SGD, seeds trained as one model
task: seed_batch_task:StackedToy
seeds: [0, 1, 2, 3]
seed_batch: {batch}
params: {{steps: 30}}
arms:
  sgd: {{momentum: 0.0}}
  momentum: {{momentum: 0.9}}
contrasts:
  - {{treatment: momentum, control: sgd}}
claims:
  - {{contrast: momentum-vs-sgd, metric: accuracy, test: superior}}
"""


def trials_of(task, params: dict, seeds, arm: str = "a", point: dict | None = None) -> list[Trial]:
    resolved = task.validate_params(params).model_dump(mode="json")
    return [Trial(suite="s", profile="p", task=f"seed_batch_task:StackedToy" if task is StackedToy else task.name,
                  task_version=task.version, arm=arm, arm_label=arm, seed=seed, point=point or {}, params=resolved,
                  code=task_code(task.__module__).sha256) for seed in seeds]


def test_a_look_is_grouped_by_arm_and_point_into_batches_in_seed_order():
    trials = [t for seed in (0, 1, 2) for arm in ("a", "b") for t in trials_of(StackedToy, {}, [seed], arm)]
    batches = seed_batches(trials, 2)
    assert [[(t.arm, t.seed) for t in batch] for batch in batches] == [
        [("a", 0), ("a", 1)], [("b", 0), ("b", 1)], [("a", 2)], [("b", 2)]]
    assert seed_batches(trials, 1) == [(t,) for t in trials]
    named = {t.trial_id: (2, 1) for t in trials if t.arm == "a" and t.seed in (1, 2)}  # a rerun keeps its batches,
    assert [[(t.arm, t.seed) for t in b] for b in seed_batches(trials, 1, named)][:3] == [  # in their order
        [("a", 0)], [("b", 0)], [("a", 2), ("a", 1)]]


def test_only_arms_the_task_batches_share_a_job():
    """A task may batch some arms only (``batches_seeds(params)``): the others' seeds are jobs of their own."""
    control = trials_of(StackedToy, {"alone": True}, [0, 1, 2], "control")
    trained = trials_of(StackedToy, {}, [0, 1, 2], "trained")
    batches = seed_batches(control + trained, 8)
    assert [[(t.arm, t.seed) for t in b] for b in batches] == [
        [("control", 0)], [("control", 1)], [("control", 2)], [("trained", 0), ("trained", 1), ("trained", 2)]]
    records = execute_seed_batch(StackedToy, control, torch.device("cpu"), Path("/tmp/unused-cache"),
                                 [Path("/tmp/unused") / t.trial_id for t in control], {})
    assert all(r.finished and not r.seed_batch for r in records)  # asked to batch them anyway: one at a time


def test_batched_seeds_keep_their_own_values_and_record_their_batch(tmp_path):
    trials = trials_of(StackedToy, {"steps": 40, "momentum": 0.9}, [3, 4, 5])
    cpu = torch.device("cpu")
    alone = [execute_trial(StackedToy, t, cpu, tmp_path / "c", tmp_path / "w" / t.trial_id, {}) for t in trials]
    batched = execute_seed_batch(StackedToy, trials, cpu, tmp_path / "c", [tmp_path / "b" / t.trial_id for t in trials],
                                 {"device": "cpu"})
    for one, many in zip(alone, batched):
        assert many.finished and many.trial_id == one.trial_id
        assert many.environment[SEED_BATCH] == "3,4,5" and many.seed_batch == (3, 4, 5)
        assert many.details[SEED_BATCH]["seeds"] == [3, 4, 5]
        assert many.metrics["loss"] == pytest.approx(one.metrics["loss"], rel=1e-5)
        assert many.metrics["accuracy"] == pytest.approx(one.metrics["accuracy"], abs=1 / 256)
        assert [v for _, v in many.curves["train/loss"]] == pytest.approx([v for _, v in one.curves["train/loss"]], rel=1e-5)
    assert len({round(r.metrics["loss"], 6) for r in batched}) == 3  # each seed its own model, not one shared
    assert not alone[0].seed_batch


def test_a_failing_batch_reruns_its_seeds_alone_and_only_the_failing_seed_fails(tmp_path):
    trials = trials_of(StackedToy, {"steps": 10, "fail_seed": 7}, [6, 7, 8])
    records = execute_seed_batch(StackedToy, trials, torch.device("cpu"), tmp_path / "c",
                                 [tmp_path / t.trial_id for t in trials], {})
    assert [r.finished for r in records] == [True, False, True]
    assert all("this batch was configured to fail" in r.details["seed_batch_failed"] for r in records)
    assert all(not r.seed_batch for r in records)  # each ran alone, and says so


@pytest.mark.parametrize("params", [
    {"residual_mode": "compressed"},
    {"residual_mode": "raw", "residual_gate": "learned"},
    {"residual_mode": "none"},
    "er2_mqar",
], ids=["compressed", "raw_gated", "none", "constructed_recall"])
def test_er2_seeds_distilled_as_one_layer_equal_one_at_a_time(tmp_path, params):
    """The stacked layer's per-seed loss and update are the reference's (distill.distil_step) up to float
    reduction order: every quality value within 1e-4 relative after training."""
    if params == "er2_mqar":  # the constructed teacher: each seed scored at its own answer positions
        [suite] = load_suites(ROOT / "suites" / "er2_mqar.yaml", profile="smoke", arms=["compressed"])
        params = {**suite.params, **suite.arms["compressed"].params, "steps": 12}
    else:
        params = {**ER2Task.smoke_params, "steps": 12, "schedule": "fixed", "decay_steps": 3, "speed.measure": False,
                  **params}
    trials = trials_of(ER2Task, params, [11, 12])
    cpu = torch.device("cpu")
    alone = [execute_trial(ER2Task, t, cpu, tmp_path / "c", tmp_path / "w" / t.trial_id, {}) for t in trials]
    batched = execute_seed_batch(ER2Task, trials, cpu, tmp_path / "c", [tmp_path / "b" / t.trial_id for t in trials], {})
    for one, many in zip(alone, batched):
        assert one.finished, one.error
        assert many.finished and "seed_batch_failed" not in many.details, many.details.get("seed_batch_failed")
        assert many.seed_batch == (11, 12)
        quality = [k for k in one.metrics if (m := ER2Task.metric_for(k)) is not None and m.kind == "quality"]
        assert quality
        for key in quality:
            assert many.metrics[key] == pytest.approx(one.metrics[key], rel=1e-4, abs=1e-6), key
        assert many.metrics["budget/steps"] == one.metrics["budget/steps"] == 12
    assert batched[0].metrics != batched[1].metrics  # each seed its own layer


def test_the_audit_sample_brings_a_batched_trials_batch_mates(tmp_path):
    trials = trials_of(StackedToy, {"steps": 5}, [0, 1, 2])
    records = execute_seed_batch(StackedToy, trials, torch.device("cpu"), tmp_path / "c",
                                 [tmp_path / t.trial_id for t in trials], {})
    chosen = sample(records, 1, seed=0)
    assert sorted(r.seed for r in chosen) == [0, 1, 2]


@pytest.fixture
def batched_run(tmp_path):
    def run(batch: int, results: Path) -> Path:
        suite = tmp_path / f"stacked{batch}.yaml"
        suite.write_text(SUITE.format(batch=batch))
        outcome = api.run(suite, api.RunOptions(results=results, mlflow=False, device="cpu", threads=1,
                                                executor="serial"), console=Console(quiet=True))
        assert outcome.exit_code in (0, 1)
        return results / "stacked" / "default"
    return run


def test_a_suite_runs_its_seeds_in_batches_reproduce_reruns_them_and_the_gate_refuses_another_size(tmp_path, batched_run):
    batched = batched_run(3, tmp_path / "batched")
    stored, _ = RunFolder(tmp_path / "batched", "stacked", "default").load_trials()
    # seeds 0-2 of each arm as one model, seed 3 alone (a batch of one is a trial alone)
    assert sorted(r.seed_batch for r in stored.values()) == [(), (), (0, 1, 2), (0, 1, 2), (0, 1, 2), (0, 1, 2),
                                                             (0, 1, 2), (0, 1, 2)]
    plan = api.plan_reproduction(str(batched), mlflow=False, out=tmp_path / "rerun", device="cpu",
                                 task_paths=["seed_batch_task:StackedToy"])
    rerun = api.reproduce(plan, Console(quiet=True))
    assert rerun.comparison.identical, rerun.comparison.differing
    assert sorted(r.seed_batch for r in rerun.records) == sorted(r.seed_batch for r in stored.values())

    api.save_baselines(tmp_path / "batched", tmp_path / "baselines")
    alone = batched_run(1, tmp_path / "alone")
    with pytest.raises(api.UsageError, match="seed batches of 1, baseline .* in 1 \\| 3"):
        api.gate(alone, baselines_dir=tmp_path / "baselines")
    assert api.gate(batched, baselines_dir=tmp_path / "baselines")[0].passed

    # what batching would change in a run made one seed at a time: its trials rerun in batches of 3
    plan = api.plan_reproduction(str(alone), mlflow=False, out=tmp_path / "what-if", device="cpu",
                                 task_paths=["seed_batch_task:StackedToy"], seed_batch=3)
    what_if = api.reproduce(plan, Console(quiet=True))
    assert sorted(len(r.seed_batch) for r in what_if.records) == [0, 0, 3, 3, 3, 3, 3, 3]
    for check in what_if.comparison.differing:
        assert check.reproduced == pytest.approx(check.recorded, rel=1e-5, abs=1e-6), check
