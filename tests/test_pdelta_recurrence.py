"""Chunked delta recurrence and preconditioner against their token-by-token oracles (float64)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from harness.tasks.er2.mechanism.features import ER2Core
from harness.tasks.er2.mechanism.ops.attention import (
    local_window_attention,
    softmax_reference,
)
from harness.tasks.er2.mechanism.ops.chunk import delta_recurrence, precondition_chunked
from harness.tasks.er2.mechanism.ops.naive import (
    delta_token_reference,
    precondition_reference,
)


def _recurrence_inputs(batch=2, kv_heads=2, groups=2, steps=45, features=6, value_dim=5, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    k = F.normalize(rand(batch, kv_heads, steps, features), dim=-1)
    return {
        "q": rand(batch, kv_heads * groups, steps, features),
        "k": k,
        "z": rand(batch, kv_heads, steps, value_dim),
        "erase": k * torch.rand(k.shape, generator=gen, dtype=dtype),
        "log_decay": -0.25 * torch.rand(k.shape, generator=gen, dtype=dtype),
        "memory": rand(batch, kv_heads, features, value_dim),
    }


@pytest.mark.parametrize("chunk_size", [1, 5, 16, 32])
@pytest.mark.parametrize("groups", [1, 3])
def test_chunked_equals_token_oracle_with_gradients(chunk_size, groups):
    inputs = _recurrence_inputs(groups=groups)
    leaves = {name: t.clone().requires_grad_(True) for name, t in inputs.items()}
    weights = _recurrence_inputs(groups=groups, seed=1)  # random cotangents

    def run(fn, **kwargs):
        args = {name: t.clone().requires_grad_(True) for name, t in leaves.items()}
        output, state = fn(**args, groups=groups, **kwargs)
        loss = (output * weights["q"][..., : output.shape[-1]].sum(-1, keepdim=True)).sum() + (state * weights["memory"]).sum()
        grads = torch.autograd.grad(loss, list(args.values()))
        return output, state, dict(zip(args, grads))

    out_ref, state_ref, grad_ref = run(delta_token_reference)
    out, state, grad = run(delta_recurrence, chunk_size=chunk_size)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=1e-9)
    torch.testing.assert_close(state, state_ref, rtol=0, atol=1e-9)
    for name in grad_ref:
        torch.testing.assert_close(grad[name], grad_ref[name], rtol=1e-9, atol=1e-9, msg=name)


def test_chunked_carries_state_across_calls():
    inputs = _recurrence_inputs(steps=40)
    full, full_state = delta_recurrence(**inputs, groups=2, chunk_size=8)
    first = {n: t[:, :, :13] if n != "memory" else t for n, t in inputs.items()}
    out_a, mid = delta_recurrence(**first, groups=2, chunk_size=8)
    second = {n: t[:, :, 13:] for n, t in inputs.items() if n != "memory"}
    out_b, end = delta_recurrence(**second, memory=mid, groups=2, chunk_size=8)
    torch.testing.assert_close(torch.cat([out_a, out_b], dim=2), full, rtol=0, atol=1e-10)
    torch.testing.assert_close(end, full_state, rtol=0, atol=1e-10)


@pytest.mark.parametrize("chunk_size", [0, 33, -1])
def test_chunk_size_out_of_range(chunk_size):
    with pytest.raises(ValueError, match="chunk_size"):
        delta_recurrence(**_recurrence_inputs(), groups=2, chunk_size=chunk_size)
    with pytest.raises(ValueError, match="chunk_size"):
        ER2Core(4, 2, 8, chunk_size=chunk_size)


def test_inconsistent_shapes_are_named():
    inputs = _recurrence_inputs()
    with pytest.raises(ValueError, match=r"q \(2, 4, 45, 6\).*groups 3"):
        delta_recurrence(**inputs, groups=3)
    bad = dict(inputs, erase=inputs["erase"][:, :, :10])
    with pytest.raises(ValueError, match=r"erase \(2, 2, 10, 6\)"):
        delta_token_reference(**bad, groups=2)
    with pytest.raises(ValueError, match="num_kv_heads"):
        ER2Core(5, 2, 8)
    core = ER2Core(4, 2, 8, feature_dim=6)
    with pytest.raises(ValueError, match=r"got q \(1, 3, 5, 8\)"):
        core(torch.zeros(1, 3, 5, 8), torch.zeros(1, 2, 5, 8), torch.zeros(1, 2, 5, 8))


@pytest.mark.parametrize("chunk_size", [1, 7, 32])
def test_preconditioner_chunked_equals_reference(chunk_size):
    core = ER2Core(4, 2, 8, feature_dim=6)
    with torch.no_grad():  # non-default parameters so every term matters
        core.pre_log_decay.uniform_(-0.03, -0.001)
        core.pre_gain_logit.normal_()
        core.pre_range_raw.normal_()
        core.pre_center.normal_()
    gen = torch.Generator().manual_seed(2)
    kp = F.normalize(torch.randn(2, 2, 70, 6, generator=gen), dim=-1)
    curvature = torch.rand(2, 2, 6, generator=gen) + 0.5
    params = core.precondition_parameters()
    keys_ref, curv_ref = precondition_reference(kp, curvature, *params)
    keys, curv = precondition_chunked(kp, curvature, *params, chunk_size=chunk_size)
    torch.testing.assert_close(keys, keys_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(curv, curv_ref, rtol=1e-5, atol=1e-6)


def test_core_fresh_state_and_precondition_ranges():
    core = ER2Core(4, 2, 8, feature_dim=8)
    alpha, beta, log_x, center = core.precondition_parameters()
    assert torch.allclose(alpha, torch.full_like(alpha, 0.995))
    assert torch.allclose(beta, torch.full_like(beta, 0.12))
    assert torch.allclose(log_x, torch.full_like(log_x, math.log(4.0)))  # midway between ln2 and ln8
    assert torch.equal(core.wk[0], torch.eye(8)) and torch.equal(core.wq[1], core.wk[0])
    q, k, v = torch.randn(1, 4, 9, 8), torch.randn(1, 2, 9, 8), torch.randn(1, 2, 9, 8)
    _, state = core(q, k, v, return_state=True)
    assert state.memory.shape == (1, 2, 8, 8) and state.curvature.shape == (1, 2, 8)
    assert core.recurrent_state_bytes(3) == 3 * (2 * 8 * 8 + 2 * 8) * 4


def test_softmax_reference_and_local_window():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 12, 8, generator=gen), torch.randn(1, 2, 12, 8, generator=gen),
               torch.randn(1, 2, 12, 8, generator=gen))
    scores = q @ k.repeat_interleave(2, dim=1).transpose(-1, -2) / 8**0.5
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    manual = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v.repeat_interleave(2, dim=1)
    torch.testing.assert_close(softmax_reference(q, k, v, 2), manual)
    torch.testing.assert_close(local_window_attention(q, k, v, 12, 2), manual)
    local = local_window_attention(q, k, v, 1, 2)  # only the current token: output is its value
    torch.testing.assert_close(local, v.repeat_interleave(2, dim=1))
    with pytest.raises(ValueError, match="inconsistent shapes"):
        softmax_reference(q, k, v, 3)
