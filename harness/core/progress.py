"""Progress over a whole invocation: trials done of trials planned, elapsed time and an ETA.

``RunClock`` is the arithmetic: trials found already stored count as done but not toward the
rate, so a resumed run does not promise an early finish. A sequential suite is counted at its
``max_seeds`` until its first look is drawn; from then on the ETA plans it at the looks drawn so far
(its first look's seeds, the design's expected stop when no effect is known), each later look adding
its trials as it is drawn, and the suite gives back what it did not run when it stops. ``LiveBar`` draws it with
rich on a terminal; ``LogLines`` writes one line per finished trial and a heartbeat line while a
long trial runs, for CI logs where nothing may print for minutes otherwise.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console as RichConsole
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

HEARTBEAT_S = 30.0


def clock_text(seconds: float) -> str:
    """Seconds as h:mm:ss (or m:ss under an hour)."""
    seconds = max(int(round(seconds)), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class RunClock:
    """Done and planned trials of one invocation, and the ETA their rate gives."""

    planned: int = 0
    done: int = 0
    ran: int = 0  # done by this invocation: only these say how long a trial takes
    started: float = field(default_factory=time.monotonic)
    undrawn: dict[str, int] = field(default_factory=dict)  # a suite's trials of looks not drawn yet, left out of planned
    per_seed: dict[str, float] = field(default_factory=dict)  # a suite's trials per seed at its first look
    current: str = ""  # the suite whose look was drawn last (suites run one after another)

    def look(self, suite: str, trials: int, seeds: int, max_seeds: int) -> None:
        """A look of ``suite`` was drawn: ``trials`` in all, at ``seeds`` of at most ``max_seeds``. Its
        later looks leave the plan until they are drawn (each suite was expected at its ``max_seeds``)."""
        self.current = suite
        per_seed = self.per_seed.setdefault(suite, trials / max(seeds, 1))
        most = round(per_seed * max(max_seeds, seeds))
        undrawn = max(most - trials, 0)
        self.planned += self.undrawn.get(suite, 0) - undrawn
        self.undrawn[suite] = undrawn
        self.planned = max(self.planned, self.done)

    def expect(self, trials: int) -> None:
        self.planned += trials

    def stored(self, trials: int) -> None:
        """Trials found finished in the store: done without taking time."""
        self.done += trials
        self.planned = max(self.planned, self.done)

    def finished(self) -> None:
        self.done += 1
        self.ran += 1
        self.planned = max(self.planned, self.done)

    def unplanned(self, trials: int) -> None:
        """Trials of the suite that ran last, planned at its ``max_seeds``, that will not run (a sequential
        suite decided early, a suite stopped); those of undrawn looks already left the plan."""
        trials -= self.undrawn.pop(self.current, 0)
        self.planned = max(self.planned - trials, self.done)

    def elapsed(self, now: float | None = None) -> float:
        return (now if now is not None else time.monotonic()) - self.started

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at this invocation's rate so far; None before a trial has finished."""
        if not self.ran:
            return None
        return self.elapsed(now) / self.ran * (self.planned - self.done)

    def summary(self, now: float | None = None) -> str:
        eta = self.eta(now)
        left = "ETA " + (clock_text(eta) if eta is not None else "?")
        return f"{self.done}/{self.planned} trials, elapsed {clock_text(self.elapsed(now))}, {left}"


class LogLines:
    """Progress for logs: a line per finished trial, and a heartbeat at least every ``heartbeat_s``
    while trials run (from a daemon thread, so a trial that never logs still shows it is alive)."""

    def __init__(self, stream: TextIO, clock: RunClock, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.stream, self.clock, self.heartbeat_s = stream, clock, heartbeat_s
        self.running: dict[str, float] = {}  # title -> its start
        self.lock = threading.RLock()
        self.last_line = time.monotonic()
        self.step = ""  # the running trial's inner progress, for the heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def write(self, text: str) -> None:
        with self.lock:
            print(text, file=self.stream, flush=True)
            self.last_line = time.monotonic()

    def started(self, title: str) -> None:
        with self.lock:
            self.running[title] = time.monotonic()
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
                self._thread.start()

    def finished(self, title: str, line: str) -> None:
        with self.lock:
            self.running.pop(title, None)
            self.step = ""
            self.write(f"{line} | {self.clock.summary()}")

    def inner(self, description: str, done: int, total: int) -> None:
        """Steps inside a trial: shown only by the next heartbeat line, never a line each."""
        with self.lock:
            self.step = f"{description} {done}/{total}"

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self.lock:
            self.running.clear()

    def _beat(self) -> None:
        while not self._stop.wait(min(self.heartbeat_s / 4, 1.0)):
            with self.lock:
                now = time.monotonic()
                if not self.running or now - self.last_line < self.heartbeat_s:
                    continue
                trials = ", ".join(f"{title} ({clock_text(now - since)})" for title, since in self.running.items())
                step = f" | {self.step}" if self.step and len(self.running) == 1 else ""
                self.write(f"... running: {trials}{step}"
                           f" | {self.clock.summary(now)}")


class LiveBar:
    """A rich progress display on a terminal: the invocation's bar with elapsed and ETA, and the
    running trial's inner steps under it."""

    def __init__(self, stream: TextIO, clock: RunClock) -> None:
        self.clock = clock
        self.progress = Progress(
            TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), _ClockColumn(clock),
            console=RichConsole(file=stream), transient=True, redirect_stdout=False, redirect_stderr=False,
        )
        self.overall = self.progress.add_task("trials", total=None, visible=False, overall=True)
        self.step = self.progress.add_task("", total=None, visible=False, overall=False)
        self.running: list[str] = []
        self.lock = threading.RLock()
        self.active = False

    def write(self, text: str) -> None:
        with self.lock:
            self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def started(self, title: str) -> None:
        with self.lock:
            self.running.append(title)
            self._refresh()
            self.progress.refresh()

    def finished(self, title: str, line: str) -> None:
        with self.lock:
            if title in self.running:
                self.running.remove(title)
            self.progress.update(self.step, visible=False)
            self._refresh()
            self.progress.refresh()  # the line below is printed over the bar as now, not as last drawn
            self.write(line)

    def inner(self, description: str, done: int, total: int) -> None:
        with self.lock:
            if len(self.running) == 1:
                self.progress.update(self.step, description=f"  {description}", completed=done, total=total,
                                     visible=True)

    def pause(self) -> None:
        """Take the bar off the screen while results are printed to stdout."""
        with self.lock:
            if self.active:
                self.progress.stop()
                self.active = False

    def close(self) -> None:
        with self.lock:
            self.running.clear()
            self.pause()

    def _refresh(self) -> None:
        if not self.active:
            self.progress.start()
            self.active = True
        shown = ", ".join(self.running[:2]) + (f" +{len(self.running) - 2}" if len(self.running) > 2 else "")
        self.progress.update(self.overall, description=shown or "trials", completed=self.clock.done,
                             total=self.clock.planned or None, visible=True)


class _ClockColumn(ProgressColumn):
    """Elapsed and ETA of the whole invocation (rich's own ETA would count stored trials as speed)."""

    def __init__(self, clock: RunClock) -> None:
        super().__init__()
        self.clock = clock

    def render(self, task: Task) -> Text:
        if not task.fields.get("overall"):
            return Text("")
        eta = self.clock.eta()
        return Text(f"elapsed {clock_text(self.clock.elapsed())} ETA {clock_text(eta) if eta is not None else '?'}")
