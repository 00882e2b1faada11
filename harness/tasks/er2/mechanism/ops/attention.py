"""Exact causal softmax attention with grouped K/V heads: the teacher the ER2 layer distils, and the
same-bytes sliding-window control it is measured against."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def expand_kv(x: Tensor, groups: int) -> Tensor:
    """[B, Hkv, T, D] -> [B, Hkv*groups, T, D]: query head h reads KV head h // groups."""
    return x.repeat_interleave(groups, dim=1) if groups > 1 else x


def _check_attention_shapes(q: Tensor, k: Tensor, v: Tensor, groups: int) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.shape[:3] != k.shape[:3] or q.shape[-1] != k.shape[-1] or (
        q.shape[:3] != (k.shape[0], k.shape[1] * groups, k.shape[2])
    ):
        raise ValueError(
            f"inconsistent shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, groups {groups}"
        )


def softmax_reference(q: Tensor, k: Tensor, v: Tensor, groups: int) -> Tensor:
    """Exact causal softmax attention (the teacher), K/V shared by each group of query heads."""
    _check_attention_shapes(q, k, v, groups)
    return F.scaled_dot_product_attention(q, expand_kv(k, groups), expand_kv(v, groups), is_causal=True)


def local_window_attention(q: Tensor, k: Tensor, v: Tensor, window: int, groups: int) -> Tensor:
    """Causal softmax attention restricted to the last ``window`` tokens (the current one included)."""
    _check_attention_shapes(q, k, v, groups)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    steps, keys = q.shape[2], k.shape[2]
    rows = torch.arange(steps, device=q.device)[:, None]
    cols = torch.arange(keys, device=q.device)[None, :]
    allowed = (cols <= rows) & (cols > rows - window)
    return F.scaled_dot_product_attention(q, expand_kv(k, groups), expand_kv(v, groups), attn_mask=allowed)
