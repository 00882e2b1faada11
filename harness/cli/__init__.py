"""The ``harness`` command: one click group, one module per command family.

Every user mistake is one line on stderr starting with ``error:`` and exit code 2, whether the
command found it (a bad suite, a missing baseline) or click did (a bad option value).
"""
from __future__ import annotations

import sys
from typing import Any

import click


class _OneLineErrors(click.Group):
    """Click's usage errors as one line (``error: ... (see 'harness run --help')``) instead of the
    usage text, a hint line and the error."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as exc:
            message = " ".join(exc.format_message().split())
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if isinstance(exc, click.UsageError) and ctx else ""
            click.echo(f"error: {message}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="harness")
def main() -> None:
    """Pit mechanisms against their controls: run suites, browse them in MLflow, gate CI."""


def _register() -> None:
    from harness.cli import (
        analysis_commands,
        evidence_commands,
        new_task_commands,
        publish_commands,
        reproduce_commands,
        run_commands,
        tune_commands,
    )

    for command in (*run_commands.COMMANDS, *tune_commands.COMMANDS, *analysis_commands.COMMANDS,
                    *evidence_commands.COMMANDS, *reproduce_commands.COMMANDS, *new_task_commands.COMMANDS,
                    *publish_commands.COMMANDS):
        main.add_command(command)


_register()
