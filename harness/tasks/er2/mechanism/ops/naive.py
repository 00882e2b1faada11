"""Token-by-token references: the delta rule and the curvature preconditioner one token at a time.

Decode runs these steps (stacked over cores in ``CoreDecoder.step``); the chunked forms in ``chunk``
are tested against the loops here.
"""
from __future__ import annotations

import torch
from torch import Tensor

from harness.tasks.er2.mechanism.ops.common import (
    check_recurrence_shapes,
    preconditioned_key,
)


def delta_step(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> tuple[Tensor, Tensor]:
    """One token of the delta rule on the carried memory: the oracle's step (decode runs it stacked,
    in ``CoreDecoder.step``).

    q [B,Hq,F]; k, erase, log_decay [B,Hkv,F]; z [B,Hkv,Dv]; memory [B,Hkv,F,Dv]. Decay the rows,
    read what is stored under the erase vector, write the difference under k, then read with q.
    Returns (output [B,Hq,Dv], new memory).
    """
    batch, kv_heads, features = k.shape
    state = log_decay.exp().unsqueeze(-1) * memory
    stored = (erase.unsqueeze(-2) @ state).squeeze(-2)  # [B, Hkv, Dv]
    state = state + k.unsqueeze(-1) * (z - stored).unsqueeze(-2)
    output = q.reshape(batch, kv_heads, groups, features) @ state  # [B, Hkv, G, Dv]
    return output.reshape(batch, kv_heads * groups, -1), state


def delta_token_reference(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> tuple[Tensor, Tensor]:
    """The oracle: decay, read under erase, delta write, then read the output, one token at a time."""
    check_recurrence_shapes(q, k, z, erase, log_decay, memory, groups)
    state = memory
    outputs = []
    for t in range(k.shape[2]):
        output, state = delta_step(
            q[:, :, t], k[:, :, t], z[:, :, t], erase[:, :, t], log_decay[:, :, t], state, groups
        )
        outputs.append(output)
    return torch.stack(outputs, dim=2), state


def precondition_step(
    key: Tensor, curvature: Tensor, alpha: Tensor, beta: Tensor, log_x: Tensor, center: Tensor
) -> tuple[Tensor, Tensor]:
    """One token: the key [B,Hkv,F] preconditioned by the curvature before it, then the curvature updated."""
    return preconditioned_key(key, curvature, log_x, center), alpha * curvature + beta * key.square()


def precondition_reference(
    kp: Tensor, curvature: Tensor, alpha: Tensor, beta: Tensor, log_x: Tensor, center: Tensor
) -> tuple[Tensor, Tensor]:
    """Token-by-token oracle: key t sees the curvature accumulated from keys before it."""
    keys = []
    for t in range(kp.shape[2]):
        key, curvature = precondition_step(kp[:, :, t], curvature, alpha, beta, log_x, center)
        keys.append(key)
    return torch.stack(keys, dim=2), curvature
