"""`harness compare --trials`: two runs' values trial by trial, bit for bit, speed aside (what a refactor
must leave unchanged), on synthetic results folders."""
from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from fault_injection import harness_here
from test_gating_baseline import METRICS, make_run, scale, shift

from harness.tasks import ENTRY_POINT_GROUP, Metric, Task, TaskParams, rescan_tasks


class SynthTask(Task):
    """The synthetic runs' task, declaring their metrics as a registered package would."""

    name = "synth"
    version = "1"
    Params = TaskParams
    metrics = tuple(Metric(name=name, **spec) for name, spec in METRICS.items())

    def run(self, params, ctx):
        raise NotImplementedError("its runs are made up by make_run")


@pytest.fixture(autouse=True)
def registered_synth(monkeypatch):
    """``synth`` registered by entry point, as an installed package registers a task."""
    extra = importlib.metadata.EntryPoint("synth", f"{__name__}:SynthTask", ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points

    def entry_points(**selection):
        found = list(real(**selection))
        return found + [extra] if selection.get("group") == ENTRY_POINT_GROUP else found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    rescan_tasks()
    yield
    monkeypatch.undo()
    rescan_tasks()


def compare_trials(tmp_path, edit_a=None, edit_b=None, **run):
    return harness_here("compare", "--trials", str(make_run(tmp_path / "a", edit_a, **run)),
                        str(make_run(tmp_path / "b", edit_b, **run)))


def test_the_same_values_are_bit_identical(tmp_path):
    outcome = compare_trials(tmp_path)
    assert outcome.returncode == 0, outcome.stderr
    assert "synth" in outcome.stdout and "every trial's values but speed are bit-identical" in outcome.stdout


def test_speed_is_left_out(tmp_path):
    outcome = compare_trials(tmp_path, edit_b=scale("treat", "qps", 2.0))
    assert outcome.returncode == 0, outcome.stdout


def test_a_value_that_moves_in_its_last_digits_differs(tmp_path):
    outcome = compare_trials(tmp_path, edit_b=shift("treat", "err", 1e-16))
    assert outcome.returncode == 1, outcome.stdout
    assert "differs: [synth] treat seed=0 err: 0.45 -> 0.4500000000000001" in outcome.stdout
    assert "control seed=0 err" not in outcome.stdout  # only the trials whose value moved


def test_a_trial_on_one_side_only_differs(tmp_path):
    outcome = compare_trials(tmp_path, seeds=(0, 1))
    assert outcome.returncode == 0
    fewer = harness_here("compare", "--trials", str(make_run(tmp_path / "c", seeds=(0, 1))),
                         str(make_run(tmp_path / "d", seeds=(0,))))
    assert fewer.returncode == 1 and "only in A: [synth] control seed=1" in fewer.stdout


def test_runs_of_other_suites_are_a_usage_error(tmp_path):
    outcome = harness_here("compare", "--trials", str(make_run(tmp_path / "a")),
                           str(make_run(tmp_path / "b", suite="other")))
    assert outcome.returncode == 2
    assert outcome.stderr.startswith("error: ") and len(outcome.stderr.strip().splitlines()) == 1


def test_a_trial_run_with_other_params_is_told_apart(tmp_path):
    """A differing value whose trial ran with other params is a design change; one whose params match is
    the code's doing."""
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b", shift("treat", "err", 0.01))
    trial = next((b / "trials").glob("treat-0.json"))
    record = json.loads(trial.read_text())
    record["params"] = {**record.get("params", {}), "lr": 0.5}
    trial.write_text(json.dumps(record))
    outcome = harness_here("compare", "--trials", str(a), str(b))
    assert outcome.returncode == 1
    assert "treat seed=0 err: 0.45 -> 0.46 (the trial ran with other params)" in outcome.stdout
    assert "treat seed=1 err: 0.46 -> 0.47000000000000003\n" in outcome.stdout


def declare(run: Path, metric: str, kind: str) -> None:
    """What a sender can write into a folder's suite.json: any kind for any metric."""
    meta = json.loads((run / "suite.json").read_text())
    meta["metrics"][metric]["kind"] = kind
    (run / "suite.json").write_text(json.dumps(meta))


def test_speed_is_what_the_registered_task_declares_not_what_a_folder_says(tmp_path):
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b", shift("treat", "acc", 0.01))
    declare(a, "acc", "speed")
    declare(b, "acc", "speed")
    outcome = harness_here("compare", "--trials", str(a), str(b))
    assert outcome.returncode == 1 and "differs: [synth] treat seed=0 acc: 0.85 -> 0.86" in outcome.stdout


def test_an_unregistered_task_has_every_metric_compared_and_says_so(tmp_path, monkeypatch):
    monkeypatch.undo()
    rescan_tasks()
    outcome = compare_trials(tmp_path, edit_b=scale("treat", "qps", 2.0))
    assert outcome.returncode == 1 and "differs: [synth] treat seed=0 qps: 1500.0 -> 3000.0" in outcome.stdout
    assert "note: [synth] task 'synth' is not registered here" in outcome.stdout


def test_control_characters_from_a_folder_never_reach_the_terminal(tmp_path):
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b", shift("treat", "err", 0.01))
    for run in (a, b):
        for trial in (run / "trials").glob("treat-*.json"):
            record = json.loads(trial.read_text())
            trial.write_text(json.dumps({**record, "arm_label": "treat\x1b]0;owned\x07\x1b[2J"}))
    outcome = harness_here("compare", "--trials", str(a), str(b))
    assert outcome.returncode == 1 and "differs: [synth] treat]0;owned[2J seed=0 err" in outcome.stdout
    assert not any(ord(char) < 32 and char != "\n" for char in outcome.stdout + outcome.stderr)
