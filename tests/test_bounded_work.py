"""Bounded work: the sequential planner's simulations stream their paths (memory does not grow with
the number of seeds, numbers as before), and `harness run` can be stopped with Ctrl-C however it was
started (a shell starts a background job with SIGINT ignored)."""
from __future__ import annotations

import signal
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.analysis.stats import sequential_design
from harness.analysis.stats.sequential_design import Schedule, operating_characteristics
from harness.cli import main

TOY = Path(__file__).resolve().parent / "suites" / "toy.yaml"


def test_the_null_simulation_gives_the_same_levels_in_any_blocking_and_bounded_memory(monkeypatch):
    looks = Schedule(3, 10).looks
    levels = sequential_design.nominal_levels.__wrapped__(looks, 0.05, "obrien_fleming")
    monkeypatch.setattr(sequential_design, "SIMULATION_BYTES", 4 * 2**20)  # 2 looks per block, 54 paths per chunk
    tracemalloc.start()
    try:
        streamed = sequential_design.nominal_levels.__wrapped__(looks, 0.05, "obrien_fleming")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert streamed == levels
    assert peak < 4 * 4 * 2**20  # the whole simulation would hold 200,000 x 10 x 8 bytes x 4 = 64 MB


def test_operating_characteristics_stream_their_paths_with_the_same_result(monkeypatch):
    design = Schedule(3, 8)
    whole = operating_characteristics(design, 0.8, 0.05, paths=4000)
    monkeypatch.setattr(sequential_design, "SIMULATION_BYTES", 24 * 8 * 100)  # 100 paths at a time
    assert operating_characteristics(design, 0.8, 0.05, paths=4000) == whole


def test_run_restores_sigint_that_a_background_start_left_ignored(tmp_path):
    term = signal.getsignal(signal.SIGTERM)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = CliRunner().invoke(main, ["run", str(TOY), "--profile", "smoke", "--results", str(tmp_path),
                                           "--no-mlflow", "--threads", "1"])
        assert result.exit_code == 0, result.output
        assert signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL)
        with pytest.raises(KeyboardInterrupt):
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, term)
