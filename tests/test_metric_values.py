"""What a task may report, and what a stored record may hold: numbers an analysis can take and MLflow can mirror.

Text and bools are a task's mistake that ``float()`` would hide ("0.99" read as 0.99, True as 1.0): the
trial fails naming the metric. A finite extreme (1e308) overflows a sum of squares, so a value beyond
``MAX_MAGNITUDE`` is stored as null, as a NaN is, and the claim it reaches is never decided on it. A curve
step or key that MLflow cannot store would fail the re-mirror on every rerun: a task reporting one fails
its trial, and a received record holding one is corrupt (moved aside, rerun).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fault_injection import harness_here
from harness.execution.executor import execute_trial
from harness.execution.trials import Trial
from harness.core.record import MAX_MAGNITUDE, from_json, to_json
from harness.store import CorruptTrial, read_trial
from records import make_record
from toy_task import ToyTask

LONG_KEY = "k" * 300


def run_reporting(tmp_path, metrics=None, curve=None):
    """A toy trial whose task returns ``metrics`` (and logs one ``curve`` point (key, value, step))."""

    class Reports(ToyTask):
        def run(self, params, ctx):
            if curve is not None:
                ctx.logger.log_metric(*curve)
            return metrics

    params = ToyTask.validate_params({"steps": 2}).model_dump(mode="json")
    trial = Trial(suite="toy", profile="smoke", task="toy_task:ToyTask", task_version="1", arm="sgd", arm_label="sgd",
                  seed=0, point={}, params=params)
    return execute_trial(Reports, trial, torch.device("cpu"), tmp_path / "cache", tmp_path / "work", {})


@pytest.mark.parametrize("value", ["0.99", True, np.bool_(False), b"1"])
def test_text_or_a_bool_as_a_metric_fails_the_trial_naming_the_metric(tmp_path, value):
    record = run_reporting(tmp_path, {"loss": 0.5, "accuracy": value})
    assert not record.finished
    assert "'accuracy'" in record.error and "not a number" in record.error
    assert record.metrics == {}


@pytest.mark.parametrize("value", [0.5, 3, np.float32(0.25), np.int64(7), torch.tensor(0.125)])
def test_numbers_of_any_kind_are_taken(tmp_path, value):
    record = run_reporting(tmp_path, {"accuracy": value})
    assert record.finished, record.error
    assert record.metrics == {"accuracy": float(value)}


@pytest.mark.parametrize("value", [1e308, -1e308, 2 * MAX_MAGNITUDE])
def test_a_finite_extreme_is_stored_as_null_like_a_nan(tmp_path, value):
    record = run_reporting(tmp_path, {"accuracy": value, "loss": 0.5})
    assert record.finished and record.metrics == {"accuracy": None, "loss": 0.5}
    stored = from_json({**to_json(make_record("t1")), "metrics": {"acc": value, "edge": MAX_MAGNITUDE}})
    assert stored.metrics == {"acc": None, "edge": MAX_MAGNITUDE}


def test_an_overflowing_loss_fails_its_trial_as_a_non_finite_one_does(tmp_path):
    record = run_reporting(tmp_path, {"loss": 1e300})
    assert not record.finished and "NonFiniteLoss" in record.error


@pytest.mark.parametrize("curve, named", [
    (("train/acc", 0.5, 10 ** 30), "step"),
    (("train/acc", 0.5, float("inf")), "step"),
    ((LONG_KEY, 0.5, 1), "300 characters"),
    (("train/acc", "0.5", 1), "not a number"),
])
def test_a_curve_point_mlflow_cannot_store_fails_the_trial(tmp_path, curve, named):
    record = run_reporting(tmp_path, {"accuracy": 0.5}, curve=curve)
    assert not record.finished and named in record.error


def test_a_metric_key_longer_than_mlflow_keeps_fails_the_trial(tmp_path):
    record = run_reporting(tmp_path, {"accuracy": 0.5, LONG_KEY: 1.0})
    assert not record.finished and "300 characters" in record.error and "250" in record.error


@pytest.mark.parametrize("change", [
    {"curves": {"train/acc": [[0, 0.5], [1e30, 0.6]]}},
    {"curves": {LONG_KEY: [[0, 0.5]]}},
    {"metrics": {LONG_KEY: 0.5}},
])
def test_a_received_record_mlflow_could_never_mirror_is_corrupt(tmp_path, change):
    path = tmp_path / "t1.json"
    path.write_text(json.dumps({**to_json(make_record("t1")), **change}))
    with pytest.raises(CorruptTrial, match="not a trial record"):
        read_trial(path)


def test_a_folder_of_extreme_values_is_reported_never_decided_on_them(tmp_path, toy_suite):
    """The case that crashed the report (the plots' axis over +-1e308): one seed per arm, extremes on both sides."""
    run = harness_here("run", str(toy_suite), "--profile", "smoke", "--results", str(tmp_path), "--no-mlflow",
                       "--threads", "1")
    assert run.returncode in (0, 1), run.stderr
    for n, path in enumerate(sorted((tmp_path / "toy" / "smoke" / "trials").glob("*.json"))):
        record = json.loads(path.read_text())
        record["metrics"]["accuracy"] = 1e308 if n % 2 else -1e308
        path.write_text(json.dumps(record))
    report = harness_here("report", str(tmp_path))
    assert report.returncode in (0, 1) and "Traceback" not in report.stderr, report.stderr
    accuracy = [line for line in report.stdout.splitlines() if line.startswith("| momentum-vs-sgd | accuracy")]
    assert accuracy and all("PASS" not in line and "FAIL" not in line for line in accuracy)
