"""Trial identity, atomic storage, and the trial executor's failure handling."""
from __future__ import annotations

import json

import pytest
from records import make_record
from toy_task import ToyTask

from harness.execution.executor import run_single
from harness.execution.trials import Trial
from harness.store import RunFolder, write_json_atomic


def make_trial(**overrides) -> Trial:
    fields = dict(suite="s", profile="default", task="toy", task_version="1", arm="a", arm_label="a",
                  seed=0, point={}, params={"steps": 3})
    fields.update(overrides)
    return Trial(**fields)


def test_trial_id_covers_config_version_seed_and_arm():
    base = make_trial().trial_id
    assert make_trial().trial_id == base
    assert make_trial(params={"steps": 4}).trial_id != base
    assert make_trial(task_version="2").trial_id != base
    assert make_trial(seed=1).trial_id != base
    assert make_trial(arm_label="b").trial_id != base
    assert make_trial(profile="smoke").trial_id == base  # same config under another profile is the same trial


def test_atomic_write_keeps_old_file_when_serialisation_fails(tmp_path):
    path = tmp_path / "t.json"
    write_json_atomic(path, {"ok": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temp files left behind


def test_nan_metric_values_are_stored_as_null(tmp_path):
    folder = RunFolder(tmp_path, "s", "default")
    folder.save_trial(make_record("x", metrics={"auroc": float("nan")}))
    assert json.loads(folder.trial_path("x").read_text())["metrics"]["auroc"] is None


def test_failed_records_are_not_treated_as_finished(tmp_path):
    folder = RunFolder(tmp_path, "s", "default")
    folder.save_trial(make_record("x", status="failed", error="boom"))
    folder.save_trial(make_record("y"))
    records, corrupt = folder.load_trials()
    assert not corrupt and set(folder.resumable(records)) == {"y"}  # the failed trial runs again


def test_rerun_gives_bit_identical_quality_metrics(tmp_path):
    first = run_single(ToyTask, {"steps": 30}, seed=3, work_root=tmp_path / "a")
    second = run_single(ToyTask, {"steps": 30}, seed=3, work_root=tmp_path / "b")
    other_seed = run_single(ToyTask, {"steps": 30}, seed=4, work_root=tmp_path / "c")
    assert first.status == "finished"
    for key in ("accuracy", "loss"):
        assert first.metrics[key] == second.metrics[key]
    assert first.curves["train/loss"] == second.curves["train/loss"]
    assert first.curves["train/loss"] != other_seed.curves["train/loss"]


def test_raising_trial_is_recorded_as_failed_with_reason(tmp_path):
    record = run_single(ToyTask, {"fail": True}, seed=0, work_root=tmp_path)
    assert record.status == "failed"
    assert record.error == "RuntimeError: this trial was configured to fail"
    assert "Traceback" in record.details["traceback"]


class ExitingTask(ToyTask):
    """A task that ends the process its own way (``sys.exit``) or is interrupted (Ctrl-C)."""

    exit_with: BaseException = SystemExit(0)

    def run(self, params, ctx):
        raise self.exit_with


def test_a_task_calling_sys_exit_is_a_failed_trial_not_the_end_of_the_run(tmp_path):
    record = run_single(ExitingTask, {}, seed=0, work_root=tmp_path)
    assert record.status == "failed"
    assert record.error.startswith("SystemExit: the task called sys.exit(0)")


def test_ctrl_c_inside_a_task_still_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(ExitingTask, "exit_with", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_single(ExitingTask, {}, seed=0, work_root=tmp_path)


def test_a_trial_past_its_timeout_fails_with_the_reason_and_the_alarm_is_cleared(tmp_path):
    import signal

    import torch

    from harness.execution.executor import execute_trial

    before = signal.getsignal(signal.SIGALRM)
    params = ToyTask.validate_params({"steps": 10_000, "seconds_per_step": 0.01}).model_dump()
    stuck = make_trial(task="toy", params=params)
    record = execute_trial(ToyTask, stuck, torch.device("cpu"), tmp_path / "cache", tmp_path / "work", {}, timeout_s=0.2)
    assert record.status == "failed"
    assert record.error == "TrialTimeout: the trial ran past --trial-timeout 0.2s"
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    quick = execute_trial(ToyTask, make_trial(), torch.device("cpu"), tmp_path / "cache", tmp_path / "w2", {}, timeout_s=60)
    assert quick.status == "finished"


def test_nan_loss_fails_the_trial(tmp_path):
    record = run_single(ToyTask, {"steps": 10, "nan_at_step": 4}, seed=0, work_root=tmp_path)
    assert record.status == "failed"
    assert "non-finite train/loss" in record.error and "step 4" in record.error
