"""`python -m harness` is the same as the `harness` command, except that the current folder is taken off
the import path before anything else is imported, as ``python -P`` would: ``python -m`` puts it first (as
does an empty entry in ``PYTHONPATH``, a stray colon, or ``.``), and a folder someone sent you (a results
folder, a suite's tree) may hold a module named like one a task or the harness imports. A folder named
in ``PYTHONPATH`` stays. The harness package itself was found before this module ran: the start-up file
the package installs (``harness-path-guard.pth``, written by setup.py) imported the installed one first."""
import os
import sys


def _without_current_folder(path: list[str]) -> list[str]:
    try:
        here = os.getcwd()
    except OSError:  # the folder was removed: nothing can be imported from it
        return path
    chosen = {os.path.abspath(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if entry not in ("", os.curdir)}
    if here in chosen:
        return path
    return [entry for entry in path if os.path.abspath(entry or os.curdir) != here]


sys.path[:] = _without_current_folder(sys.path)

from harness.launch import main  # noqa: E402  (after the path is fixed)

main()
