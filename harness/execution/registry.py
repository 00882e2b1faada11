"""Executors found by name: each is registered under the entry-point group ``harness.executors`` (as tasks
are under ``harness.tasks``), so a new one is one module and one line of packaging, and the CLI's
``--executor`` choices are whatever is registered.

An entry point names an ``ExecutorKind``: its name, its own options (a dataclass, each field an option the
CLI offers as ``--<field>``, its help from ``option``; a run passes them as ``RunOptions.executor_options``),
how many trials it puts side by side on this machine's cores, and how it starts. The executor it starts
declares what it does with trials (``harness.execution.executor.Capabilities``): the run reads that, never
its name. Names are read from the package metadata without importing any executor; a kind is imported
only when a run names it (the CLI imports the built-in ones for their flags), and one whose module raises,
exits or prints at import costs that run one line (``harness.tasks.plugins``), never the process. The
built-in names (auto, serial, parallel, ray) belong to the harness: another package's entry under one is
ignored.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Protocol

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


def option(help: str, *, default: Any = None, minimum: float | None = None, metavar: str | None = None) -> Any:
    """A field of an executor's ``Options``: the CLI offers it as ``--<field name>`` (underscores as dashes)
    of its type (int, float, str; a bool is a flag), with ``help``, at least ``minimum`` where given."""
    return dataclasses.field(default=default, metadata={"help": help, "minimum": minimum, "metavar": metavar})


@dataclass(frozen=True)
class ExecutorOption:
    """One option as the CLI offers it: its field name, type (int, float, str or bool), help, lower bound,
    and the executors that take it (one flag however many do)."""

    name: str
    type: type
    help: str
    minimum: float | None
    metavar: str | None
    executors: tuple[str, ...]

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


class ExecutorKind(Protocol):
    name: ClassVar[str]
    Options: ClassVar[type]  # a dataclass of the options it takes, each field one (``option`` gives its help)

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


def offered_options(names: Iterable[str]) -> list[ExecutorOption]:
    """The options of the executors ``names`` (each imported), one per field name, in the order the
    executors and their fields come: the first executor that declares a name gives its type and help.
    ExecutorError when one cannot be loaded."""
    offered: dict[str, ExecutorOption] = {}
    for name in names:
        kind = executor_kind(name)
        hints = _hints(kind.Options)
        for field in dataclasses.fields(kind.Options):
            known = offered.get(field.name)
            if known is not None:
                offered[field.name] = dataclasses.replace(known, executors=(*known.executors, name))
                continue
            offered[field.name] = ExecutorOption(
                field.name, _option_type(hints.get(field.name)), field.metadata.get("help", ""),
                field.metadata.get("minimum"), field.metadata.get("metavar"), (name,))
    return list(offered.values())


def _hints(options: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(options)
    except Exception:  # an annotation that does not resolve: its flag takes a string, its Options may convert it
        return {}


def _option_type(annotation: Any) -> type:
    """int, float, bool or str: the annotation itself, or the one type of an optional (``int | None``)."""
    candidates = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    if len(candidates) == 1 and candidates[0] in (bool, int, float, str):
        return candidates[0]
    return str


def start_executor(name: str, kind: type[ExecutorKind], options: Any, slots: int) -> Executor:
    """The executor registered as ``name``, started (a Ray cluster reached or launched) before any trial
    trains; ExecutorError when it cannot be. Another package's executor must record its trials under the
    name it is registered by (the gate tells the built-in executors from the others by the recorded name),
    and declare its capabilities as ``Capabilities``, if at all."""
    from harness.execution.executor import Capabilities

    executor = kind.start(options, slots)
    declared = getattr(executor, "capabilities", None)
    if declared is not None and not isinstance(declared, Capabilities):
        executor.close()
        raise ExecutorError(f"executor {name!r} declares capabilities {declared!r}, not "
                            "harness.execution.executor.Capabilities")
    if name not in BUILTIN_EXECUTORS and executor.name != name:
        executor.close()
        raise ExecutorError(f"executor {name!r} records its trials as executor {executor.name!r}; an executor of "
                            "another package records them under the name it is registered by")
    return executor
