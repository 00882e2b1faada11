"""ER2 layer invariants: streaming, function-preserving residual, storage dtypes, state bytes, bad input."""
from __future__ import annotations

import math

import pytest
import torch

from harness.measure.memory import tensor_bytes
from harness.tasks.er2.mechanism.er import (
    causal_value_conv_stream,
    initialize_retention_spectrum,
    retention_half_lives,
)
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.mechanism.features import ER2Core

SMALL = dict(num_heads=4, num_kv_heads=2, head_dim=8, feature_dim=12, residual_dim=6, code_rank=3, chunk_size=8)


def _qkv(steps=30, batch=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 4, steps, 8, generator=gen), torch.randn(batch, 2, steps, 8, generator=gen),
            torch.randn(batch, 2, steps, 8, generator=gen))


def _perturbed(layer: ER2Layer, seed: int = 1) -> ER2Layer:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in layer.parameters():
            param.add_(0.1 * torch.randn(param.shape, generator=gen))
    return layer


def test_conv_stream_pieces_equal_one_shot():
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(2, 3, 17, 5, generator=gen)
    weight = torch.randn(15, 1, 4, generator=gen)
    full, full_tail = causal_value_conv_stream(v, weight)
    pieces, tail = [], None
    for start, stop in [(0, 1), (1, 2), (2, 9), (9, 17)]:  # pieces shorter than the kernel too
        out, tail = causal_value_conv_stream(v[:, :, start:stop], weight, tail)
        pieces.append(out)
    torch.testing.assert_close(torch.cat(pieces, dim=2), full)
    torch.testing.assert_close(tail, full_tail)
    torch.testing.assert_close(tail, v[:, :, -3:])
    manual = sum(weight[:, 0, j].reshape(1, 3, 1, 5) * torch.nn.functional.pad(v, (0, 0, 3 - j, 0))[:, :, :17]
                 for j in range(4))
    torch.testing.assert_close(full, manual)
    out, none_tail = causal_value_conv_stream(v.half(), None)
    assert out.dtype == torch.float32 and none_tail is None
    with pytest.raises(ValueError, match=r"weight must be \[15,1,K\]"):
        causal_value_conv_stream(v, torch.zeros(14, 1, 4))
    with pytest.raises(ValueError, match="tail must be"):
        causal_value_conv_stream(v, weight, torch.zeros(2, 3, 2, 5))


@pytest.mark.parametrize("state_dtype", ["fp16", "fp32"])
def test_streaming_token_by_token_equals_full_sequence(state_dtype):
    layer = _perturbed(ER2Layer(**SMALL, residual_mode="compressed", state_dtype=state_dtype))
    assert layer.residual_gain.abs().min() > 0
    q, k, v = _qkv(steps=21)
    with torch.no_grad():
        full = layer(q, k, v)
        state, pieces = None, []
        for t in range(q.shape[2]):
            out, state = layer(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state=state, return_state=True)
            pieces.append(out)
    streamed = torch.cat(pieces, dim=2)
    if state_dtype == "fp32":
        torch.testing.assert_close(streamed, full, rtol=1e-4, atol=1e-5)
    else:  # memories rounded to fp16 between calls
        assert (streamed - full).abs().max() < 2e-2 * full.abs().max()


def test_zero_residual_gain_equals_base_only_layer():
    compressed = _perturbed(ER2Layer(**SMALL, residual_mode="compressed"))
    with torch.no_grad():
        compressed.residual_gain.zero_()
    none = ER2Layer(**SMALL, residual_mode="none")
    shared = {name: value for name, value in compressed.state_dict().items() if name in none.state_dict()}
    none.load_state_dict(shared)
    q, k, v = _qkv()
    with torch.no_grad():
        torch.testing.assert_close(compressed(q, k, v), none(q, k, v), rtol=0, atol=0)
        compressed.residual_gain.fill_(0.5)
        assert not torch.allclose(compressed(q, k, v), none(q, k, v))


