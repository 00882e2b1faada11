"""Files a command writes besides the results: ``--markdown``, ``--junit`` and GitHub's job summary.

An output path is checked before the command does any work, so a typo in a CI script fails in
one line (exit 2) before anything is computed or written; ``$GITHUB_STEP_SUMMARY`` is appended
to when GitHub Actions sets it, and a failure to do so is only a warning: it never costs a result.
"""
from __future__ import annotations

import os
from pathlib import Path

import click

from harness.core.files import open_regular
from harness.store import write_text_atomic

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def output_problem(path: Path, option: str) -> str | None:
    """Why ``path`` cannot be written (a folder, a missing or read-only folder), or None."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        return f"{option} {target} is a folder; give a file path"
    if target.is_symlink() or (target.exists() and not target.is_file()):
        return f"{option} {target} is a link or not a regular file (a FIFO, a device); give a file path"
    if not folder.is_dir():
        return f"{option} {target}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"{option} {target} is not writable (permission denied)"
    return None


def write_output(path: Path, text: str, option: str) -> None:
    """Write a requested output file; one line and exit 2 when it cannot be written."""
    try:
        write_text_atomic(Path(path), text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        click.echo(f"error: {option} {path}: cannot write ({exc.strerror or exc})", err=True)
        raise SystemExit(2) from None


def append_step_summary(text: str) -> None:
    """Append to the job summary of a GitHub Actions step, when there is one."""
    path = os.environ.get(STEP_SUMMARY)
    if not path:
        return
    try:
        # Never blocks: a FIFO or a device named there is refused, not waited on.
        with os.fdopen(open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") as handle:
            handle.write(text.rstrip("\n") + "\n\n")
    except OSError as exc:
        click.echo(f"warning: ${STEP_SUMMARY} {path}: cannot append ({exc.strerror or exc})", err=True)
