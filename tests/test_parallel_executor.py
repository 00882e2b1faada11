"""Trials side by side in worker processes: the same numbers and verdicts as one at a time, a dying
worker fails only its own trial, and ``auto`` keeps short trials in this process."""
from __future__ import annotations

import multiprocessing

import pytest
import torch

from harness import api
from harness.execution.parallel import side_by_side_workers
from harness.core.record import TrialRecord
from harness.store import iter_trial_files, read_trial

pytestmark = pytest.mark.integration  # starts worker processes and trains the toy task in them

QUALITY = ("accuracy", "loss", "param_bytes")


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """api.run pins this process's torch threads; later tests must not inherit that."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def stored(run_dir) -> dict[str, TrialRecord]:
    return {record.trial_id: record for record in map(read_trial, iter_trial_files(run_dir))}


def test_side_by_side_trials_match_serial_ones_bit_for_bit(tmp_path, toy_suite):
    look = dict(profile="smoke", seeds=[0, 1, 2], mlflow=False, threads=1)  # 9 trials, claims decided on 3 seeds
    serial = api.run(toy_suite, api.RunOptions(results=tmp_path / "serial", executor="serial", **look))
    parallel = api.run(toy_suite, api.RunOptions(results=tmp_path / "parallel", executor="parallel",
                                                executor_options={"workers": 2}, **look))
    assert serial.exit_code == parallel.exit_code == 0
    one, two = serial.suites[0], parallel.suites[0]
    a, b = stored(one.outcome.run_dir), stored(two.outcome.run_dir)
    assert len(a) == 9 and a.keys() == b.keys()
    for trial_id, record in a.items():
        assert {k: record.metrics[k] for k in QUALITY} == {k: b[trial_id].metrics[k] for k in QUALITY}
        assert record.curves == b[trial_id].curves  # every training step's loss, bit for bit
        assert b[trial_id].environment["executor"] == "parallel"
        assert b[trial_id].details["concurrent_trials"] == 2 and "concurrent_trials" not in record.details
    # the same verdicts on every quality metric; a speed verdict follows the timings, which differ run to run
    serial_rows, parallel_rows = ([(r.variant.name, r.point, r.key, r.verdict) for r in side.analysis.rows
                                   if r.key in QUALITY] for side in (one, two))
    assert len(serial_rows) >= len(QUALITY) and serial_rows == parallel_rows
    assert [(c.contrast, c.point, c.key, c.status, c.estimate) for c in one.analysis.claims] == \
        [(c.contrast, c.point, c.key, c.status, c.estimate) for c in two.analysis.claims]
    assert not multiprocessing.active_children()  # the workers were stopped with the run


def test_a_dying_worker_fails_only_its_trial(tmp_path, toy_suite):
    suite = tmp_path / "toy.yaml"
    suite.write_text(toy_suite.read_text().replace("slow_lr: {lr: 0.001}", "slow_lr: {exit_process: true}"))
    outcome = api.run(suite, api.RunOptions(profile="smoke", results=tmp_path / "r", mlflow=False,
                                            executor="parallel", executor_options={"workers": 2}, threads=1))
    assert outcome.exit_code == 1
    records = stored(outcome.suites[0].outcome.run_dir).values()
    failed = [r for r in records if not r.finished]
    assert len(records) == 3 and [r.arm for r in failed] == ["slow_lr"]
    assert "os._exit" in failed[0].error  # contained in the worker: a failed trial, the worker lives on


def test_auto_runs_short_trials_in_this_process(tmp_path, toy_suite):
    outcome = api.run(toy_suite, api.RunOptions(profile="smoke", results=tmp_path / "r", mlflow=False))
    assert outcome.exit_code == 0
    for record in stored(outcome.suites[0].outcome.run_dir).values():
        assert "concurrent_trials" not in record.details  # 0.3 s trials never repay starting workers
        expected = "parallel" if side_by_side_workers(1) >= 2 else "serial"
        assert record.environment["executor"] == expected


def test_workers_fit_the_cores_at_the_trials_thread_count():
    assert side_by_side_workers(1, cores=8) == 8 and side_by_side_workers(2, cores=8) == 4
    assert side_by_side_workers(3, cores=2) == 0  # does not fit: auto stays serial
