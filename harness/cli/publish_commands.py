"""``harness publish``: stored runs as a static HTML report (harness.publish), for a CI artifact or a
folder served as is. Exit codes: 0 written, 2 a usage error (one ``error:`` line, nothing written)."""
from __future__ import annotations

import os
from pathlib import Path

import click

USAGE_ERROR = 2


def _out_problem(out: Path) -> str | None:
    """Why ``out`` cannot hold the report (a file, an unwritable folder), or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is not a folder"
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out}: {existing} is not writable (permission denied)"
    return None


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=Path("site"), show_default=True,
              help="Folder to write the report to (index.html and a page per suite).")
def publish(results: tuple[Path, ...], out: Path) -> None:
    """A static HTML report of the stored RESULTS folders (several: e.g. runs at different commits): a page
    per suite with each claim across the runs, the forest plots, the verdict tables, the task code and
    design hashes. No server needed: open OUT/index.html."""
    problem = _out_problem(out)
    if problem:
        click.echo(f"error: {problem}", err=True)
        raise click.exceptions.Exit(USAGE_ERROR)
    from harness.publish.runs import PublishError, collect_runs
    from harness.publish.site import write_site

    try:
        runs = collect_runs(results)
    except PublishError as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(USAGE_ERROR) from None
    pages = write_site(runs, out)
    click.echo(f"{len(pages) - 1} suite page(s) from {len(runs)} run(s): open {pages[0]}")


COMMANDS = (publish,)
