"""GitHub-flavoured Markdown tables, the one format the run summary and the gate report share.

A table is written so that it reads in a terminal as well as rendered on GitHub: cells are
padded to their column's width, and a ``|`` inside a cell is escaped so it cannot split it.

Names read back from a results folder (suite, profile, contrast, metric, point) may come from
someone else: ``plain`` keeps them to one line without terminal escapes or invisible reordering
characters (terminal, XML), ``inline`` also escapes what Markdown or HTML would read as markup.
"""
from __future__ import annotations

import re
from typing import Sequence

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_MARKUP = re.compile(r"([\\`*\[\]<>&~])")  # a table escapes '|' itself; '_' within words is literal in GFM


def printable(text: object) -> str:
    """``text`` without control characters other than tab and newline (what XML 1.0 cannot hold,
    and what a terminal would obey)."""
    return _CONTROL.sub("", str(text))


def plain(text: object) -> str:
    """One line of printable text: whitespace runs (newlines too) become one space, control
    characters (ANSI escapes, NUL, bidi overrides) are dropped."""
    return " ".join(printable(text).split())


def inline(text: object) -> str:
    """``plain`` with Markdown and HTML punctuation backslash-escaped: a stored name shows as itself."""
    return _MARKUP.sub(r"\\\1", plain(text))


def escape(cell: str) -> str:
    """A cell's text with the characters that would break a table row escaped or flattened."""
    return plain(cell).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GFM pipe table: header, delimiter row, one line per row, columns aligned."""
    cells = [[escape(c) for c in header], *([escape(c) for c in row] for row in rows)]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"

    return "\n".join([line(cells[0]), line(["-" * w for w in widths]), *(line(r) for r in cells[1:])])
