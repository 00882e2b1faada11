"""Task registry: every task, built-in or not, is found through the ``harness.tasks`` entry-point
group (``name = "package.module:Class"``) and imported on first use.

One discovery path for all tasks: the harness registers its own mechanisms (``harness/tasks/<name>/``)
in its pyproject exactly as an installed package registers one (what ``harness new-task`` writes),
so an outside task is listed, runs and gates like a built-in. Lazy loading keeps ``harness validate``
and ``harness list`` fast and means a broken task module only breaks suites that use it. A task
anywhere on the path can also be named ``package.module:Class`` directly.
"""
from __future__ import annotations

import importlib
import importlib.metadata
from functools import lru_cache

from harness.tasks.base import Metric, Task, TaskParams, TrialContext, metric_family

ENTRY_POINT_GROUP = "harness.tasks"
HARNESS_DISTRIBUTION = "harness"


class UnknownTaskError(LookupError):
    pass


def _distribution(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return (dist.metadata["Name"] or "").lower() if dist is not None else ""


@lru_cache(maxsize=1)
def _entry_points() -> tuple[dict[str, str], dict[str, str]]:
    """(the harness's own tasks, other packages' tasks), each name -> ``package.module:Class``."""
    builtin: dict[str, str] = {}
    outside: dict[str, str] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        mine = _distribution(entry_point) == HARNESS_DISTRIBUTION
        (builtin if mine else outside).setdefault(entry_point.name, entry_point.value)
    return builtin, outside


def builtin_tasks() -> dict[str, str]:
    """The mechanisms the harness ships, as its own pyproject registers them."""
    return dict(_entry_points()[0])


def registered_tasks() -> dict[str, str]:
    """Every registered name with its ``package.module:Class`` path; a built-in name cannot be taken
    over by another package."""
    builtin, outside = _entry_points()
    return {**outside, **builtin}


def rescan_tasks() -> None:
    """Read the entry points again: a package installed in this process is then found."""
    _entry_points.cache_clear()


def load_task(name: str) -> type[Task]:
    """Resolve a registered name or a ``package.module:Class`` path to a Task class."""
    registered = registered_tasks()
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
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownTaskError(f"task {name!r}: cannot import module {module_name!r} ({exc})") from exc
    except (TypeError, ValueError) as exc:  # a declaration refused as the module ran (a misspelt metric kind)
        raise UnknownTaskError(f"task {name!r}: module {module_name!r} declares something invalid: {exc}") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        where = getattr(module, "__file__", None) or "a folder without __init__.py, shadowing the package"
        raise UnknownTaskError(f"task {name!r}: module {module_name!r} ({where}) has no {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UnknownTaskError(f"task {name!r}: {target!r} is not a harness Task subclass")
    return cls


__all__ = ["ENTRY_POINT_GROUP", "Metric", "Task", "TaskParams", "TrialContext", "UnknownTaskError", "builtin_tasks",
           "load_task", "metric_family", "registered_tasks", "rescan_tasks"]