@pytest.mark.parametrize("mode", ["none", "raw", "compressed"])
@pytest.mark.parametrize("state_dtype", ["fp16", "fp32"])
def test_state_dtypes_and_measured_bytes(mode, state_dtype):
    layer = ER2Layer(**SMALL, residual_mode=mode, state_dtype=state_dtype)
    q, k, v = _qkv(batch=3)
    _, state = layer(q, k, v, return_state=True)
    storage = torch.float16 if state_dtype == "fp16" else torch.float32
    assert state.base.memory.dtype == storage and state.conv_tail.dtype == storage
    assert state.base.curvature.dtype == torch.float32
    if mode == "none":
        assert state.residual is None
    else:
        assert state.residual.memory.dtype == storage and state.residual.curvature.dtype == torch.float32
    assert tensor_bytes(state) == layer.recurrent_state_bytes(3)


def test_raw_and_compressed_share_the_state_budget():
    raw = ER2Layer(**SMALL, residual_mode="raw")
    compressed = ER2Layer(**{**SMALL, "code_rank": 7}, residual_mode="compressed")
    none = ER2Layer(**SMALL, residual_mode="none")
    assert raw.recurrent_state_bytes() == compressed.recurrent_state_bytes() > none.recurrent_state_bytes()


def test_reference_figures_for_smollm2_shapes():
    """The spec's arithmetic: Hkv=3, D=64, F=96, Residual16, fp16 storage."""
    none = ER2Layer(9, 3, 64, residual_mode="none")
    raw = ER2Layer(9, 3, 64, residual_mode="raw")
    assert none.recurrent_state_bytes() == 39_168 and raw.recurrent_state_bytes() == 45_504


def test_config_round_trip():
    layer = _perturbed(ER2Layer(**SMALL, residual_mode="raw", state_dtype="fp32"))
    clone = ER2Layer(**layer.config)
    clone.load_state_dict(layer.state_dict())
    q, k, v = _qkv()
    with torch.no_grad():
        torch.testing.assert_close(clone(q, k, v), layer(q, k, v), rtol=0, atol=0)


def test_bad_configuration_lists_valid_choices():
    with pytest.raises(ValueError, match="none, raw, compressed"):
        ER2Layer(4, 2, 8, residual_mode="lowrank")
    with pytest.raises(ValueError, match="fp16, fp32"):
        ER2Layer(4, 2, 8, state_dtype="bf16")
    with pytest.raises(ValueError, match="divisible"):
        ER2Layer(5, 2, 8)
    with pytest.raises(ValueError, match="code_rank"):
        ER2Layer(4, 2, 8, code_rank=9)
    with pytest.raises(ValueError, match="chunk_size"):
        ER2Layer(4, 2, 8, chunk_size=64)
    with pytest.raises(ValueError, match="unknown implementation"):
        ER2Layer(4, 2, 8, feature_dim=8)(*_qkv(steps=3), implementation="token")


def test_retention_spectrum():
    core = ER2Core(4, 2, 8, feature_dim=5)
    initialize_retention_spectrum(core, 8.0, 2048.0)
    half_lives = retention_half_lives(core)
    expected = torch.logspace(math.log10(8.0), math.log10(2048.0), 5)
    torch.testing.assert_close(half_lives, expected.expand(2, 5), rtol=1e-4, atol=0)
    assert torch.equal(core.forget_w, torch.zeros_like(core.forget_w))
    with pytest.raises(ValueError, match="minimum"):
        initialize_retention_spectrum(core, 10.0, 10.0)
    layer = ER2Layer(**SMALL, residual_mode="compressed")
    stats = layer.retention_statistics()
    assert stats["base_half_life_min"] == pytest.approx(8.0, rel=1e-3)
    assert stats["residual_half_life_max"] == pytest.approx(8192.0, rel=1e-3)
    assert stats["predicted_gate_mean"] == pytest.approx(0.2)


def test_auxiliary_losses_train_the_residual_branch():
    layer = _perturbed(ER2Layer(**SMALL, residual_mode="compressed"))
    q, k, v = _qkv()
    teacher = torch.randn(2, 4, 30, 8)
    losses = layer.auxiliary_losses(q, k, v, teacher)
    assert losses["hard_fraction_observed"] == pytest.approx(0.25, abs=0.05)
    assert losses["hard_error_mean"] > losses["easy_error_mean"]
    total = losses["residual_code_nmse"] + losses["gate_bce"] + losses["orthogonality"]
    total.backward()
    assert layer.residual.wq.grad.abs().sum() > 0 and layer.error_gate_w.grad.abs().sum() > 0
