"""The default run's trial-seconds per suite, read from stored results, as benchmark timings.

Each suite of ``suites/all.yaml`` is one benchmark in the group ``trial-seconds``; its one round
'takes' exactly the seconds its stored trials took (a replayed clock, nothing is rerun), so
pytest-benchmark's saves and comparisons track the default run's cost suite by suite::

    harness run suites/all.yaml --results results                    # the run to record
    tox -e bench -- -k trial_seconds                                   # saves it under .benchmarks/
    pytest tests/benchmarks -k trial_seconds --benchmark-only --benchmark-compare --benchmark-compare-fail=mean:20%

``HARNESS_BENCH_RESULTS`` names the results folder (default ``results``); a suite without a stored
default run is skipped. The extra info holds the trial count, the phase split (train, evaluate,
waiting) and the seeds each arm ran.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from harness.analysis.present.run_costs import phases, stopped_arms
from harness.analysis.run_results import load_results
from harness.store import RunFolder
from harness.suite.resolved_suite import DEFAULT_PROFILE

ROOT = Path(__file__).resolve().parents[2]
SUITES = yaml.safe_load((ROOT / "suites" / "all.yaml").read_text())["include"]
RESULTS = Path(os.environ.get("HARNESS_BENCH_RESULTS", "results"))


class ReplayClock:
    """A clock that moves only when a stored duration is replayed on it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


CLOCK = ReplayClock()


@pytest.mark.benchmark(group="trial-seconds", timer=CLOCK, disable_gc=False, warmup=False)
@pytest.mark.parametrize("suite_file", SUITES)
def test_bench_default_run_trial_seconds(benchmark, suite_file):
    suite = yaml.safe_load((ROOT / "suites" / suite_file).read_text())["suite"]
    run_dir = RunFolder(RESULTS, suite, DEFAULT_PROFILE).path
    if not (run_dir / "suite.json").exists():
        pytest.skip(f"no stored default run of {suite} under {RESULTS}")
    results = load_results(run_dir)
    seconds = sum(record.wall_seconds for record in results.finished)
    split = phases(results, 0.0)

    def replay() -> None:
        CLOCK.now += seconds

    benchmark.pedantic(replay, rounds=1, iterations=1)
    ran = {label: len(results.seeds) for label in results.arm_labels()} | stopped_arms(results)
    benchmark.extra_info.update(trials=len(results.finished), seeds=len(results.seeds), seeds_per_arm=ran,
                                train_s=round(split.train, 1), evaluate_s=round(split.evaluate, 1),
                                waiting_s=round(split.waiting, 1))
    assert benchmark.stats.stats.max == pytest.approx(seconds)
