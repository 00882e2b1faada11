"""`harness new-task`: a task package, its suite and its contract test, runnable as generated."""
from __future__ import annotations

from pathlib import Path

import click

EXIT_USAGE = 2


@click.command(name="new-task")
@click.argument("name")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Folder to write the package into (new or empty) [default: ./NAME].")
def new_task(name: str, out: Path | None) -> None:
    """Write a task package NAME: task, suite (default, smoke, ci), entry point, contract test."""
    from harness.scaffold import ScaffoldError, write_task_package

    folder = out if out is not None else Path(name)
    try:
        written = write_task_package(name, folder)
    except ScaffoldError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    click.echo(f"wrote {len(written)} files to {folder}:")
    for path in written:
        click.echo(f"  {path.relative_to(folder)}")
    click.echo(f"next: pip install -e {folder} && harness run {folder / 'suite.yaml'} --profile smoke --threads 1 "
               "--no-mlflow  (docs/new-task.md walks the rest)")


COMMANDS = (new_task,)
