"""The decode path (one token from the carried state, no chunks) against the chunked forward."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from harness.tasks.er2.mechanism.er import (
    causal_value_conv_step,
    causal_value_conv_stream,
    value_conv_taps,
)
from harness.tasks.er2.mechanism.decode import ER2Decoder
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.mechanism.features import ER2Core, PDeltaState
from harness.tasks.er2.mechanism.ops.fused_decode import KernelUnavailable, load_kernel

SMALL = dict(num_heads=6, num_kv_heads=2, head_dim=8, feature_dim=12, residual_dim=6, code_rank=3, chunk_size=8)
KINDS = ["fused", "eager"]


def _decoder(layer: ER2Layer, kind: str):
    """The decoder of this kind; the fused one is skipped (with the reason) where no C compiler builds it."""
    if kind == "fused":
        try:
            load_kernel()
        except KernelUnavailable as error:
            pytest.skip(f"fused decode kernel unavailable here: {error}")
    decoder = ER2Decoder(layer, fused=kind == "fused")
    assert decoder.kernel == kind
    return decoder


def _perturb(module: torch.nn.Module, seed: int = 1, scale: float = 0.1) -> None:
    """Move every parameter off its initial value so that every term of the step matters."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.add_(scale * torch.randn(param.shape, generator=gen, dtype=param.dtype))


def _qkv(heads: int, kv_heads: int, steps: int, dim: int = 8, dtype=torch.float32, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(2, heads, steps, dim, generator=gen, dtype=dtype),
            torch.randn(2, kv_heads, steps, dim, generator=gen, dtype=dtype),
            torch.randn(2, kv_heads, steps, dim, generator=gen, dtype=dtype))


def test_core_step_equals_chunked_forward_float64():
    core = ER2Core(6, 2, 8, feature_dim=12, chunk_size=8).double()
    _perturb(core)
    q, k, v = _qkv(6, 2, 37, dtype=torch.float64)
    gen = torch.Generator().manual_seed(5)
    start = PDeltaState(torch.randn(2, 2, 12, 8, generator=gen, dtype=torch.float64),
                        torch.rand(2, 2, 12, generator=gen, dtype=torch.float64) + 0.5)
    with torch.no_grad():
        chunked, end = core(q, k, v, state=start, return_state=True)
        state, outputs = start, []
        for t in range(q.shape[2]):
            output, state = core.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
            outputs.append(output)
    torch.testing.assert_close(torch.stack(outputs, dim=2), chunked, rtol=0, atol=1e-10)
    torch.testing.assert_close(state.memory, end.memory, rtol=0, atol=1e-10)
    torch.testing.assert_close(state.curvature, end.curvature, rtol=0, atol=1e-10)


def test_conv_step_equals_stream():
    """Output 0 is the streamed convolution, output 1 (passthrough) the raw value; the tails agree."""
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(2, 3, 9, 5, generator=gen)
    for kernel in (1, 4):
        weight = torch.randn(15, 1, kernel, generator=gen)
        full, full_tail = causal_value_conv_stream(v, weight)
        taps = value_conv_taps(weight, 3, 5, passthrough=True)
        tail, outputs = None, []
        for t in range(v.shape[2]):
            output, tail = causal_value_conv_step(v[:, :, t : t + 1], taps, tail)
            outputs.append(output)
        stacked = torch.stack(outputs, dim=2)  # [B, H, T, 2, D]
        torch.testing.assert_close(stacked[:, :, :, 0], full)
        torch.testing.assert_close(stacked[:, :, :, 1], v, rtol=0, atol=0)
        assert (tail is None) == (full_tail is None) and (tail is None or torch.equal(tail, full_tail))
    no_conv, _ = causal_value_conv_step(v[:, :, :1], value_conv_taps(None, 3, 5))
    assert torch.equal(no_conv[:, :, 0], v[:, :, 0])
    with pytest.raises(ValueError, match=r"weight must be \[15,1,K\]"):
        value_conv_taps(torch.zeros(14, 1, 4), 3, 5)
    with pytest.raises(ValueError, match=r"taps \[H,K,C,D\]"):
        causal_value_conv_step(v[:, :, :1], value_conv_taps(None, 2, 5))


