"""Task registry: registered names map to import paths, loaded on first use.

Lazy loading keeps ``harness validate`` and ``harness list`` fast and means a broken task
module only breaks suites that use it. Built-in tasks are listed in ``REGISTRY``; an installed
package registers its own under the ``harness.tasks`` entry-point group (``name =
"package.module:Class"``, what ``harness new-task`` writes), and a task anywhere on the path can
be named ``package.module:Class`` directly.
"""
from __future__ import annotations

import importlib
import importlib.metadata
from functools import lru_cache

from harness.tasks.base import Metric, Task, TaskParams, TrialContext, metric_family

REGISTRY: dict[str, str] = {
    "routing": "harness.tasks.routing.task:RoutingTask",
    "vocab": "harness.tasks.vocab.task:VocabTask",
    "er2": "harness.tasks.er2.task:ER2Task",
}
ENTRY_POINT_GROUP = "harness.tasks"


class UnknownTaskError(LookupError):
    pass


@lru_cache(maxsize=1)
def installed_tasks() -> dict[str, str]:
    """Tasks that installed packages register under the ``harness.tasks`` entry-point group; a
    built-in name cannot be taken over."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            if ep.name not in REGISTRY}


def registered_tasks() -> dict[str, str]:
    """Every registered name (built-in and installed) with its ``package.module:Class`` path."""
    return {**installed_tasks(), **REGISTRY}


def load_task(name: str) -> type[Task]:
    """Resolve a registered name or a ``package.module:Class`` path to a Task class."""
    registered = registered_tasks()
    target = registered.get(name, name)
    if ":" not in target:
        raise UnknownTaskError(
            f"unknown task {name!r}; registered tasks: {', '.join(sorted(registered))} "
            "(or give 'package.module:Class', or install a package that registers it)"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownTaskError(f"task {name!r}: cannot import module {module_name!r} ({exc})") from exc
    except (TypeError, ValueError) as exc:  # a declaration refused as the module ran (a misspelt metric kind)
        raise UnknownTaskError(f"task {name!r}: module {module_name!r} declares something invalid: {exc}") from exc
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UnknownTaskError(f"task {name!r}: {target!r} is not a harness Task subclass")
    return cls


__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "Metric", "Task", "TaskParams", "TrialContext", "UnknownTaskError",
           "installed_tasks", "load_task", "metric_family", "registered_tasks"]
