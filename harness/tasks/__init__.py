"""Task registry: registered names map to import paths, loaded on first use.

Lazy loading keeps ``harness validate`` and ``harness list`` fast and means a broken task
module only breaks suites that use it. A user's own task is named ``package.module:Class``.
"""
from __future__ import annotations

import importlib

from harness.tasks.base import Metric, Task, TaskParams, TrialContext, metric_family

REGISTRY: dict[str, str] = {
    "routing": "harness.tasks.routing.task:RoutingTask",
    "vocab": "harness.tasks.vocab.task:VocabTask",
    "er2": "harness.tasks.er2.task:ER2Task",
}


class UnknownTaskError(LookupError):
    pass


def load_task(name: str) -> type[Task]:
    """Resolve a registered name or a ``package.module:Class`` path to a Task class."""
    target = REGISTRY.get(name, name)
    if ":" not in target:
        raise UnknownTaskError(
            f"unknown task {name!r}; registered tasks: {', '.join(sorted(REGISTRY))} "
            "(or give 'package.module:Class')"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownTaskError(f"task {name!r}: cannot import module {module_name!r} ({exc})") from exc
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UnknownTaskError(f"task {name!r}: {target!r} is not a harness Task subclass")
    return cls


__all__ = ["REGISTRY", "Metric", "Task", "TaskParams", "TrialContext", "UnknownTaskError", "load_task", "metric_family"]
