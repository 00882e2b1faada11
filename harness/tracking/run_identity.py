"""Which run a trial belongs to: the id of its results folder's run, recorded as ``run_id`` in every trial's
environment, so that trials of two runs spliced into one bundle can be told apart (the audit's
``single_run`` check).

The id is drawn when a folder's first run starts and kept in the folder (``run.id``): a run that is
interrupted and run again (a resume) keeps it, and so do the later looks of a sequential design. Trials
from another folder, copied in, keep the id of the run that made them. ``harness run`` names the folder
of each suite it runs (``run_identity``) and ``environment()`` reads it once, when the run builds its
environment; anything else that builds an environment (a reproduction) records no run id.
"""
from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

from harness.store import read_regular, write_text_atomic

RUN_ID_FILE = "run.id"  # in a run folder, beside suite.json
_RUN_ID = re.compile(r"[0-9a-f]{32}")
_run_dir: ContextVar[Path | None] = ContextVar("harness_run_dir", default=None)


@contextmanager
def run_identity(run_dir: Path) -> Iterator[None]:
    """Within it, ``environment()`` records the run id of the results folder ``run_dir``."""
    token = _run_dir.set(Path(run_dir))
    try:
        yield
    finally:
        _run_dir.reset(token)


def current_run_id() -> str | None:
    """The run id of the folder ``run_identity`` names (drawn and kept there on first use); None outside it."""
    run_dir = _run_dir.get()
    return None if run_dir is None else folder_run_id(run_dir)


def folder_run_id(run_dir: Path) -> str:
    """The run id kept in ``run_dir``; a new one (32 hex digits) when it keeps none, or none this harness
    wrote (a link, a large file or other text is never read as an id, and is replaced)."""
    path = Path(run_dir) / RUN_ID_FILE
    try:
        kept = read_regular(path, 64).decode("ascii", "replace").strip()
    except OSError:  # UnsafeFile too: a link, a FIFO, a large file
        kept = ""
    if _RUN_ID.fullmatch(kept):
        return kept
    drawn = uuid.uuid4().hex
    write_text_atomic(path, drawn + "\n")
    return drawn
