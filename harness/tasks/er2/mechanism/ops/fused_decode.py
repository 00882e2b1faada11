"""The ER2 decode step as one C call on the CPU (``kernels/er2_decode.c``), built on first use.

Decode of a recurrent layer touches a few kilobytes of state per token, so the eager step, about 85
tensor ops, spends its time in dispatch. The C kernel does the same arithmetic in one call. It is
built with the system C compiler (``$CC``, else ``cc``) into a per-user cache folder, once per
source version; where there is no compiler, or the device is not the CPU, ``ER2Decoder`` keeps its
eager step, and ``decode_kernel`` says which one ran. The eager step stays the reference: the tests
hold this kernel to it, and every ER2 trial decodes its trained layer through it (``decode_agrees``).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor

from harness.core.devices import cpu_features
from harness.core.files import UnsafeFile, open_trusted, private_folder
from harness.store import write_checksum

SOURCE = Path(__file__).with_name("kernels") / "er2_decode.c"
# -ffp-contract=off: no fused multiply-add where the source has a multiply and an add, so CPUs with and
# without FMA compute the same bits (tests/test_pdelta_decode_isa.py); -march=native alone would not
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-shared", "-fPIC")
MAX_DIM, MAX_FEATURES, MAX_CORES = 256, 1024, 2  # the kernel's stack buffers (er2_decode.c)
MODES = {"none": 0, "raw": 1, "compressed": 2}
WEIGHT_FIELDS = ("taps", "key_maps", "key_bias", "write_maps", "write_bias", "alpha", "beta", "log_x", "center",
                 "query_maps", "core_gain", "residual_gain", "projector", "gate_weight", "gate_bias")


class _Weights(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in WEIGHT_FIELDS]


class _Config(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in ("batch", "heads", "kv_heads", "dim", "kernel", "cores")] + [
        ("sizes", ctypes.c_int * MAX_CORES), ("mode", ctypes.c_int), ("state_half", ctypes.c_int)]


# struct io in er2_decode.c: q, k, v, memory_in[2], curvature_in[2], tail_in, out, memory_out[2],
# curvature_out[2], tail_out, scratch; a flat table of pointers with the same layout.
IO_SLOTS = 15


class KernelUnavailable(RuntimeError):
    """The C kernel could not be built here (no compiler, or the build failed)."""


def _kernel_folder() -> Path:
    """This user's kernel folder: ``ctypes`` runs what is in it, so only a folder no one else can write to
    (``files.private_folder``) is used."""
    try:
        return private_folder("harness-kernels")
    except UnsafeFile as error:
        raise KernelUnavailable(f"refusing the kernel folder {error.filename}: {error.strerror}") from error
    except OSError as error:
        raise KernelUnavailable(f"cannot create the kernel folder in {tempfile.gettempdir()}: {error}") from error


def _load(fd: int) -> ctypes.CDLL:
    """dlopen the checked file behind ``fd`` through /proc/self/fd, never the library's path.

    The descriptor stays open for the life of the process: the loader matches loaded libraries by name,
    so a later load through the same number would silently return this library instead of its own file.
    """
    return ctypes.CDLL(f"/proc/self/fd/{fd}")


@lru_cache(maxsize=1)
def load_kernel() -> ctypes.CDLL:
    """Build (once per source version, CPU and compiler) and load the kernel library.

    The key covers the CPU's model and flags, since ``-march=native`` code may not run on another CPU
    sharing the folder; a library whose owner, mode or recorded hash does not check out is rebuilt, and
    the one loaded is the file that was checked (``files.open_trusted``).
    """
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise KernelUnavailable(f"no C compiler {compiler!r} on PATH (set CC to one)")
    try:
        source = SOURCE.read_bytes()
    except OSError as error:
        raise KernelUnavailable(f"cannot read the kernel source {SOURCE}: {error}") from error
    if not Path("/proc/self/fd").is_dir():
        raise KernelUnavailable("the kernel is loaded through a checked descriptor, which needs /proc/self/fd (Linux)")
    key = hashlib.sha256(source + " ".join((compiler, *FLAGS, cpu_features())).encode()).hexdigest()[:16]
    folder = _kernel_folder()
    library, digest = folder / f"er2_decode-{key}.so", folder / f"er2_decode-{key}.sha256"
    trusted = open_trusted(library, digest)
    if trusted is None:
        partial = folder / f"{library.name}.{os.getpid()}.tmp"
        build = subprocess.run([compiler, *FLAGS, "-o", str(partial), str(SOURCE), "-lm"],
                               capture_output=True, text=True)
        if build.returncode != 0:
            partial.unlink(missing_ok=True)
            raise KernelUnavailable(f"{compiler} failed on {SOURCE.name}: {build.stderr.strip()[-2000:]}")
        partial.chmod(0o700)
        write_checksum(partial, digest)
        os.replace(partial, library)  # atomic: concurrent trials never load a half-written file
        trusted = open_trusted(library, digest)
        if trusted is None:
            raise KernelUnavailable(f"the kernel library {library} changed while it was installed")
    kernel = _load(trusted[0])
    kernel.er2_decode_step.argtypes = [ctypes.c_void_p] * 3
    kernel.er2_decode_step.restype = ctypes.c_int
    return kernel


def _laid_out(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` as a contiguous CPU tensor of ``dtype``; the checks cost a fraction of the no-op conversions."""
    if x.dtype is dtype and x.is_cpu and x.is_contiguous():
        return x
    return x.to("cpu", dtype).contiguous()