# The residual modes and the ablations that cross compressed's projection with its gate.
VARIANTS = {
    "none": {"residual_mode": "none"}, "raw": {"residual_mode": "raw"}, "compressed": {"residual_mode": "compressed"},
    "compressed_gate1": {"residual_mode": "compressed", "gate_mode": "one"},
    "raw_gated": {"residual_mode": "raw", "gate_mode": "learned"},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("conv_kernel", [1, 4])
@pytest.mark.parametrize("mode", list(VARIANTS))
def test_layer_decode_equals_chunked_forward(mode, conv_kernel, kind):
    """fp32 storage: token-by-token decode reproduces the chunked forward's outputs and final state."""
    layer = ER2Layer(**SMALL, **VARIANTS[mode], state_dtype="fp32", conv_kernel=conv_kernel)
    _perturb(layer)
    q, k, v = _qkv(6, 2, 29)
    with torch.no_grad():
        chunked, end = layer(q, k, v, return_state=True)
        decoder, state, outputs = _decoder(layer, kind), None, []
        for t in range(q.shape[2]):
            output, state = decoder.step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state)
            outputs.append(output)
    torch.testing.assert_close(torch.cat(outputs, dim=2), chunked, rtol=1e-4, atol=1e-5)
    pairs = [(state.base.memory, end.base.memory), (state.base.curvature, end.base.curvature),
             (state.conv_tail, end.conv_tail)]
    if mode != "none":
        pairs += [(state.residual.memory, end.residual.memory), (state.residual.curvature, end.residual.curvature)]
    for decoded, forward in pairs:
        torch.testing.assert_close(decoded, forward, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_layer_decode_equals_one_token_forward_with_fp16_state(kind):
    """With fp16 storage both paths round the same state the same way after every token."""
    layer = ER2Layer(**SMALL, residual_mode="compressed", state_dtype="fp16")
    _perturb(layer)
    q, k, v = _qkv(6, 2, 12)
    with torch.no_grad():
        decoder, decoded, forward = _decoder(layer, kind), None, None
        for t in range(q.shape[2]):
            token = (q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1])
            out_step, decoded = decoder.step(*token, decoded)
            out_forward, forward = layer(*token, state=forward, return_state=True)
            torch.testing.assert_close(out_step, out_forward, rtol=1e-4, atol=1e-4)
    assert decoded.base.memory.dtype == torch.float16 and decoded.base.curvature.dtype == torch.float32
    torch.testing.assert_close(decoded.residual.memory.float(), forward.residual.memory.float(), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="one token"):
        decoder.step(q[:, :, :2], k[:, :, :2], v[:, :, :2])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("state_dtype", ["fp16", "fp32"])
def test_decoder_never_modifies_given_or_returned_states(state_dtype, kind):
    """The decoder's working buffer is reused across steps; no state a caller holds may alias it."""
    layer = ER2Layer(**SMALL, residual_mode="compressed", state_dtype=state_dtype)
    _perturb(layer)
    q, k, v = _qkv(6, 2, 9)
    snapshot = lambda s: [t.clone() for t in (s.base.memory, s.base.curvature, s.residual.memory, s.conv_tail)]
    with torch.no_grad():
        _, state = layer(q[:, :, :8], k[:, :, :8], v[:, :, :8], return_state=True)
        before = snapshot(state)
        decoder, token = _decoder(layer, kind), (q[:, :, 8:], k[:, :, 8:], v[:, :, 8:])
        first, first_state = decoder.step(*token, state)
        returned = snapshot(first_state)
        again, _ = decoder.step(*token, state)
        decoder.step(*(t[:1] for t in token), None)  # another batch size reallocates the buffer
        other, _ = decoder.step(*token, first_state)
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    for kept, now in zip(before + returned, snapshot(state) + snapshot(first_state)):
        assert torch.equal(kept, now)
    assert not torch.equal(other, first)


