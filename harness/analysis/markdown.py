"""GitHub-flavoured Markdown tables, the one format the run summary and the gate report share.

A table is written so that it reads in a terminal as well as rendered on GitHub: cells are
padded to their column's width, and a ``|`` inside a cell is escaped so it cannot split it.
"""
from __future__ import annotations

from typing import Sequence


def escape(cell: str) -> str:
    """A cell's text with the characters that would break a table row escaped or flattened."""
    return " ".join(str(cell).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GFM pipe table: header, delimiter row, one line per row, columns aligned."""
    cells = [[escape(c) for c in header], *([escape(c) for c in row] for row in rows)]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"

    return "\n".join([line(cells[0]), line(["-" * w for w in widths]), *(line(r) for r in cells[1:])])
