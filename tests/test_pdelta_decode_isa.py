"""The fused ER2 decode kernel gives the same bits whatever CPU built it.

The kernel is compiled with ``-march=native``, so two machines build it for different vector ISAs.
Without ``-ffp-contract=off`` the compiler may fuse ``a * b + c`` into one FMA instruction (one
rounding instead of two) where the ISA has FMA, and a baseline saved on one CPU would not reproduce
on another. Here the kernel built for this CPU is held to the kernel built for the x86-64 baseline
ISA (SSE2, no FMA), bit for bit, over a decode of 40 tokens.
"""
from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from fault_injection import hang_guard
from test_pdelta_decode import SMALL, _decoder, _perturb, _qkv

from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.mechanism.ops.fused_decode import FLAGS, SOURCE

pytestmark = [
    pytest.mark.integration,  # builds the kernel twice
    pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("cc") is None,
                       reason="needs an x86-64 CPU and a C compiler"),
]


def _build(folder: Path, march: str) -> ctypes.CDLL:
    flags = [f"-march={march}" if flag.startswith("-march=") else flag for flag in FLAGS]
    library = folder / f"er2_decode-{march}.so"
    subprocess.run(["cc", *flags, "-o", str(library), str(SOURCE), "-lm"], check=True, capture_output=True,
                   timeout=hang_guard(300))
    kernel = ctypes.CDLL(str(library))
    kernel.er2_decode_step.argtypes = [ctypes.c_void_p] * 3
    kernel.er2_decode_step.restype = ctypes.c_int
    return kernel


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, ctypes.CDLL]:
    folder = tmp_path_factory.mktemp("kernels")
    return {"native": _build(folder, "native"), "generic": _build(folder, "x86-64")}


@pytest.mark.parametrize("mode", ["none", "raw", "compressed"])
def test_native_and_baseline_isa_builds_decode_the_same_bits(builds, mode):
    layer = ER2Layer(**SMALL, residual_mode=mode, state_dtype="fp32")
    _perturb(layer, scale=0.3)
    q, k, v = _qkv(6, 2, 48, seed=5)
    outputs = {}
    with torch.no_grad():
        _, prefilled = layer(q[:, :, :8], k[:, :, :8], v[:, :, :8], return_state=True)
        for name, kernel in builds.items():
            decoder = _decoder(layer, "fused")
            decoder.fused.call = kernel.er2_decode_step
            state, steps = prefilled, []
            for t in range(8, 48):
                out, state = decoder.step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state)
                steps.append(out)
            outputs[name] = torch.cat(steps, dim=2)
    assert outputs["native"].abs().max() > 0
    assert torch.equal(outputs["native"], outputs["generic"])
