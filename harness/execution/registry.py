"""Executors found by name: each is registered under the entry-point group ``harness.executors`` (as tasks
are under ``harness.tasks``), so a new one is one module and one line of packaging, and the CLI's
``--executor`` choices are whatever is registered.

An entry point names an ``ExecutorKind``: its name, a line for the CLI's help, its own options (a
dataclass whose fields are the ``RunOptions`` fields it reads, such as ``workers``), how many trials it
puts side by side on this machine's cores, and how it starts. Names are read from the package metadata
without importing any executor; a kind is imported only when a run asks for it.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:  # the CLI reads the names without loading torch
    import torch

    from harness.execution.executor import Executor

ENTRY_POINT_GROUP = "harness.executors"
DEFAULT_EXECUTOR = "auto"


class ExecutorError(Exception):
    """An executor that cannot run as asked (an option it does not take, a cluster it cannot reach): one line."""


class ExecutorKind(Protocol):
    name: ClassVar[str]
    summary: ClassVar[str]  # one line for ``--executor``'s help
    Options: ClassVar[type]  # a dataclass of the options it takes, each field a ``RunOptions`` field

    @staticmethod
    def slots(options: Any, device: torch.device, threads: int) -> int:
        """Trials it runs side by side in processes on this machine at ``threads`` torch threads each; 0 for
        none (the driver then keeps torch's own thread count unless told one)."""

    @staticmethod
    def start(options: Any, slots: int) -> Executor:
        """The executor, started before any trial trains; ExecutorError when it cannot be."""


def executor_names() -> list[str]:
    """Every registered executor's name, the default first."""
    names = {entry.name for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(names, key=lambda name: (name != DEFAULT_EXECUTOR, name))


def executor_kind(name: str) -> type[ExecutorKind]:
    """The registered executor ``name``; ExecutorError naming the registered ones otherwise."""
    found = [entry for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if entry.name == name]
    if not found:
        raise ExecutorError(f"unknown executor {name!r}; registered: {', '.join(executor_names())}")
    try:
        return found[0].load()
    except ImportError as exc:
        raise ExecutorError(f"executor {name!r} ({found[0].value}) cannot be imported: {exc}") from None


def executor_summaries() -> dict[str, str]:
    """Each registered executor's line for the CLI's help; one that cannot be imported says why (a run
    that asks for it is refused in one line)."""
    summaries = {}
    for name in executor_names():
        try:
            summaries[name] = executor_kind(name).summary
        except Exception as exc:  # a third party's module: any import error is named, not raised
            summaries[name] = f"cannot be loaded ({type(exc).__name__}: {exc})"
    return summaries


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
