"""What every form of the PDelta2 ops shares: shape checks, the chunk limit and the key preconditioner's
per-token formula.

Shapes: B batch, Hq query heads, Hkv key/value heads (query head h reads KV head h // groups),
T time, F feature dim, Dv value dim. The memory S is [B, Hkv, F, Dv].
"""
from __future__ import annotations

import torch
from torch import Tensor

MAX_CHUNK = 32  # with log_decay >= -0.25 per token, 1 / cumulative decay stays below e^8


CURVATURE_FLOOR = 1e-4  # keeps log(curvature) finite for keys never seen
DENOMINATOR_FLOOR = 1e-4  # keeps the normalised write finite when k.num is near -1


def check_chunk_size(chunk_size: int) -> int:
    """Chunks longer than 32 tokens would let the within-chunk rescaling overflow float32."""
    if not 1 <= int(chunk_size) <= MAX_CHUNK:
        raise ValueError(f"chunk_size must be in 1..{MAX_CHUNK}, got {chunk_size}")
    return int(chunk_size)


def check_recurrence_shapes(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> None:
    """Fail early with every shape named: a broadcast mistake here would silently mix heads."""
    shapes = (
        f"q {tuple(q.shape)}, k {tuple(k.shape)}, z {tuple(z.shape)}, erase {tuple(erase.shape)}, "
        f"log_decay {tuple(log_decay.shape)}, memory {tuple(memory.shape)}, groups {groups}"
    )
    if any(t.ndim != 4 for t in (q, k, z, erase, log_decay, memory)):
        raise ValueError(f"expected 4-D q, k, z, erase, log_decay and memory; got {shapes}")
    batch, kv_heads, steps, features = k.shape
    value_dim = z.shape[-1]
    consistent = (
        groups >= 1
        and q.shape == (batch, kv_heads * groups, steps, features)
        and erase.shape == k.shape
        and log_decay.shape == k.shape
        and z.shape[:3] == (batch, kv_heads, steps)
        and memory.shape == (batch, kv_heads, features, value_dim)
    )
    if not consistent:
        raise ValueError(
            "inconsistent shapes: need q [B,Hkv*groups,T,F], k/erase/log_decay [B,Hkv,T,F], "
            f"z [B,Hkv,T,Dv], memory [B,Hkv,F,Dv]; got {shapes}"
        )


def curvature_scaling(curvature: Tensor, log_x: Tensor, center: Tensor) -> Tensor:
    """Per-feature factor in [1/x, x]: below one where keys have often been large (high curvature)."""
    relative = torch.log(curvature + CURVATURE_FLOOR) - center
    return torch.exp(log_x * (relative / (-1.0 - relative.abs())))  # exp(-log_x * squashed), one kernel fewer


def preconditioned_key(key: Tensor, curvature: Tensor, log_x: Tensor, center: Tensor) -> Tensor:
    """Scale each feature down where keys have often been large (high curvature), then normalise."""
    numerator = curvature_scaling(curvature, log_x, center) * key
    denominator = (1.0 + (key * numerator).sum(dim=-1, keepdim=True)).clamp_min(DENOMINATOR_FLOOR)
    return numerator / denominator
