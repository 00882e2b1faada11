"""Terminal output: a progress line over trials and inside training, and aligned tables.

On a terminal a rich progress bar redraws in place; elsewhere (CI logs) each finished trial
prints one line with the invocation's ETA, so logs stay readable (harness.core.progress).
"""
from __future__ import annotations

import sys
from typing import Sequence, TextIO

from harness.core.progress import HEARTBEAT_S, LiveBar, LogLines, RunClock


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, a dashed rule under the header, no trailing blanks."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def format_value(value: float | None) -> str:
    """One format per kind of value in a column: from 100 up, whole numbers with thousands separators
    (94,472 beside 497,012, never 4.97e+05 beside it); below, four significant digits; exponents only
    for the tiny and the astronomical."""
    if value is None:
        return "n/a"
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1e15 or magnitude < 1e-3:
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


class Console:
    """Messages, results and progress for one invocation: a rich bar on a terminal, progress lines
    (with a heartbeat during long trials) elsewhere; both carry done/planned, elapsed and the ETA."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.clock = RunClock()
        self.looks: dict[str, int] = {}  # suite -> looks drawn, for a suite with more than one possible
        self.display: LiveBar | LogLines = (
            LiveBar(self.stream, self.clock) if self.live else LogLines(self.stream, self.clock, heartbeat_s)
        )

    # -- plain lines ---------------------------------------------------------------------
    def line(self, text: str = "") -> None:
        self.display.write(text)

    def out(self, text: str = "") -> None:
        """Results go to stdout, progress to stderr: `harness run ... > table.txt` works."""
        if isinstance(self.display, LiveBar):
            self.display.pause()
        print(text, flush=True)

    # -- progress ------------------------------------------------------------------------
    def expect(self, trials: int) -> None:
        """Trials this invocation plans to run or find stored (a sequential suite at its max_seeds)."""
        self.clock.expect(trials)

    def look(self, suite: str, trials: int, seeds: int, max_seeds: int) -> None:
        """A look of ``suite`` was drawn (``trials`` at ``seeds`` of at most ``max_seeds``): the ETA plans the
        suite at the looks drawn so far, and a sequential suite's trial lines name their look."""
        if max_seeds > seeds or suite in self.looks:
            self.looks[suite] = self.looks.get(suite, 0) + 1
        self.clock.look(suite, trials, seeds, max_seeds)

    def stored(self, trials: int) -> None:
        """Trials found finished in the store, counted done."""
        self.clock.stored(trials)

    def unplanned(self, trials: int) -> None:
        """Planned trials that will not run after all."""
        self.clock.unplanned(trials)

    def trial_started(self, suite: str, index: int, total: int, title: str) -> None:
        if not self.quiet:
            self.display.started(f"[{suite}] {title}")

    def trial_finished(self, suite: str, index: int, total: int, title: str, status: str, seconds: float) -> None:
        self.clock.finished()
        if not self.quiet:
            look = f" look {self.looks[suite]}:" if suite in self.looks else ""
            self.display.finished(f"[{suite}] {title}",
                                  f"[{suite}]{look} {index}/{total} {title}: {status} ({seconds:.1f}s)")

    def inner(self, description: str, done: int, total: int) -> None:
        if not self.quiet:
            self.display.inner(description, done, total)

    def close(self) -> None:
        self.display.close()
