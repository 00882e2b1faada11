"""Terminal output: a progress line over trials and inside training, and aligned tables.

On a terminal the progress line redraws in place; elsewhere (CI logs) each finished trial
prints one line, so logs stay readable.
"""
from __future__ import annotations

import sys
import time
from typing import Sequence, TextIO


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, a dashed rule under the header, no trailing blanks."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def format_value(value: float | None) -> str:
    if value is None:
        return "n/a"
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


class Console:
    """Progress over a suite's trials plus an inner bar for the running trial."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._outer = ""
        self._inner = ""
        self._last_draw = 0.0

    # -- plain lines ---------------------------------------------------------------------
    def line(self, text: str = "") -> None:
        self._clear()
        print(text, file=self.stream, flush=True)
        self._draw(force=True)

    def out(self, text: str = "") -> None:
        """Results go to stdout, progress to stderr: `harness run ... > table.txt` works."""
        self._clear()
        print(text, flush=True)

    # -- progress ------------------------------------------------------------------------
    def trial_started(self, suite: str, index: int, total: int, title: str) -> None:
        self._outer = f"[{suite}] {_bar(index, total)} {index}/{total} {title}"
        self._inner = ""
        self._draw(force=True)

    def trial_finished(self, suite: str, index: int, total: int, title: str, status: str, seconds: float) -> None:
        self._inner = ""
        if not self.quiet:
            self.line(f"[{suite}] {index}/{total} {title}: {status} ({seconds:.1f}s)")

    def inner(self, description: str, done: int, total: int) -> None:
        self._inner = f" | {description} {done}/{total}"
        self._draw()

    def close(self) -> None:
        self._clear()
        self._outer = self._inner = ""

    def _clear(self) -> None:
        if self.live and (self._outer or self._inner):
            self.stream.write("\r\033[K")

    def _draw(self, force: bool = False) -> None:
        if not self.live or self.quiet or not self._outer:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        self.stream.write("\r\033[K" + (self._outer + self._inner)[: _columns() - 1])
        self.stream.flush()


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = int(width * done / max(total, 1))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _columns() -> int:
    import shutil

    return shutil.get_terminal_size((100, 20)).columns
