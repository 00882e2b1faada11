"""The in-run streaming check: a trained layer's decode must equal its chunked forward, and a layer
whose decode path differs must be reported as disagreeing."""
from __future__ import annotations

import torch

from harness.tasks.er2.mechanism.decode import ER2Decoder
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.consistency import AGREEMENT_TOLERANCE, decode_prefill_agreement

SHAPES = dict(num_heads=6, num_kv_heads=2, head_dim=8, feature_dim=12, residual_dim=6, code_rank=3, chunk_size=8)


def _layer(**overrides) -> ER2Layer:
    layer = ER2Layer(**{**SHAPES, **overrides})
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in layer.parameters():
            param.add_(0.1 * torch.randn(param.shape, generator=gen))
    return layer.eval()


def _qkv(steps: int = 40):
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(2, 6, steps, 8, generator=gen), torch.randn(2, 2, steps, 8, generator=gen),
            torch.randn(2, 2, steps, 8, generator=gen))


class _DecoderWithoutConvolution(ER2Decoder):
    """A plausible decode bug: the value convolution's carried tail is dropped between tokens."""

    def step(self, q, k, v, state=None):
        output, new_state = super().step(q, k, v, state)
        return output, type(new_state)(base=new_state.base, residual=new_state.residual, conv_tail=None)


def test_trained_layer_decode_agrees_in_every_mode_and_storage_dtype() -> None:
    for mode in ("none", "raw", "compressed"):
        for dtype in ("fp16", "fp32"):
            result = decode_prefill_agreement(_layer(residual_mode=mode, state_dtype=dtype), *_qkv())
            assert result["decode_agrees"] == 1.0, (mode, dtype, result)
            assert result["decode_prefill_max_error"] < AGREEMENT_TOLERANCE / 10


def test_a_decode_path_that_drops_state_is_reported() -> None:
    result = decode_prefill_agreement(_layer(residual_mode="compressed"), *_qkv(), _DecoderWithoutConvolution)
    assert result["decode_agrees"] == 0.0
    assert result["decode_prefill_max_error"] > AGREEMENT_TOLERANCE
