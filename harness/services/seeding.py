"""Per-trial seeding and named random streams, so a rerun gives bit-identical quality metrics.

A stream is a generator whose seed is a hash of the trial seed and a purpose (``"bank", 256``):
arms of one seed draw the same data from the same purpose, and adding a stream never shifts
another one (unlike consuming a shared generator, or hand-picked offsets such as ``seed + 1``).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import torch

from harness.core.numeric import DETERMINISTIC, current_mode

NumpyStreams = Callable[..., np.random.Generator]  # purpose parts -> generator, seed already bound


CUBLAS_WORKSPACE_CONFIG = ":4096:8"


def deterministic_kernels(device: torch.device) -> bool:
    """Deterministic kernels on CPU always, on CUDA in the deterministic numeric mode; the fast mode keeps
    CUDA's fast paths (speed is part of what is measured)."""
    return device.type == "cpu" or current_mode() == DETERMINISTIC


def seed_everything(seed: int, device: torch.device) -> None:
    """Seed python, numpy and torch, and set the kernels' determinism for the device."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    deterministic = deterministic_kernels(device)
    _set_deterministic_algorithms(deterministic)
    if device.type != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
        torch.backends.cudnn.deterministic = deterministic
        if deterministic:  # cuDNN's autotuner picks kernels by their timing; TF32 convolutions round to 10 bits
            torch.backends.cudnn.benchmark = torch.backends.cudnn.allow_tf32 = False
        torch.cuda.manual_seed_all(seed)


def _set_deterministic_algorithms(mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)`` without importing torch's compiler stack for it.

    The public call also sets inductor's ``deterministic`` option, and importing inductor costs seconds in
    every trial process. No trial compiles, so the kernels' flag is set directly and inductor, should it
    ever be imported later, reads the same choice from its environment variable.
    """
    set_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    if set_flag is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode)
        return
    set_flag(mode)
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1" if mode else "0"


def determinism_settings(device: torch.device) -> dict[str, str]:
    """The determinism a trial on this device runs with (what ``seed_everything`` sets), for the record."""
    cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG if device.type != "cpu" else "unset")
    return {
        "deterministic_algorithms": str(deterministic_kernels(device)).lower(),
        "cudnn_deterministic": str(torch.backends.cudnn.deterministic).lower(),
        "cudnn_benchmark": str(torch.backends.cudnn.benchmark).lower(),
        "cudnn_allow_tf32": str(torch.backends.cudnn.allow_tf32).lower(),
        "cublas_workspace_config": cublas,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def derive_seed(seed: int, *purpose: object) -> int:
    """A 63-bit seed from sha256 of the trial seed and the purpose parts (their str forms)."""
    text = json.dumps([int(seed), *(str(part) for part in purpose)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def torch_stream(seed: int, *purpose: object) -> torch.Generator:
    """A CPU torch generator for this seed and purpose."""
    return torch.Generator().manual_seed(derive_seed(seed, *purpose))


def numpy_stream(seed: int, *purpose: object) -> np.random.Generator:
    """A numpy generator for this seed and purpose."""
    return np.random.default_rng(derive_seed(seed, *purpose))


def forked_rng(device: torch.device):
    """A block whose draws from torch's global RNG (CPU, and the device's on CUDA) are undone after it."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


@contextmanager
def global_rng_from(generator: torch.Generator, device: torch.device) -> Iterator[None]:
    """Run a block that draws from torch's global RNG (module construction) seeded by a stream,
    restoring the global RNG afterwards so the block does not shift what the trial draws next."""
    with forked_rng(device):
        torch.manual_seed(generator.initial_seed())
        yield
