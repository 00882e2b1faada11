"""The command group loads a command's module only when that command runs or prints its own help, and
`harness --help` lists every command as an eager group would, without loading torch (how long it takes
is a benchmark: tests/benchmarks/test_bench_startup.py)."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from fault_injection import hang_guard

from harness.cli import COMMAND_MODULES, main


def _listing(group: click.Group) -> str:
    formatter = click.HelpFormatter(width=100)
    group.format_commands(click.Context(group), formatter)
    return formatter.getvalue()


def test_the_table_names_every_command_of_every_command_module_and_no_other():
    modules = {module for module, _ in COMMAND_MODULES.values()}
    declared = {command.name: (module, command) for module in modules
                for command in importlib.import_module(f"harness.cli.{module}").COMMANDS}
    assert set(declared) == set(COMMAND_MODULES)
    for name, (module, function) in COMMAND_MODULES.items():
        assert declared[name][0] == module
        assert getattr(importlib.import_module(f"harness.cli.{module}"), function) is declared[name][1]


def test_the_lazy_listing_is_what_an_eager_group_of_the_same_commands_prints():
    ctx = click.Context(main)
    eager = click.Group("harness", commands=[main.get_command(ctx, name) for name in COMMAND_MODULES])
    assert _listing(main) == _listing(eager)
    assert re.search(r"\n  validate +Validate SUITE\.yaml fully", _listing(main))


def test_an_unknown_command_is_still_one_error_line():
    refused = CliRunner().invoke(main, ["bogus"])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1
    assert refused.output.startswith("error: No such command 'bogus'.")


@pytest.mark.integration
def test_help_loads_no_command_module_and_no_torch():
    probe = ("import sys\nfrom harness.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m == 'torch' or m.endswith('_commands')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=hang_guard(300))
    assert done.returncode == 0, done.stderr
    assert "Commands:" in done.stdout
    assert done.stderr.strip() == "[]"
