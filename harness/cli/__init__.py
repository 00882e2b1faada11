"""The ``harness`` command: one click group, one module per command family.

Every user mistake is one line on stderr starting with ``error:`` and exit code 2, whether the
command found it (a bad suite, a missing baseline) or click did (a bad option value).

A command's module is imported only when that command runs or prints its own help: the modules read
their option defaults from the suite layer, which loads torch, and ``harness --help`` needs none of it.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import click

# Each command: the module of harness.cli that defines it (in its COMMANDS) and the function it decorates.
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "abandon": ("evidence_commands", "abandon"),
    "audit": ("evidence_commands", "audit"),
    "baseline": ("analysis_commands", "baseline"),
    "compare": ("reproduce_commands", "compare"),
    "export": ("analysis_commands", "export"),
    "gate": ("analysis_commands", "gate"),
    "history": ("analysis_commands", "history"),
    "invalidate": ("evidence_commands", "invalidate"),
    "list": ("run_commands", "list_tasks"),
    "new-task": ("new_task_commands", "new_task"),
    "plan": ("analysis_commands", "plan"),
    "programme": ("evidence_commands", "programme"),
    "publish": ("publish_commands", "publish"),
    "register": ("evidence_commands", "register"),
    "report": ("analysis_commands", "report"),
    "reproduce": ("reproduce_commands", "reproduce"),
    "run": ("run_commands", "run"),
    "seal": ("evidence_commands", "seal"),
    "tune": ("tune_commands", "tune"),
    "ui": ("run_commands", "ui"),
    "validate": ("run_commands", "validate"),
}


@lru_cache(maxsize=None)
def _docstrings(module: str) -> dict[str, str]:
    """The docstring of each top-level function of a command module, read from its source without
    importing it (the listing of ``harness --help`` is made from them)."""
    spec = importlib.util.find_spec(f"{__name__}.{module}")
    if spec is None or spec.origin is None:
        raise ImportError(f"no module {__name__}.{module}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return {node.name: ast.get_docstring(node) or "" for node in tree.body if isinstance(node, ast.FunctionDef)}


class _LazyCommands(click.Group):
    """The commands of COMMAND_MODULES, each imported when it is invoked or asked for its own help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_MODULES:
            return None
        module = importlib.import_module(f"{__name__}.{COMMAND_MODULES[cmd_name][0]}")
        return next(command for command in module.COMMANDS if command.name == cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing click would print, from each command's docstring: stand-ins with the same help."""
        stand_ins = [click.Command(name, help=_docstrings(module)[function])
                     for name, (module, function) in COMMAND_MODULES.items()]
        click.Group(commands=stand_ins).format_commands(ctx, formatter)


class _OneLineErrors(_LazyCommands):
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

