"""The ``harness`` command's entry point: the numeric mode's pins go into the environment before the
CLI's imports load torch, which reads them once, when it loads (``harness.core.numeric``)."""
from __future__ import annotations

import sys

from harness.core.numeric import mode_from_argv, set_environment


def main() -> None:
    """Set the mode the command line asks for, then run the CLI."""
    set_environment(mode_from_argv(sys.argv[1:]))
    from harness.cli import main as cli

    cli()
