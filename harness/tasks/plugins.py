"""Importing a task module without letting it take the process down.

A task module is a plugin: any installed package may register one, and ``harness list`` imports them
all. Whatever one does at import (raise, call ``sys.exit`` or ``os._exit``, print) must cost only that
task, in one line that names it, and never the listing, the run or its exit code. The import runs in
this process, with ``os._exit`` (and ``posix._exit``, the same function) replaced by one that raises
for as long as it lasts and the module's output captured. What a module can still do is end the
process by means that bypass Python (``ctypes``, ``os.execv``, a signal to itself); a run it ends that
way leaves its folder marked incomplete (``run.incomplete``), which every reader reports.
"""
from __future__ import annotations

import contextlib
import importlib
import io
from types import ModuleType

from harness.core.processes import exit_refused


class PluginExit(BaseException):
    """A module called ``os._exit`` at import (a BaseException, as an exit is not an error to catch)."""


class PluginFailed(Exception):
    """A module that could not be imported, said in one line."""


def guarded_import(module_name: str) -> tuple[ModuleType, str]:
    """The module and what it printed at import ('' when nothing); PluginFailed says why it did not load."""
    output = io.StringIO()
    try:
        with exit_refused(PluginExit), contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginFailed(f"cannot import module {module_name!r} ({exc})") from exc
    except (TypeError, ValueError) as exc:  # a declaration refused as the module ran (a misspelt metric kind)
        raise PluginFailed(f"module {module_name!r} declares something invalid: {exc}") from exc
    except SystemExit as exc:
        raise PluginFailed(f"module {module_name!r} called sys.exit({exc.code!r}) at import") from None
    except PluginExit as exc:
        raise PluginFailed(f"module {module_name!r} called os._exit({exc.args[0]!r}) at import") from None
    except Exception as exc:
        raise PluginFailed(f"module {module_name!r} raised {type(exc).__name__} at import: "
                           f"{' '.join(str(exc).split())[:300]}") from exc
    return module, output.getvalue()
