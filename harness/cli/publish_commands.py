"""``harness publish``: stored runs as a static HTML report (harness.publish), for a CI artifact or a
folder served as is. Exit codes: 0 written, 2 a usage error (one ``error:`` line, nothing written)."""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import click

if TYPE_CHECKING:
    from harness.publish.runs import PublishedRun

USAGE_ERROR = 2
WIDTH = 120  # the regression table's, in characters: a CI log's width


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
              help="Folder to write the report to (index.html, a page per suite and per claim).")
@click.option("--repo", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Git checkout whose history orders the runs' commits [default: the harness's own].")
def publish(results: tuple[Path, ...], out: Path, repo: Path | None) -> None:
    """A static HTML report of the stored RESULTS folders (several: e.g. runs at different commits), asv-like:
    an index that flags the claims whose latest run regressed, a page per claim with its estimate and
    interval across commits (git order) and a page per suite with the forest plots and verdict tables.
    No server needed: open OUT/index.html."""
    problem = _out_problem(out)
    if problem:
        click.echo(f"error: {problem}", err=True)
        raise click.exceptions.Exit(USAGE_ERROR)
    from harness.publish.runs import PublishError, collect_runs
    from harness.publish.site import write_site
    from harness.tracking.environment import code_checkout

    try:
        runs = collect_runs(results, repo or code_checkout())
    except PublishError as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(USAGE_ERROR) from None
    pages = write_site(runs, out)
    suites = len({run.suite for run in runs})
    claims = len(pages) - 1 - suites
    click.echo(f"{suites} suite page(s), {claims} claim page(s) from {len(runs)} run(s): open {pages[0]}")
    _print_regressions(runs)


def _print_regressions(runs: Sequence[PublishedRun]) -> None:
    """The claims whose latest run regressed, as a table on stdout: what a CI log should show."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from harness.publish.timeline import REGRESSED, timelines

    regressed = [claim for claim in timelines(runs) if claim.trend[0] == REGRESSED]
    if not regressed:
        click.echo("no regressions")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=f"{len(regressed)} regression(s)",
                  title_justify="left")
    for column in ("suite (profile)", "claim", "latest", "why"):
        table.add_column(column, overflow="fold")
    for claim in regressed:
        table.add_row(*(Text(cell) for cell in (f"{claim.suite} ({claim.profile})", claim.label, claim.latest.result,
                                                 claim.trend[1])))
    buffer = io.StringIO()
    Console(file=buffer, width=WIDTH, color_system=None, highlight=False, emoji=False).print(table)
    click.echo("\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines()))


COMMANDS = (publish,)