@pytest.mark.parametrize("state_dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("mode", list(VARIANTS))
def test_fused_kernel_follows_the_eager_step_token_after_token(mode, state_dtype):
    """Each path carries its own state for 40 tokens from a prefilled one: fp32 states agree to float
    rounding; fp16 states may round one value a unit apart, which must not grow."""
    layer = ER2Layer(**SMALL, **VARIANTS[mode], state_dtype=state_dtype)
    _perturb(layer, scale=0.3)
    q, k, v = _qkv(6, 2, 48, seed=3)
    tolerance = 1e-5 if state_dtype == "fp32" else 2e-3
    with torch.no_grad():
        _, prefilled = layer(q[:, :, :8], k[:, :, :8], v[:, :, :8], return_state=True)
        fused, eager = _decoder(layer, "fused"), _decoder(layer, "eager")
        fused_state = eager_state = prefilled
        for t in range(8, 48):
            token = (q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1])
            fused_out, fused_state = fused.step(*token, fused_state)
            eager_out, eager_state = eager.step(*token, eager_state)
            scale = eager_out.abs().max()
            assert (fused_out - eager_out).abs().max() <= tolerance * scale, f"token {t}"
    assert fused_state.base.memory.dtype == eager_state.base.memory.dtype == layer.storage_dtype
    for name in ("base",) + (("residual",) if mode != "none" else ()):
        ours, reference = getattr(fused_state, name), getattr(eager_state, name)
        torch.testing.assert_close(ours.memory.float(), reference.memory.float(), rtol=tolerance, atol=tolerance)
        torch.testing.assert_close(ours.curvature, reference.curvature, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fused_state.conv_tail, eager_state.conv_tail, rtol=0, atol=0)


def test_decoder_falls_back_to_eager_where_the_kernel_cannot_be_built(monkeypatch):
    layer = ER2Layer(**SMALL, residual_mode="compressed")
    monkeypatch.setenv("CC", "no-such-c-compiler")
    load_kernel.cache_clear()
    try:
        decoder = ER2Decoder(layer)
        assert decoder.kernel == "eager" and "no-such-c-compiler" in decoder.kernel_unavailable
        with pytest.raises(KernelUnavailable, match="no C compiler"):
            ER2Decoder(layer, fused=True)
        q, k, v = _qkv(6, 2, 1)
        output, _ = decoder.step(q, k, v)
        assert output.shape == (2, 6, 1, 8)
    finally:
        load_kernel.cache_clear()


def test_the_kernel_source_ships_with_the_package():
    """An installed harness must carry er2_decode.c (package data), or every machine decodes eagerly."""
    from harness.tasks.er2.mechanism.ops.fused_decode import SOURCE

    assert SOURCE.is_file() and b"er2_decode_step" in SOURCE.read_bytes()


PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) { FILE *f = fopen(MARKER, "w"); if (f) fclose(f); }
"""


@pytest.fixture
def kernel_tmp(tmp_path, monkeypatch):
    """A fresh temp dir for the kernel cache; the loaded kernel is forgotten before and after."""
    import tempfile

    def use(folder):
        folder.mkdir(exist_ok=True)
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        load_kernel.cache_clear()
        return folder

    try:
        yield use
    finally:
        load_kernel.cache_clear()


def _built_library(kernel_tmp, root):
    """Build the kernel under ``root`` and return its library's path (skips where nothing builds it)."""
    kernel_tmp(root)
    try:
        load_kernel()
    except KernelUnavailable as error:
        pytest.skip(f"fused decode kernel unavailable here: {error}")
    (library,) = (root / f"harness-kernels-{os.getuid()}").glob("*.so")
    return library


