"""Per-trial seeding and determinism, so a rerun gives bit-identical quality metrics."""
from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int, device: torch.device) -> None:
    """Seed python, numpy and torch; deterministic kernels on CPU (CUDA keeps its fast paths)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if device.type == "cpu":
        torch.use_deterministic_algorithms(True)
    else:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(False)
        torch.cuda.manual_seed_all(seed)
