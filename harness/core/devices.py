"""Device choice and description: every speed figure names the device it was measured on."""
from __future__ import annotations

import os
import platform

import torch


def resolve_device(choice: str = "auto") -> torch.device:
    """'auto' picks CUDA when present; asking for CUDA without it is an error, not a fallback."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda was requested but torch.cuda.is_available() is False")
    if choice != "cpu" and not choice.startswith("cuda"):
        raise ValueError(f"unknown device {choice!r}; expected auto, cpu or cuda")
    return torch.device(choice)


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` line of /proc/cpuinfo (Linux), or None where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_features() -> str:
    """The CPU's model and instruction-set flags: what code built with -march=native depends on."""
    flags = _cpuinfo("flags") or _cpuinfo("Features") or ""
    return f"{platform.machine()} {cpu_model()} {flags}"


def cpu_capability() -> str:
    """The vector ISA torch's CPU kernels dispatch to here (e.g. AVX2, AVX512): two CPUs that differ in
    it may run other kernels for the same op, and round differently."""
    return torch.backends.cpu.get_cpu_capability()


def device_name(device: torch.device) -> str:
    """Human name of the device: the GPU model, or the CPU model with its thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model()} ({torch.get_num_threads()} threads)"


def device_class(device: torch.device) -> str:
    """Coarse class used to pick a baseline: 'cpu' or 'cuda'."""
    return "cuda" if device.type == "cuda" else "cpu"


# fp32 FLOPs per cycle per core of each vector ISA torch dispatches to: two FMA units of 16, 8 or 4 lanes
_FLOPS_PER_CYCLE = {"AVX512": 64, "AVX2": 32, "DEFAULT": 8, "NO AVX": 8}
# fp32 peaks of GPUs the harness is measured on (non-tensor-core, dense): a name a device's contains
_GPU_PEAK_FLOPS = {"H200": 67e12, "H100": 67e12, "A100": 19.5e12, "L4": 30.3e12, "A10": 31.2e12}


def peak_flops(device: torch.device) -> float | None:
    """The device's nominal fp32 peak in FLOP/s for one trial (a CPU's at this process's thread count: max
    clock x FLOPs per cycle of the vector ISA x threads); None where it is not known. A nominal figure to
    say how much of the machine a small model uses, not a measurement."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return next((peak for key, peak in _GPU_PEAK_FLOPS.items() if key in name), None)
    per_cycle = _FLOPS_PER_CYCLE.get(cpu_capability().upper())
    hertz = _max_clock_hz()
    return per_cycle * hertz * min(torch.get_num_threads(), _cores()) if per_cycle and hertz else None


def _cores() -> int:
    """Cores this process may run on (threads beyond them add no peak)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _max_clock_hz() -> float | None:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", encoding="utf-8") as handle:
            return float(handle.read().strip()) * 1e3  # kHz
    except (OSError, ValueError):
        pass
    mhz = _cpuinfo("cpu MHz")
    try:
        return float(mhz) * 1e6 if mhz else None
    except ValueError:
        return None