@pytest.mark.skipif(os.getuid() != 0, reason="simulating a second local user needs root (chown)")
def test_a_kernel_folder_another_user_created_first_is_refused_and_nothing_of_theirs_runs(kernel_tmp, tmp_path):
    import hashlib
    import subprocess

    name = _built_library(kernel_tmp, tmp_path / "mine").name
    hostile_root = kernel_tmp(tmp_path / "shared")
    hostile_root.chmod(0o1777)
    folder = hostile_root / f"harness-kernels-{os.getuid()}"
    folder.mkdir()
    marker = tmp_path / "planted-code-ran"
    source = tmp_path / "planted.c"
    source.write_text(PLANTED)
    subprocess.run(["cc", f'-DMARKER="{marker}"', "-shared", "-fPIC", "-o", str(folder / name), str(source)], check=True)
    (folder / name.replace(".so", ".sha256")).write_text(hashlib.sha256((folder / name).read_bytes()).hexdigest())
    for path in (folder, *folder.iterdir()):
        os.chown(path, 65534, 65534)
    folder.chmod(0o777)
    with pytest.raises(KernelUnavailable, match="refusing the kernel folder"):
        load_kernel()
    assert not marker.exists()


def test_a_temp_dir_others_can_write_without_the_sticky_bit_is_refused(kernel_tmp, tmp_path):
    """There a neighbour could swap the checked folder for theirs between the check and the load."""
    root = kernel_tmp(tmp_path / "open")
    root.chmod(0o777)
    with pytest.raises(KernelUnavailable, match="without the sticky bit"):
        load_kernel()
    root.chmod(0o1777)  # /tmp's mode: only the owner of an entry may rename it
    load_kernel.cache_clear()
    try:
        load_kernel()
    except KernelUnavailable as error:
        assert "sticky" not in str(error)


def test_a_tampered_kernel_library_is_rebuilt_not_loaded(kernel_tmp, tmp_path):
    library = _built_library(kernel_tmp, tmp_path)
    library.unlink()  # a new file: truncating the loaded one in place would crash this process
    library.write_bytes(b"not a library")
    load_kernel.cache_clear()
    assert load_kernel().er2_decode_step is not None
    assert library.read_bytes().startswith(b"\x7fELF")
    assert library.stat().st_mode & 0o077 == 0


def test_the_kernel_cache_key_covers_the_cpu_flags(kernel_tmp, tmp_path, monkeypatch):
    """-march=native code built on one CPU must not be loaded on another sharing the folder."""
    from harness.tasks.er2.mechanism.ops import fused_decode

    library = _built_library(kernel_tmp, tmp_path)
    monkeypatch.setattr(fused_decode, "cpu_features", lambda: "x86_64 Another CPU fpu sse sse2")
    load_kernel.cache_clear()
    load_kernel()
    assert len(list(library.parent.glob("*.so"))) == 2


def test_a_folder_swapped_between_the_check_and_the_load_runs_nothing_of_the_swapper(kernel_tmp, tmp_path,
                                                                                      monkeypatch):
    """A neighbour who can rename a folder above the kernel's swaps it for theirs right after the library
    was checked: what is loaded is still the checked file (through its descriptor), never theirs."""
    import hashlib
    import subprocess

    from harness.tasks.er2.mechanism.ops import fused_decode

    name = _built_library(kernel_tmp, tmp_path / "first").name  # skips where nothing builds the kernel
    folder = kernel_tmp(tmp_path / "tmp") / f"harness-kernels-{os.getuid()}"
    library = folder / name
    marker = tmp_path / "planted-code-ran"
    source = tmp_path / "planted.c"
    source.write_text(PLANTED)
    planted = tmp_path / "planted-folder"
    planted.mkdir(mode=0o700)
    subprocess.run(["cc", f'-DMARKER="{marker}"', "-shared", "-fPIC", "-o", str(planted / library.name), str(source)],
                   check=True)
    (planted / library.with_suffix(".sha256").name).write_text(
        hashlib.sha256((planted / library.name).read_bytes()).hexdigest())
    checked = fused_decode.open_trusted

    def check_then_swap(*args):
        trusted = checked(*args)
        if trusted is not None:  # the freshly built library passed its checks: swap the folder now
            folder.rename(tmp_path / "moved-away")
            planted.rename(folder)
        return trusted

    monkeypatch.setattr(fused_decode, "open_trusted", check_then_swap)
    kernel = load_kernel()
    assert kernel.er2_decode_step is not None  # the planted library has no such symbol
    assert not marker.exists()
    mapped = Path("/proc/self/maps").read_text()
    assert f"moved-away/{name}" in mapped and str(folder / name) not in mapped  # the checked file, still mapped
