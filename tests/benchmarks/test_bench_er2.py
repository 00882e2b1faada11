"""Benchmarks (skipped in the default run by --benchmark-skip): chunked recurrence vs token oracle,
ER2 prefill vs SDPA, ER2 one-token decode from a carried state (fused C kernel and eager step) vs SDPA
over a KV cache.
Run: pytest tests/benchmarks/test_bench_er2.py --benchmark-only --benchmark-group-by=group
The chunked/token ratio at T=2048 is the speedup figure; compare the prefill and decode rows per
context for the crossover (decode: the er2 row has no context, its cost does not grow with it).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.tasks.er2.mechanism.decode import ER2Decoder
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.mechanism.ops.attention import softmax_reference
from harness.tasks.er2.mechanism.ops.chunk import delta_recurrence
from harness.tasks.er2.mechanism.ops.naive import delta_token_reference

STEPS = 2048


def _recurrence_inputs(steps: int, kv_heads: int = 2, groups: int = 2, features: int = 96, value_dim: int = 64):
    gen = torch.Generator().manual_seed(0)
    k = F.normalize(torch.randn(1, kv_heads, steps, features, generator=gen), dim=-1)
    return {
        "q": torch.randn(1, kv_heads * groups, steps, features, generator=gen),
        "k": k,
        "z": torch.randn(1, kv_heads, steps, value_dim, generator=gen),
        "erase": 0.5 * k,
        "log_decay": -0.25 * torch.rand(k.shape, generator=gen),
        "memory": torch.zeros(1, kv_heads, features, value_dim),
        "groups": groups,
    }


@pytest.mark.benchmark(group="delta-recurrence-T2048")
@pytest.mark.parametrize("form", ["chunked", "token"])
def test_bench_delta_recurrence(benchmark, form):
    inputs = _recurrence_inputs(STEPS)
    fn = delta_recurrence if form == "chunked" else delta_token_reference
    with torch.no_grad():
        output, _ = benchmark(fn, **inputs)
    assert output.shape == (1, 4, STEPS, 64)


@pytest.mark.benchmark(group="prefill")
@pytest.mark.parametrize("context", [512, 2048, 8192])
@pytest.mark.parametrize("op", ["er2", "sdpa"])
def test_bench_prefill(benchmark, op, context):
    """SmolLM2-like probe shapes: 9 query heads, 3 KV heads, head dim 64."""
    layer = ER2Layer(9, 3, 64, residual_mode="compressed").eval()
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 9, context, 64, generator=gen)
    k, v = torch.randn(1, 3, context, 64, generator=gen), torch.randn(1, 3, context, 64, generator=gen)
    with torch.no_grad():
        fn = (lambda: layer(q, k, v)) if op == "er2" else (lambda: softmax_reference(q, k, v, 3))
        output = benchmark(fn)
    assert output.shape == (1, 9, context, 64)


@pytest.mark.benchmark(group="decode")
@pytest.mark.parametrize("op", ["er2", "er2-eager", "sdpa@512", "sdpa@2048", "sdpa@8192"])
def test_bench_decode(benchmark, op):
    """One new token, SmolLM2-like probe shapes: the ER2 decode step (the fused C kernel where it
    builds; er2-eager: the tensor-op step) vs SDPA reading the whole KV cache."""
    layer = ER2Layer(9, 3, 64, residual_mode="compressed").eval()
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 9, 1, 64, generator=gen)
    k, v = torch.randn(1, 3, 1, 64, generator=gen), torch.randn(1, 3, 1, 64, generator=gen)
    with torch.no_grad():
        if op.startswith("er2"):
            _, state = layer(torch.randn(1, 9, 64, 64, generator=gen), torch.randn(1, 3, 64, 64, generator=gen),
                             torch.randn(1, 3, 64, 64, generator=gen), return_state=True)
            decoder = ER2Decoder(layer, fused=False if op == "er2-eager" else None)
            benchmark.extra_info["kernel"] = decoder.kernel
            output, _ = benchmark(lambda: decoder.step(q, k, v, state))
        else:
            context = int(op.split("@")[1])
            cache_k = torch.randn(1, 3, context, 64, generator=gen)
            cache_v = torch.randn(1, 3, context, 64, generator=gen)
            output = benchmark(lambda: F.scaled_dot_product_attention(q, cache_k, cache_v, enable_gqa=True))
    assert output.shape == (1, 9, 1, 64)