class FusedDecodeStep:
    """One decoder's weights laid out for the kernel, and the call that runs a token through it.

    Per token the Python side only allocates the outputs and fills a table of pointers: at decode
    sizes each extra tensor op or ctypes argument is a visible share of the step.
    """

    def __init__(self, kernel: ctypes.CDLL, cores: Any, taps: Tensor, mode: str, storage_dtype: torch.dtype,
                 residual_gain: Tensor | None, projector: Tensor | None, gate_weight: Tensor | None,
                 gate_bias: Tensor | None):
        self.call, self.storage_dtype = kernel.er2_decode_step, storage_dtype
        self.sizes = list(cores.sizes)
        self.num_heads, self.kv_heads = cores.num_heads, cores.key_maps.shape[0]
        self.dim, self.history = cores.key_maps.shape[1], taps.shape[1] - 1
        placeholder = torch.zeros(1)
        named = {
            "taps": taps, "key_maps": cores.key_maps, "key_bias": cores.key_bias, "write_maps": cores.write_maps,
            "write_bias": cores.write_bias, "alpha": cores.alpha, "beta": cores.beta, "log_x": cores.log_x,
            "center": cores.center, "query_maps": cores.query_maps, "core_gain": cores.core_gain,
            "residual_gain": placeholder if residual_gain is None else residual_gain,
            "projector": placeholder if projector is None else projector,
            "gate_weight": placeholder if gate_weight is None else gate_weight,
            "gate_bias": placeholder if gate_bias is None else gate_bias,
        }
        self._kept = {name: tensor.detach().float().contiguous() for name, tensor in named.items()}
        self._weights = _Weights(*(self._kept[name].data_ptr() for name in WEIGHT_FIELDS))
        self._config = _Config(0, self.num_heads, self.kv_heads, self.dim, taps.shape[1], len(self.sizes),
                               (ctypes.c_int * MAX_CORES)(*self.sizes), MODES[mode], int(storage_dtype == torch.float16))
        self._scratch = torch.empty(sum(self.sizes) * self.dim)
        self._io = (ctypes.c_void_p * IO_SLOTS)()
        self._addresses = (ctypes.addressof(self._config), ctypes.addressof(self._weights), ctypes.addressof(self._io))

    @staticmethod
    def fits(cores: Any) -> bool:
        """Whether the kernel's buffers hold these cores (its limits are compile-time constants)."""
        return (len(cores.sizes) <= MAX_CORES and sum(cores.sizes) <= MAX_FEATURES
                and cores.key_maps.shape[1] <= MAX_DIM and cores.key_maps.device.type == "cpu"
                and cores.dtype == torch.float32)

    def __call__(self, q: Tensor, k: Tensor, v: Tensor, memories: Sequence[Tensor], curvatures: Sequence[Tensor],
                 tail: Tensor | None) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor | None]:
        """q [B,Hq,1,D], k/v [B,Hkv,1,D], per-core memories (storage dtype) and curvatures (fp32), tail
        [B,Hkv,K-1,D] or None (zeros) -> output [B,Hq,1,D] and new memories, curvatures and tail."""
        batch, storage = q.shape[0], self.storage_dtype
        q, k, v = _laid_out(q, torch.float32), _laid_out(k, torch.float32), _laid_out(v, torch.float32)
        memories = [_laid_out(m, storage) for m in memories]
        curvatures = [_laid_out(c, torch.float32) for c in curvatures]
        if self.history and tail is None:
            tail = torch.zeros(batch, self.kv_heads, self.history, self.dim, dtype=storage)
        tail = _laid_out(tail, storage) if self.history else None
        output = torch.empty(batch, self.num_heads, 1, self.dim)
        new_memories = [torch.empty_like(m) for m in memories]
        new_curvatures = [torch.empty_like(c) for c in curvatures]
        new_tail = None if tail is None else torch.empty_like(tail)
        unused = [0] * (MAX_CORES - len(memories))
        self._io[:] = [
            q.data_ptr(), k.data_ptr(), v.data_ptr(), *(m.data_ptr() for m in memories), *unused,
            *(c.data_ptr() for c in curvatures), *unused, 0 if tail is None else tail.data_ptr(), output.data_ptr(),
            *(m.data_ptr() for m in new_memories), *unused, *(c.data_ptr() for c in new_curvatures), *unused,
            0 if new_tail is None else new_tail.data_ptr(), self._scratch.data_ptr(),
        ]
        self._config.batch = batch
        if self.call(*self._addresses):
            raise RuntimeError("er2_decode_step refused its sizes; FusedDecodeStep.fits should have caught this")
        return output, new_memories, new_curvatures, new_tail
