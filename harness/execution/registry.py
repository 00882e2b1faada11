"""Executors found by name: each is registered under the entry-point group ``harness.executors`` (as tasks
are under ``harness.tasks``), so a new one is one module and one line of packaging, and the CLI's
``--executor`` choices are whatever is registered.

An entry point names an ``ExecutorKind``: its name, its own options (a
dataclass whose fields are the ``RunOptions`` fields it reads, such as ``workers``), how many trials it
puts side by side on this machine's cores, and how it starts. Names are read from the package metadata
without importing any executor; a kind is imported only when a run names it, and one whose module
raises, exits or prints at import costs that run one line (``harness.tasks.plugins``), never the process.
The built-in names (auto, serial, parallel, ray) belong to the harness: another package's entry under one is
ignored.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from harness.tasks.plugins import PluginFailed, guarded_import

if TYPE_CHECKING:  # the CLI reads the names without loading torch
    import torch

    from harness.execution.executor import Executor

ENTRY_POINT_GROUP = "harness.executors"
DEFAULT_EXECUTOR = "auto"
BUILTIN_EXECUTORS = frozenset({"auto", "parallel", "ray", "serial"})  # only the harness's own package registers these
HARNESS_DISTRIBUTION = "harness"


class ExecutorError(Exception):
    """An executor that cannot run as asked (an option it does not take, a cluster it cannot reach): one line."""


class ExecutorKind(Protocol):
    name: ClassVar[str]
    Options: ClassVar[type]  # a dataclass of the options it takes, each field a ``RunOptions`` field

    @staticmethod
    def slots(options: Any, device: torch.device, threads: int) -> int:
        """Trials it runs side by side in processes on this machine at ``threads`` torch threads each; 0 for
        none (the driver then keeps torch's own thread count unless told one)."""

    @staticmethod
    def start(options: Any, slots: int) -> Executor:
        """The executor, started before any trial trains; ExecutorError when it cannot be."""


def _entries() -> tuple[dict[str, importlib.metadata.EntryPoint], dict[str, str]]:
    """(each registered name -> its entry point, the names two other packages register -> who registers
    them). A built-in name is the harness's own whatever else registers it, so no package can take over
    ``serial`` or ``auto``."""
    chosen: dict[str, importlib.metadata.EntryPoint] = {}
    by_package: dict[str, dict[str, str]] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = _distribution(entry)
        if entry.name in BUILTIN_EXECUTORS:
            if package == HARNESS_DISTRIBUTION:
                chosen[entry.name] = entry
            continue
        by_package.setdefault(entry.name, {}).setdefault(package, entry.value)
        chosen.setdefault(entry.name, entry)
    clashes = {name: " and ".join(f"{package or 'a package without metadata'} ({value})"
                                  for package, value in sorted(packages.items()))
               for name, packages in by_package.items() if len(packages) > 1}
    return chosen, clashes


def _distribution(entry: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return (dist.metadata["Name"] or "").lower() if dist is not None else ""


def executor_names() -> list[str]:
    """Every registered executor's name, the default first: read from the package metadata alone, so
    listing them (``--executor``'s choices) imports no plugin."""
    return sorted(_entries()[0], key=lambda name: (name != DEFAULT_EXECUTOR, name))


def executor_kind(name: str) -> type[ExecutorKind]:
    """The registered executor ``name``, its module imported only now; ExecutorError in one line when it is
    not registered, two packages register it, or its module raises, exits or is not an executor."""
    entries, clashes = _entries()
    if name in clashes:
        raise ExecutorError(f"executor {name!r} is registered by two packages: {clashes[name]}; uninstall one of "
                            "them (which one runs would depend on the order of the path)")
    entry = entries.get(name)
    if entry is None:
        raise ExecutorError(f"unknown executor {name!r}; registered: {', '.join(executor_names())}")
    try:
        module, printed = guarded_import(entry.module)
    except PluginFailed as exc:
        raise ExecutorError(f"executor {name!r}: {exc}") from None
    if printed:
        print(f"warning: executor {name!r}: module {entry.module!r} printed {len(printed)} character(s) at import "
              "(not shown)", file=sys.stderr)
    kind = module
    for part in (entry.attr or "").split("."):
        kind = getattr(kind, part, None)
    if not isinstance(kind, type) or not all(hasattr(kind, needed) for needed in ("Options", "slots", "start")):
        raise ExecutorError(f"executor {name!r}: {entry.value!r} is not an executor kind (a class with Options, "
                            "slots and start)")
    return kind


def executor_options(kind: type[ExecutorKind], given: dict[str, Any]) -> Any:
    """``kind``'s options from the run's (``given``: option name -> value, unset ones left out);
    ExecutorError for an option it does not take, or a combination it refuses (its ``__post_init__``)."""
    takes = {f.name for f in dataclasses.fields(kind.Options)}
    foreign = sorted(set(given) - takes)
    if foreign:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in foreign)
        taken = ", ".join(f"--{name.replace('_', '-')}" for name in sorted(takes)) or "none"
        raise ExecutorError(f"{flags} does not apply to --executor {kind.name} (its options: {taken})")
    try:
        return kind.Options(**given)
    except ValueError as exc:
        raise ExecutorError(str(exc)) from None
