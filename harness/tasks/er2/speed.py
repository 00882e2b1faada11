"""Speed of a trained layer against SDPA over the same shapes: prefill, one-token decode, training.

All figures of one trial are measured in the same process, so their ratios hold under a shared load.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.measure.timing import seconds_per_call, throughput
from harness.tasks.er2.mechanism.decode import ER2Decoder
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.mechanism.ops.attention import softmax_reference


def _random_qkv(
    layer: ER2Layer, batch: int, steps: int, device: torch.device, generator: torch.Generator
):
    shape_q = (batch, layer.num_heads, steps, layer.head_dim)
    shape_kv = (batch, layer.num_kv_heads, steps, layer.head_dim)
    return tuple(torch.randn(s, generator=generator).to(device) for s in (shape_q, shape_kv, shape_kv))


def crossover_context(context: int, attention_seconds: float, layer_seconds: float) -> float:
    """Context at which attention's cost per token reaches the layer's, extrapolated from the largest
    measured context with attention's cost per token taken as proportional to context (the layer's does
    not grow). Always finite, so every run reports it; below ``context`` when the layer already wins."""
    return context * layer_seconds / attention_seconds


def prefill_speeds(
    layer: ER2Layer, contexts: list[int], device: torch.device, min_run_time: float,
    generator: torch.Generator,
) -> dict[str, float]:
    """Tokens/s of the layer and of causal SDPA (the teacher's op) for one sequence at each context."""
    result = {}
    with torch.no_grad():
        for context in contexts:
            q, k, v = _random_qkv(layer, 1, context, device, generator)
            result[f"prefill_tokens_per_s@{context}"] = throughput(lambda: layer(q, k, v), context, min_run_time)
            result[f"sdpa_prefill_tokens_per_s@{context}"] = throughput(
                lambda: softmax_reference(q, k, v, layer.groups), context, min_run_time
            )
            result[f"prefill_speedup@{context}"] = (
                result[f"prefill_tokens_per_s@{context}"] / result[f"sdpa_prefill_tokens_per_s@{context}"]
            )
    longest = max(contexts)
    result["prefill_crossover_context"] = crossover_context(
        longest, 1.0 / result[f"sdpa_prefill_tokens_per_s@{longest}"], 1.0 / result[f"prefill_tokens_per_s@{longest}"]
    )
    return result


def decode_latencies(
    layer: ER2Layer, contexts: list[int], device: torch.device, min_run_time: float,
    generator: torch.Generator,
) -> dict[str, float]:
    """One new token: the layer's decode step from a carried state vs SDPA reading the whole KV cache
    (GQA, no copy). The state's cost does not depend on how many tokens it has absorbed. The step is
    the decoder's default (the fused C kernel on the CPU where it builds; ``decode_fused`` says
    whether it ran); the eager step's latency is reported beside it."""
    result = {}
    with torch.no_grad():
        q, k, v = _random_qkv(layer, 1, max(contexts) + 1, device, generator)
        _, state = layer(q[:, :, :64], k[:, :, :64], v[:, :, :64], return_state=True)
        step = (q[:, :, -1:], k[:, :, -1:], v[:, :, -1:])
        decoder, eager = ER2Decoder(layer), ER2Decoder(layer, fused=False)
        layer_seconds = seconds_per_call(lambda: decoder.step(*step, state), min_run_time)
        result["decode_latency_s"] = layer_seconds
        result["decode_eager_latency_s"] = seconds_per_call(lambda: eager.step(*step, state), min_run_time)
        result["decode_fused"] = float(decoder.kernel == "fused")
        for context in contexts:
            cache_k, cache_v = k[:, :, :context], v[:, :, :context]
            seconds = seconds_per_call(
                lambda: F.scaled_dot_product_attention(step[0], cache_k, cache_v, enable_gqa=True), min_run_time
            )
            result[f"sdpa_decode_latency_s@{context}"] = seconds
            result[f"decode_speedup@{context}"] = seconds / layer_seconds
    longest = max(contexts)
    result["decode_crossover_context"] = crossover_context(
        longest, result[f"sdpa_decode_latency_s@{longest}"], layer_seconds
    )
    return result


def training_speed(
    layer: ER2Layer, batch: int, context: int, device: torch.device, min_run_time: float,
    generator: torch.Generator,
) -> float:
    """Forward+backward tokens/s at the training shape (gradients discarded)."""
    q, k, v = _random_qkv(layer, batch, context, device, generator)

    def step() -> None:
        layer(q, k, v).square().mean().backward()
        layer.zero_grad(set_to_none=True)

    return throughput(step, batch * context, min_run_time)
