"""The ``harness`` command: one click group, one module per command family."""
from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="harness")
def main() -> None:
    """Pit mechanisms against their controls: run suites, browse them in MLflow, gate CI."""


def _register() -> None:
    from harness.cli import analysis_commands, reproduce_commands, run_commands

    for command in (*run_commands.COMMANDS, *analysis_commands.COMMANDS, *reproduce_commands.COMMANDS):
        main.add_command(command)


_register()
