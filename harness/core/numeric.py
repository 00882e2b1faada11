"""The numeric mode trials train under: which CPU kernels torch, MKL and oneDNN dispatch to.

The same code, data and seeds give other float results on another CPU where a library picks its
kernels by the CPU's vector ISA (AVX2 or AVX512: other lane widths, other summation orders), and a
decision sitting on a boundary can then flip. The ``deterministic`` mode (the default) pins one ISA
level in each library that dispatches on it and turns on torch's deterministic algorithms on every
device; ``fast`` leaves each library its best kernels for this CPU (and CUDA its fast paths).

The libraries read their pins from the environment once, when they load, so the pins are set
before torch is imported, in every process that trains: ``harness.launch`` sets them before the CLI
loads, worker processes inherit them, Ray workers are given them. This module imports no torch.
The deterministic mode overrides a level already in the environment (a machine's own choice must not
leak in); the fast mode leaves the environment as it is, so a user can choose a level there. Both
are recorded with every trial.
"""
from __future__ import annotations

import os
import platform
import sys
from typing import Mapping, Sequence

DETERMINISTIC, FAST = "deterministic", "fast"
MODES = (DETERMINISTIC, FAST)
OPTION = "--numeric"
MODE_VARIABLE = "HARNESS_NUMERIC"  # the mode of a run, inherited by every process it starts
ATEN_VARIABLE = "ATEN_CPU_CAPABILITY"
PIN_VARIABLES = (ATEN_VARIABLE, "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")
# torch.backends.cpu.get_cpu_capability()'s name for each level ATEN_CPU_CAPABILITY accepts
CAPABILITY_NAMES = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512"}


class NumericModeError(RuntimeError):
    """The deterministic mode cannot hold in this process (torch loaded before its pins were set)."""


def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def pins(flags: frozenset[str] | None = None, machine: str | None = None) -> dict[str, str]:
    """The ISA levels the deterministic mode pins on this CPU.

    AVX2 (with FMA) is the widest level the x86-64 machines this runs on share: torch's AVX2 kernels,
    MKL's AVX2 reproducibility branch (Intel documents equal results on every Intel CPU with AVX2;
    on others MKL uses its own reproducible branch) and oneDNN held to AVX2. An x86 CPU without it
    gets torch's scalar kernels and MKL's SSE2 branch; other machines, torch's scalar kernels."""
    flags = cpu_flags() if flags is None else flags
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return {ATEN_VARIABLE: "default"}
    if {"avx2", "fma"} <= flags:
        return {ATEN_VARIABLE: "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return {ATEN_VARIABLE: "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}


def mode_from_argv(args: Sequence[str]) -> str:
    """The mode a command line asks for (``--numeric fast`` or ``--numeric=fast``), before click has
    parsed it: the pins must be in place before the CLI's imports load torch. A bad value is left to
    click to refuse."""
    for i, arg in enumerate(args):
        if arg == OPTION and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(OPTION + "="):
            value = arg.partition("=")[2]
        else:
            continue
        if value in MODES:
            return value
    return DETERMINISTIC


def set_environment(mode: str, environ: os._Environ | dict[str, str] | None = None) -> None:
    """Write the mode, and in the deterministic mode its pins (over any level already set), into the
    environment (this process's by default) for the libraries and every process started from here."""
    if mode not in MODES:
        raise ValueError(f"unknown numeric mode {mode!r}; expected {' or '.join(MODES)}")
    environ = os.environ if environ is None else environ
    environ[MODE_VARIABLE] = mode
    if mode == DETERMINISTIC:
        environ.update(pins())


def current_mode(environ: Mapping[str, str] | None = None) -> str:
    """The mode this process runs under: ``fast`` unless it was set up deterministic."""
    mode = (os.environ if environ is None else environ).get(MODE_VARIABLE, FAST)
    return mode if mode in MODES else FAST


def unpinned(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the deterministic mode does not hold in this process (torch dispatches to another ISA level
    than the one pinned), or None when it holds or the mode is fast."""
    environ = os.environ if environ is None else environ
    if current_mode(environ) != DETERMINISTIC or "torch" not in sys.modules:
        return None
    wanted = CAPABILITY_NAMES.get(environ.get(ATEN_VARIABLE, "").lower())
    running = sys.modules["torch"].backends.cpu.get_cpu_capability()
    if wanted is None or running == wanted:
        return None
    return (f"the deterministic numeric mode pins torch's CPU kernels to {wanted}, but torch in this process "
            f"dispatches to {running}: it was loaded before {ATEN_VARIABLE} was set. Start Python with "
            f"{ATEN_VARIABLE}={environ[ATEN_VARIABLE]} in the environment (the harness command does this), or "
            f"run with {OPTION} {FAST}")


def apply(mode: str) -> None:
    """Set this process (and those it starts) to ``mode``; NumericModeError where the deterministic mode
    cannot hold because torch was loaded first."""
    set_environment(mode)
    problem = unpinned()
    if problem:
        raise NumericModeError(problem)


def recorded(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The mode and the pins as the environment has them, for each trial's record."""
    environ = os.environ if environ is None else environ
    return {"numeric_mode": current_mode(environ),
            **{f"env_{name}": environ.get(name, "unset") for name in PIN_VARIABLES}}


def worker_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a worker started elsewhere (a Ray worker) needs to train under this process's mode."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in (MODE_VARIABLE, *PIN_VARIABLES) if name in environ}
