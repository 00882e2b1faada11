"""A suite that claims a speed metric keeps its trials side by side and takes every timing alone: while
one trial times (``harness.measure.timing``), no other trial of the run computes, and no record says its
speed was measured under load."""
from __future__ import annotations

import io
import threading
import time
import pytest

from harness import api
from harness.analysis.run_results import load_results
from harness.execution.parallel import ProcessExecutor
from harness.measure.quiet import QuietRoom
from harness.measure.timing import seconds_per_call
from harness.tasks.base import Metric, Task, TaskParams, TrialContext
from harness.core.terminal import Console


class TimedParams(TaskParams):
    steps: int = 60
    work: int = 20_000


class TimedTask(Task):
    """Trains in small steps and times a loop: each step's and each timed call's wall clock is recorded."""

    name = "timed"
    version = "1"
    Params = TimedParams
    description = "steps and a timing, with their wall clocks (quiet timing tests)"
    metrics = (Metric(name="calls_per_s", direction="higher", unit="1/s", kind="speed", description="timed loop"),
               Metric(name="total", direction="higher", unit="", kind="quality", description="a sum", key=True))

    def run(self, params: TimedParams, ctx: TrialContext) -> dict[str, float]:
        bar, steps, total = ctx.logger.progress(params.steps, "train"), [], 0.0
        for step in range(params.steps):
            bar.advance()
            steps.append(time.time())  # the trial computes now: inside the room, never during another's timing
            total += sum(range(params.work)) * 1e-9 + step
            time.sleep(0.002)
            if step == params.steps // 2:
                calls: list[float] = []
                seconds = seconds_per_call(lambda: calls.append(time.time()) or sum(range(params.work)), 0.05)
                ctx.logger.record("timed", [calls[1], calls[-1]])  # calls[0] is the warm-up, outside the timing
        ctx.logger.record("steps", steps)
        return {"calls_per_s": 1.0 / seconds, "total": total}


SUITE = """suite: timed
task: test_quiet_timing:TimedTask
seeds: [0, 1, 2]
arms:
  a: {work: 20000}
  b: {work: 30000}
contrasts:
  - {treatment: b, control: a}
claims:
  - {contrast: b-vs-a, metric: calls_per_s, test: ratio, max: 2.0}
"""


@pytest.mark.integration  # worker processes
def test_a_speed_claim_keeps_trials_side_by_side_and_no_step_runs_during_a_timing(tmp_path):
    path = tmp_path / "timed.yaml"
    path.write_text(SUITE)
    (suite,) = api.load_suites(path)
    stream = io.StringIO()
    side_by_side = ProcessExecutor(2)
    assert api.suite_executor(suite, side_by_side, Console(stream)) is side_by_side
    assert "calls_per_s" in stream.getvalue() and "taken alone" in stream.getvalue()

    options = api.RunOptions(results=tmp_path / "r", mlflow=False, executor="parallel",
                             executor_options={"workers": 2}, threads=1)
    assert api.run(path, options, console=Console(io.StringIO())).exit_code == 0
    records = load_results(tmp_path / "r" / "timed" / "default").finished
    assert len(records) == 6 and all(r.environment["executor"] == "parallel" for r in records)
    assert not any(r.details.get("speed_measured_under_load") for r in records)
    for timing in records:
        low, high = timing.details["timed"]
        for other in records:
            if other is not timing:
                assert not any(low <= t <= high for t in other.details["steps"]), (timing.title, other.title)


def test_quality_claims_keep_trials_side_by_side_without_a_word(toy_suite):
    (suite,) = api.load_suites(toy_suite)
    stream = io.StringIO()
    side_by_side = ProcessExecutor(2)
    assert api.suite_executor(suite, side_by_side, Console(stream)) is side_by_side and stream.getvalue() == ""


def test_a_timing_waits_until_the_other_trial_steps_out_and_holds_it_at_the_gate(tmp_path):
    steps, stop = [0], threading.Event()

    def trial() -> None:
        room = QuietRoom(tmp_path)
        room.enter()
        while not stop.is_set():
            room.last = 0.0  # step out at every step
            room.pause()
            steps[0] += 1
        room.leave()

    other = threading.Thread(target=trial)
    other.start()
    while steps[0] < 5:
        time.sleep(0.001)
    timer = QuietRoom(tmp_path)
    timer.enter()
    with timer.alone():
        before = steps[0]
        time.sleep(0.05)
        assert steps[0] == before  # the other trial is held at its next step for the whole timing
    stop.set()
    other.join()
    timer.leave()
    assert steps[0] > before
