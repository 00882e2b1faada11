"""The environment a trial ran in, as its record stores it (``record.environment``: one mapping of strings,
also every MLflow run's tags) and as code reads it: typed, so a dirty flag is a bool and no reader compares
it to the string "true" or names a key itself. Two documents share the mapping: what the harness checkout and
the machine give (``TrialEnvironment``, written by ``tracking.environment.environment``) and what the task's
code gives (``TaskEnvironment``, by ``task_environment``). The keys the harness reads are fields; each
document keeps every other key as written (``stored_rest``), so either one read from a record writes the
record's mapping back whole. A third reads the keys a float result depends on (``NumericEnvironment``), the
ones a baseline stores of its run's trials.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

from harness.core.stored_fields import STRING, Shape, from_stored, optional, stored, stored_rest

_Document = TypeVar("_Document")
# a git checkout's dirty flag: "true" or "false"; any other text ("none" outside git) reads as None, not known
FLAG = Shape("text", lambda value: isinstance(value, str),
             lambda value, where: value == "true" if value in ("true", "false") else None,
             lambda flag: "none" if flag is None else str(flag).lower())
# the seeds a trial was trained with as one batched model, in order, joined by commas
SEED_BATCH = Shape("seeds joined by commas", lambda value: isinstance(value, str) and bool(
    re.fullmatch(r"(\d+(,\d+)*)?", value)), lambda value, where: tuple(int(seed) for seed in value.split(",") if seed),
    lambda seeds: ",".join(map(str, seeds)))


def _read(cls: type[_Document], environment: Mapping[str, Any]) -> _Document:
    return from_stored(cls, dict(environment))


@dataclass(frozen=True)
class TrialEnvironment:
    """What the harness checkout and the machine give a trial's environment: the checkout's commit and
    dirty flag (None: not recorded), the device and its threads, the run it belongs to (``run_id``, absent
    outside a harness run), the numeric mode, executor and seed batch it ran in, and every other key as
    written (``rest``: libraries, determinism, the numeric mode's pins, and in a record read back the task's
    keys too)."""

    git_commit: str = stored(STRING, missing="", default="")
    git_dirty: bool | None = stored(FLAG, missing=None, default=None)
    device: str = stored(STRING, missing="", default="")  # as torch names it: cpu, cuda, cuda:1
    device_name: str = stored(STRING, missing="", default="")
    cpu_model: str = stored(STRING, missing="", default="")
    torch_threads: str = stored(STRING, missing="", default="")  # torch's intra-op threads, as text
    # devices.peak_flops of the device (a number, as text, or "unknown"); None: not recorded
    peak_fp32_flops: str | None = stored(optional(STRING), missing=None, omit_missing=True, default=None)
    run_id: str | None = stored(optional(STRING), missing=None, omit_missing=True, default=None)
    # the numeric mode (harness.core.numeric) and the executor the trial ran in; None: not recorded
    numeric_mode: str | None = stored(optional(STRING), missing=None, omit_missing=True, default=None)
    executor: str | None = stored(optional(STRING), missing=None, omit_missing=True, default=None)
    # the seeds trained with it as one batched model; None: trained alone
    seed_batch: tuple[int, ...] | None = stored(optional(SEED_BATCH), missing=None, omit_missing=True, default=None)
    rest: Mapping[str, str] = stored_rest()

    @classmethod
    def of(cls, environment: Mapping[str, Any]) -> TrialEnvironment:
        """A record's environment, typed (a record's is a mapping of strings: every one reads)."""
        return _read(cls, environment)


@dataclass(frozen=True)
class TaskEnvironment:
    """What the task's code gives a trial's environment: its source hash (as in its trial ids), the names
    and hash of its files git does not track ("none": none), and the commit and dirty flag of the git
    checkout its module sits in ("none" and None outside git)."""

    task_code_sha256: str = stored(STRING, missing="", default="")
    task_untracked_files: str = stored(STRING, missing="none", default="none")
    task_untracked_sha256: str = stored(STRING, missing="none", default="none")
    task_git_commit: str = stored(STRING, missing="", default="")
    task_git_dirty: bool | None = stored(FLAG, missing=None, default=None)
    rest: Mapping[str, str] = stored_rest()

    @property
    def untracked(self) -> bool:
        """Whether the task's code includes a file git does not track (in no commit, in no diff)."""
        return self.task_untracked_files != "none"

    @classmethod
    def of(cls, environment: Mapping[str, Any]) -> TaskEnvironment:
        """A record's environment, its task's keys typed."""
        return _read(cls, environment)


def _recorded() -> Any:
    """A key of the numeric environment: its text, None where the environment does not record it."""
    return stored(STRING, missing=None, omit_missing=True, default=None)


@dataclass(frozen=True)
class NumericEnvironment:
    """What, besides code and data, a trial's float results depend on: the CPU and the vector ISA torch's
    kernels dispatch to, the intra-op threads (how reductions are split), the torch build and its kernels'
    determinism, the machine, the device and the numeric mode; None where not recorded. Its fields are the
    keys that count: a baseline stores them too (``gating.values.BaselineEnvironment``), so that the gate can
    name those that differ between the baseline's run and the one it gates."""

    cpu_model: str | None = _recorded()
    cpu_capability: str | None = _recorded()
    torch_threads: str | None = _recorded()
    torch: str | None = _recorded()
    deterministic_algorithms: str | None = _recorded()
    machine: str | None = _recorded()
    device_name: str | None = _recorded()
    numeric_mode: str | None = _recorded()

    def differences(self, other: NumericEnvironment) -> list[tuple[str, str, str]]:
        """``(key, this value, other's value)`` of each key both record and that differs."""
        keys = [f.name for f in dataclasses.fields(NumericEnvironment)]
        pairs = ((key, getattr(self, key), getattr(other, key)) for key in keys)
        return [(key, ours, theirs) for key, ours, theirs in pairs
                if ours is not None and theirs is not None and ours != theirs]

    @classmethod
    def of(cls, environment: Mapping[str, Any]) -> NumericEnvironment:
        """A record's environment, the keys its float results depend on typed."""
        return _read(cls, environment)
