"""pyproject.toml declares the package; this file adds the one thing it cannot: a start-up file
(``harness-path-guard.pth``, installed beside the package) that keeps ``python -m harness`` from running a
``harness`` package in the current folder.

``python -m`` puts the current folder first on the import path (as does an empty ``PYTHONPATH`` entry), and
finds the module it is asked for before any of the harness's code runs, so a received folder that ships a
``harness/`` would run in its place; ``harness/__main__.py`` can only drop the folder once it runs. Python
executes a ``.pth`` line that starts with ``import`` at start-up, before the folder is put on the path: for a
``python -m harness...`` run (and only then) the guard drops the current folder and empty entries from the
path, as ``python -P`` does (a folder ``PYTHONPATH`` names stays), and imports the installed harness, which
``-m`` then uses.
"""
from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

GUARD_FILE = "harness-path-guard.pth"
GUARD = '''
if sys.argv[:1] == ["-m"]:
    try:
        flag = next(i for i, arg in enumerate(sys.orig_argv) if arg.startswith("-m"))
        module = sys.orig_argv[flag + 1] if sys.orig_argv[flag] == "-m" else sys.orig_argv[flag][2:]
        here = os.getcwd()
    except (StopIteration, IndexError, OSError):
        module = ""
    if module.split(".")[0] == "harness":
        named = {os.path.abspath(e) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e not in ("", ".")}
        if here not in named:
            sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
        import harness
'''


class BuildWithGuard(build_py):
    """build_py that also writes the guard where the install puts the package's folder: the wheel's root,
    or for an editable install the folder the editable wheel is made from."""

    def run(self) -> None:
        super().run()
        root = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        Path(root).mkdir(parents=True, exist_ok=True)
        line = f"import os, sys; exec({GUARD!r}, {{'os': os, 'sys': sys}})\n"  # its own globals, not site's locals
        (Path(root) / GUARD_FILE).write_text(line, encoding="utf-8")


setup(cmdclass={"build_py": BuildWithGuard})
