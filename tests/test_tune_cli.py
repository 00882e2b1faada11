"""`harness tune` then `harness run` on the toy suite whose hand-set learning rate is far too slow: the lock
gives each arm its best grid point, the run trains at it and decides its claim on the tuned arms, and a
changed tune block or overlapping seeds are refused."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from statistics import fmean

import mlflow
import pytest

from harness import api
from harness.cli.run_commands import _suite_header
from harness.tracking.mlflow_tracker import default_tracking_uri
from test_cli_run import run_cli

pytestmark = pytest.mark.integration  # CLI subprocesses
TOY_TUNE = Path(__file__).resolve().parent / "suites" / "toy_tune.yaml"
THREADS = ("--threads", "1")


def grid_means(trials: Path, arm: str) -> dict[float, float]:
    """Each lr's mean accuracy over the tuning seeds, recomputed from the stored tuning trials."""
    values: dict[float, list[float]] = {}
    for path in trials.glob("*.json"):
        record = json.loads(path.read_text())
        if record["arm"] == arm:
            values.setdefault(record["params"]["lr"], []).append(record["metrics"]["accuracy"])
    assert all(len(v) == 2 for v in values.values())  # two tuning seeds per grid point
    return {lr: fmean(v) for lr, v in values.items()}


def test_tune_writes_a_lock_that_run_applies_and_refuses_when_stale(tmp_path, harness_cmd, cli_env):
    """The issue's acceptance check, on the toy suite with the issue's tune block."""
    suite = tmp_path / "toy_tune.yaml"
    shutil.copy(TOY_TUNE, suite)
    results = tmp_path / "results"
    tuned = run_cli(harness_cmd, cli_env, "tune", str(suite), "--results", str(results), "--no-mlflow", *THREADS)
    assert tuned.returncode == 0, tuned.stderr
    assert "lock: " in tuned.stdout and "sgd: lr=0.001: " in tuned.stdout
    lock = json.loads((tmp_path / "toy_tune.tuned.json").read_text())
    assert (tmp_path / "toy_tune.tuned.png").stat().st_size > 0
    assert lock["seeds"] == [100, 101] and set(lock["arms"]) == {"sgd", "momentum"} and lock["commit"]
    trials = results / "toy_tune" / "tune-default" / "trials"
    for arm in ("sgd", "momentum"):
        means = grid_means(trials, arm)
        assert set(means) == {0.001, 0.1, 1.0}
        assert lock["arms"][arm]["chosen"]["lr"] == max((0.001, 0.1, 1.0), key=means.get)  # first of equals
        assert [p["mean"] for p in lock["arms"][arm]["grid"]] == pytest.approx([means[lr] for lr in (0.001, 0.1, 1.0)])
    chosen = lock["arms"]["sgd"]["chosen"]["lr"]
    assert chosen != 0.001  # the hand-set slow rate loses on the tuning seeds
    for arm in ("sgd", "momentum"):  # a choice at the grid's largest rate is said to need a wider grid
        on_edge = lock["arms"][arm]["chosen"]["lr"] == 1.0
        assert (f"warning: {arm}'s choice is on the edge of its grid (lr=1 is the largest" in tuned.stdout) == on_edge

    # the rest in this process: one CLI start is the expensive part of this test
    options = api.RunOptions(results=results, mlflow=False, threads=1)
    again = api.tune(suite, replace(options, mlflow=True))  # resumes: nothing reruns, the stored trials are mirrored
    assert again.exit_code == 0 and again.suites[0].run.ran == 0 and again.suites[0].run.skipped == 12
    client = mlflow.MlflowClient(default_tracking_uri(results))
    experiment = client.get_experiment_by_name("toy_tune")
    tagged = client.search_runs([experiment.experiment_id], filter_string="tags.tune = 'true'")
    assert sorted(r.data.tags["harness.kind"] for r in tagged) == ["suite"] + ["trial"] * 12

    ran = api.run(suite, options)
    assert ran.exit_code == 0
    assert f"tuned params from toy_tune.tuned.json: sgd lr={chosen}" in _suite_header(ran.suites[0].outcome)
    records = [json.loads(p.read_text()) for p in (results / "toy_tune" / "default" / "trials").glob("*.json")]
    assert {r["params"]["lr"] for r in records if r["arm"] == "sgd"} == {chosen}
    assert {r["params"]["lr"] for r in records if r["arm"] == "slow_lr"} == {0.001}
    summary = json.loads((results / "toy_tune" / "default" / "report" / "summary.json").read_text())
    assert summary["tuned"]["arms"]["sgd"]["params"] == {"lr": chosen}
    (claim,) = summary["claims"]
    assert claim["variant"] == "sgd-vs-slow_lr" and claim["result"] == "pass"  # decided on the tuned sgd

    suite.write_text(suite.read_text().replace("lr: [0.001, 0.1, 1.0]", "lr: [0.001, 0.1, 0.5]"))
    with pytest.raises(api.UsageError, match=rf"^{suite}:16: tune: the lock toy_tune.tuned.json was made for another"):
        api.run(suite, options)
    suite.write_text(suite.read_text().replace("seeds: [100, 101]", "seeds: [100, 1]"))
    with pytest.raises(api.UsageError, match=rf"^{suite}:16: tune.seeds: seed 1 is also a confirmatory seed"):
        api.tune(suite, options)
