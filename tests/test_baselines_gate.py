"""Every committed baseline gates its own profile on a fresh run.

A baseline that its own profile can no longer pass (saved at an older task version, or from code that
changed since) makes `harness gate` refuse or fail every honest run, so CI learns nothing from it. The
ci baselines are gated by `.ci/run` on every push; this checks the smoke ones the same way: one fresh
run of each suite's smoke profile, at the baselines' thread count, gated against baselines/. It runs
every suite (minutes on a laptop), so it is ``slow``: `pytest -m slow tests/test_baselines_gate.py`.
"""
from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch

from harness import api

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "baselines"
SMOKE = sorted(BASELINES.glob("*-smoke-cpu.json"))
CI_THREADS = 1  # the thread count the baselines were saved with (.ci/run: one per trial, two side by side)


@pytest.mark.slow
@pytest.mark.parametrize("baseline", SMOKE, ids=[path.name for path in SMOKE])
def test_a_committed_smoke_baseline_gates_a_fresh_run_of_its_profile(tmp_path, baseline):
    suite = baseline.name.removesuffix("-smoke-cpu.json")
    threads = torch.get_num_threads()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = api.run(ROOT / "suites" / f"{suite}.yaml",
                          api.RunOptions(profile="smoke", results=tmp_path, mlflow=False, device="cpu",
                                         threads=CI_THREADS))
    finally:
        torch.set_num_threads(threads)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert outcome.exit_code == 0
    (result,) = api.gate(tmp_path / suite / "smoke", baseline)
    assert result.passed, result.render()
