"""Task registry: every task, built-in or not, is found through the ``harness.tasks`` entry-point
group (``name = "package.module:Class"``) and imported on first use.

One discovery path for all tasks: the harness registers its own mechanisms (``harness/tasks/<name>/``)
in its pyproject exactly as an installed package registers one (what ``harness new-task`` writes),
so an outside task is listed, runs and gates like a built-in. Lazy loading keeps ``harness validate``
and ``harness list`` fast and means a broken task module only breaks suites that use it; a module that
raises, exits or prints at import is named in one line (``harness.tasks.plugins``). Two packages that
register one name are refused, naming both. A suite file may also name a task anywhere on the path as
``package.module:Class``; a task named by a stored record (a received folder, a logged run) is imported
only when it is registered or the user passed its path (``load_received_task``).
"""
from __future__ import annotations

import importlib.metadata
import sys
from functools import lru_cache
from typing import Collection

from harness.tasks.base import Metric, Task, TaskParams, TrialContext, metric_family
from harness.tasks.plugins import PluginFailed, guarded_import

ENTRY_POINT_GROUP = "harness.tasks"
HARNESS_DISTRIBUTION = "harness"


class UnknownTaskError(LookupError):
    pass


def _distribution(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return (dist.metadata["Name"] or "").lower() if dist is not None else ""


@lru_cache(maxsize=1)
def _entry_points() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(the harness's own tasks, other packages' tasks), each name -> ``package.module:Class``, and the
    names two other packages register, each -> who registers it."""
    builtin: dict[str, str] = {}
    by_package: dict[str, dict[str, str]] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = _distribution(entry_point)
        if package == HARNESS_DISTRIBUTION:
            builtin.setdefault(entry_point.name, entry_point.value)
        else:
            by_package.setdefault(entry_point.name, {}).setdefault(package, entry_point.value)
    outside = {name: next(iter(packages.values())) for name, packages in by_package.items()}
    clashes = {name: " and ".join(f"{package or 'a package without metadata'} ({value})"
                                  for package, value in sorted(packages.items()))
               for name, packages in by_package.items() if len(packages) > 1 and name not in builtin}
    return builtin, outside, clashes


def builtin_tasks() -> dict[str, str]:
    """The mechanisms the harness ships, as its own pyproject registers them."""
    return dict(_entry_points()[0])


def registered_tasks() -> dict[str, str]:
    """Every registered name with its ``package.module:Class`` path; a built-in name cannot be taken
    over by another package (and a name two packages register is listed, but refused by ``load_task``)."""
    builtin, outside, _ = _entry_points()
    return {**outside, **builtin}


def rescan_tasks() -> None:
    """Read the entry points again: a package installed in this process is then found."""
    _entry_points.cache_clear()


def load_task(name: str) -> type[Task]:
    """Resolve a registered name or a ``package.module:Class`` path to a Task class."""
    registered = registered_tasks()
    clash = _entry_points()[2].get(name)
    if clash:
        raise UnknownTaskError(f"task {name!r} is registered by two packages: {clash}; uninstall one of them "
                               "(which one runs would depend on the order of the path)")
    target = registered.get(name, name)
    if ":" not in target:
        missing = "" if builtin_tasks() else (
            "; the harness itself is not installed, so its built-in tasks are not registered (pip install -e .)")
        raise UnknownTaskError(
            f"unknown task {name!r}; registered tasks: {', '.join(sorted(registered)) or 'none'} "
            f"(or give 'package.module:Class', or install a package that registers it){missing}"
        )
    module_name, _, attr = target.partition(":")
    try:
        module, printed = guarded_import(module_name)
    except PluginFailed as exc:
        raise UnknownTaskError(f"task {name!r}: {exc}") from exc
    if printed:
        print(f"warning: task {name!r}: module {module_name!r} printed {len(printed)} character(s) at import "
              "(not shown)", file=sys.stderr)
    cls = getattr(module, attr, None)
    if cls is None:
        where = getattr(module, "__file__", None) or "a folder without __init__.py, shadowing the package"
        raise UnknownTaskError(f"task {name!r}: module {module_name!r} ({where}) has no {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UnknownTaskError(f"task {name!r}: {target!r} is not a harness Task subclass")
    return cls


def load_received_task(name: str, trusted: Collection[str] = ()) -> type[Task]:
    """The task a stored record names (a received folder, a logged run: text someone else wrote): a registered
    name or the path of a registered task, or a ``package.module:Class`` path the user passed in ``trusted``
    (``--task-path``). Anything else is refused before anything is imported."""
    registered = registered_tasks()
    if name in registered or name in registered.values() or name in trusted:
        return load_task(name)
    shown = " ".join(str(name).split())[:200]
    raise UnknownTaskError(
        f"task {shown!r} is not a registered task, and a task named by a stored record is never imported from "
        f"where the record lies or the current folder: install the package that registers it, or pass "
        f"--task-path {shown} to trust that module"
    )


__all__ = ["ENTRY_POINT_GROUP", "Metric", "Task", "TaskParams", "TrialContext", "UnknownTaskError", "builtin_tasks",
           "load_received_task", "load_task", "metric_family", "registered_tasks", "rescan_tasks"]
