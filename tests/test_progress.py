"""Progress over a whole invocation: the ETA arithmetic, and what a run prints when its output is a log."""
from __future__ import annotations

import io
import re

import pytest

from harness import api
from harness.execution.executor import ThrottledSteps
from harness.execution.trials import planned_trials
from harness.core.progress import RunClock, clock_text
from harness.core.terminal import Console

from calibration_task import sequential_suite

SEQUENTIAL = sequential_suite("seq", {"b": 2.5})


def test_stored_trials_count_done_but_not_toward_the_rate():
    clock = RunClock(started=100.0)
    clock.expect(10)
    clock.stored(4)  # found finished: no time spent on them
    assert clock.eta(now=150.0) is None  # nothing ran yet: no rate to extrapolate
    clock.finished()
    clock.finished()
    assert (clock.done, clock.ran, clock.planned) == (6, 2, 10)
    assert clock.eta(now=160.0) == pytest.approx(60.0 / 2 * 4)  # 30 s a trial, 4 left
    clock.unplanned(3)  # a sequential suite decided early
    assert clock.planned == 7 and clock.eta(now=160.0) == pytest.approx(30.0)
    clock.unplanned(100)  # never below what is done
    assert clock.planned == clock.done == 6 and clock.eta(now=160.0) == 0
    assert clock.summary(now=160.0) == "6/6 trials, elapsed 1:00, ETA 0:00"


def test_clock_text():
    assert [clock_text(s) for s in (0, 59.6, 61, 3600, 3725)] == ["0:00", "1:00", "1:01", "1:00:00", "1:02:05"]


def test_a_sequential_suite_is_planned_at_its_max_seeds(tmp_path):
    suite_file = tmp_path / "seq.yaml"
    suite_file.write_text(SEQUENTIAL)
    (suite,) = api.load_suites(suite_file)
    assert len(suite.seeds) == 3 and planned_trials(suite) == 2 * 12
    (fixed,) = api.load_suites(suite_file, api.RunOptions(seeds=[0, 1]))  # --seeds: a fixed design
    assert planned_trials(fixed) == 2 * 2


def test_the_eta_plans_a_sequential_suite_at_the_looks_drawn_then_gives_back_the_rest():
    clock = RunClock(started=0.0)
    clock.expect(24)  # 2 trials a seed, up to 12 seeds: what a run counts before it draws a look
    clock.expect(4)  # a fixed suite after it
    clock.look("seq", trials=6, seeds=3, max_seeds=12)  # the first look: 3 seeds
    assert clock.planned == 6 + 4
    for _ in range(6):
        clock.finished()
    assert clock.eta(now=60.0) == pytest.approx(10.0 * 4)  # 10 s a trial, the fixed suite's 4 left
    clock.look("seq", trials=10, seeds=5, max_seeds=12)  # a second look adds its trials as drawn
    assert clock.planned == 10 + 4
    clock.look("seq", trials=9, seeds=5, max_seeds=12)  # a look that runs fewer arms plans fewer
    assert clock.planned == 9 + 4
    for _ in range(3):
        clock.finished()
    clock.unplanned(24 - 9)  # the suite stopped: the rest of its max_seeds leaves the plan once, not twice
    assert clock.planned == 9 + 4
    clock.look("fixed", trials=4, seeds=2, max_seeds=0)
    assert clock.planned == 13
    clock.unplanned(0)
    assert clock.planned == 13


def test_a_sequential_suites_trial_lines_name_their_look():
    log = io.StringIO()
    console = Console(log)
    console.expect(24)
    console.look("seq", 6, 3, 12)
    console.trial_finished("seq", 1, 6, "a seed=0", "ok", 1.0)
    console.look("seq", 10, 5, 12)
    console.trial_finished("seq", 7, 10, "a seed=3", "ok", 1.0)
    console.look("toy", 3, 1, 0)
    console.trial_finished("toy", 1, 3, "sgd seed=0", "ok", 1.0)
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("[seq] look 1: 1/6 a seed=0: ok (1.0s) | 1/6 trials")
    assert lines[1].startswith("[seq] look 2: 7/10 a seed=3: ok (1.0s) | 2/10 trials")
    assert lines[2].startswith("[toy] 1/3 sgd seed=0: ok (1.0s)")  # one look: nothing to name


def test_a_run_into_a_log_prints_each_trial_with_elapsed_and_eta_and_a_heartbeat(tmp_path, toy_suite):
    suite_file = tmp_path / "toy.yaml"  # trials of about a second, so a 0.2 s heartbeat must show
    suite_file.write_text(toy_suite.read_text().replace("steps: 20}", "steps: 20, seconds_per_step: 0.05}"))
    log = io.StringIO()
    options = api.RunOptions(profile="smoke", results=tmp_path / "r", mlflow=False, executor="serial")
    outcome = api.run(suite_file, options, console=Console(log, heartbeat_s=0.2))
    assert outcome.exit_code == 0
    lines = log.getvalue().splitlines()
    finished = [line for line in lines if line.startswith("[toy] ")]
    assert len(finished) == 3
    pattern = r"\[toy\] (\d)/3 .*: ok \(\d+\.\ds\) \| (\d)/3 trials, elapsed \d+:\d\d, ETA (\d+):(\d\d)"
    matches = [re.fullmatch(pattern, line) for line in finished]
    assert all(matches), finished
    assert [m.group(2) for m in matches] == ["1", "2", "3"]
    assert matches[-1].group(3, 4) == ("0", "00")  # nothing left
    assert int(matches[0].group(3)) * 60 + int(matches[0].group(4)) > 0  # two trials of a second left
    beats = [line for line in lines if line.startswith("... running: [toy] ")]
    assert beats and all(re.search(r"\(\d+:\d\d\)", b) and "trials, elapsed" in b for b in beats)

    again = io.StringIO()  # a resumed run: every trial stored, nothing ran, nothing left
    api.run(suite_file, options, console=Console(again, heartbeat_s=0.2))
    assert "[toy] " not in again.getvalue() and "running:" not in again.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_live_bar_shows_done_planned_elapsed_and_eta():
    screen = _Terminal()
    console = Console(screen)
    console.expect(3)
    console.stored(1)
    console.trial_started("toy", 2, 3, "sgd seed=0")
    console.trial_finished("toy", 2, 3, "sgd seed=0", "ok", 1.0)
    console.trial_started("toy", 3, 3, "momentum seed=0")
    console.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())  # the drawing, without its escape codes
    assert re.search(r"\[toy\] sgd seed=0 .*1/3 elapsed \d+:\d\d ETA \?", text)  # nothing ran yet: no ETA
    assert "[toy] 2/3 sgd seed=0: ok (1.0s)" in text  # the finished trial, printed above the bar
    assert re.search(r"\[toy\] momentum seed=0 .*2/3 elapsed \d+:\d\d ETA \d+:\d\d", text)


def test_a_worker_sends_a_step_per_interval_and_always_the_last(monkeypatch):
    clock = iter([100.0, 100.1, 100.2, 100.6, 100.7, 100.8])  # seconds at each of six steps
    monkeypatch.setattr("harness.execution.executor.time.monotonic", lambda: next(clock))
    sent: list[tuple[str, int, int]] = []
    steps = ThrottledSteps(sent.append)
    for done in range(1, 7):
        steps.inner("train", done, 6)
    assert sent == [("train", 1, 6), ("train", 4, 6), ("train", 6, 6)]
