"""Device choice and description: every speed figure names the device it was measured on."""
from __future__ import annotations

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
