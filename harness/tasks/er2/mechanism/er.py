"""Pieces the ER layers add around a PDelta2 core: a streaming value convolution and retention spectra."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from harness.tasks.er2.mechanism.features import ER2Core

DECAY_SCALE = 0.25  # log_decay = -DECAY_SCALE * sigmoid(forget pre-activation)


def causal_value_conv_stream(v: Tensor, weight: Tensor | None, tail: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """Depthwise causal convolution over time that can be fed in pieces.

    v [B,H,T,D]; weight [H*D,1,K] (channel h*D+d, last tap = current token); tail [B,H,K-1,D]
    holds the last K-1 raw inputs of the previous piece (zeros at the start of a stream).
    """
    if v.ndim != 4:
        raise ValueError(f"v must be [B,H,T,D], got {tuple(v.shape)}")
    if weight is None:
        return v.float(), None
    batch, heads, steps, dim = v.shape
    if weight.ndim != 3 or weight.shape[:2] != (heads * dim, 1):
        raise ValueError(f"weight must be [{heads * dim},1,K] for v {tuple(v.shape)}, got {tuple(weight.shape)}")
    kernel = weight.shape[-1]
    history = kernel - 1
    if tail is None:
        tail = v.new_zeros(batch, heads, history, dim, dtype=torch.float32)
    elif tail.shape != (batch, heads, history, dim):
        raise ValueError(f"tail must be [{batch},{heads},{history},{dim}] for v {tuple(v.shape)}, got {tuple(tail.shape)}")
    stream = torch.cat([tail.float(), v.float()], dim=2)  # [B, H, K-1+T, D]
    channels = stream.permute(0, 1, 3, 2).reshape(batch, heads * dim, history + steps)
    filtered = F.conv1d(channels, weight.float(), groups=heads * dim)  # [B, H*D, T]
    output = filtered.reshape(batch, heads, dim, steps).permute(0, 1, 3, 2)
    new_tail = stream[:, :, stream.shape[2] - history :] if history else None
    return output, new_tail


def value_conv_taps(
    weight: Tensor | None, heads: int, dim: int, passthrough: bool = False, device: torch.device | None = None
) -> Tensor:
    """Taps [H,K,C,D] for ``causal_value_conv_step``, from a conv weight [H*D,1,K] (None: K=1, identity).

    Output 0 is the convolution; with ``passthrough`` output 1 is the current value itself, so a decode
    step that needs both the filtered and the raw value gets them from one weighted sum.
    """
    if weight is None:
        taps = torch.ones(heads, 1, 1, dim, device=device)
    elif weight.ndim != 3 or weight.shape[:2] != (heads * dim, 1):
        raise ValueError(f"weight must be [{heads * dim},1,K] for {heads}x{dim} channels, got {tuple(weight.shape)}")
    else:
        taps = weight.float().view(heads, dim, 1, -1).permute(0, 3, 2, 1)  # last tap = current token
    if passthrough:
        current = torch.zeros_like(taps)
        current[:, -1] = 1.0
        taps = torch.cat([taps, current], dim=2)
    return taps


def causal_value_conv_step(v: Tensor, taps: Tensor, tail: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """One token of ``causal_value_conv_stream`` for decode: v [B,H,1,D], taps [H,K,C,D] from
    ``value_conv_taps`` -> (outputs [B,H,C,D] float32, new tail [B,H,K-1,D] or None when K=1).

    A weighted sum of the tail and the current value, without the conv1d reshapes around it.
    """
    if v.ndim != 4 or v.shape[2] != 1 or taps.ndim != 4 or (v.shape[1], v.shape[3]) != (taps.shape[0], taps.shape[3]):
        raise ValueError(f"need v [B,H,1,D] and taps [H,K,C,D]; got v {tuple(v.shape)}, taps {tuple(taps.shape)}")
    batch, heads, _, dim = v.shape
    history = taps.shape[1] - 1
    if not history:
        return v.float() * taps[:, 0], None
    if tail is None:
        tail = v.new_zeros(batch, heads, history, dim, dtype=torch.float32)
    elif tail.shape != (batch, heads, history, dim):
        raise ValueError(f"tail must be [{batch},{heads},{history},{dim}] for v {tuple(v.shape)}, got {tuple(tail.shape)}")
    stream = torch.cat([tail, v], dim=2).float()  # [B, H, K, D]
    return (stream.unsqueeze(3) * taps).sum(dim=2), stream[:, :, 1:]


def initialize_retention_spectrum(core: ER2Core, minimum: float = 8.0, maximum: float = 2048.0) -> None:
    """Spread the bias-only half-lives of the F features log-uniformly over [minimum, maximum]."""
    if not 0.0 < minimum < maximum:
        raise ValueError(f"need 0 < minimum < maximum, got minimum={minimum}, maximum={maximum}")
    features = core.feature_dim
    half_lives = torch.logspace(math.log10(minimum), math.log10(maximum), features, dtype=torch.float64)
    decay_probability = (math.log(2.0) / half_lives / DECAY_SCALE).clamp(1e-5, 1.0 - 1e-5)
    bias = torch.logit(decay_probability)
    with torch.no_grad():
        core.forget_b.copy_(bias.to(core.forget_b.dtype).expand_as(core.forget_b))
        core.forget_w.zero_()


def retention_half_lives(core: ER2Core) -> Tensor:
    """Tokens for the bias-only decay to halve a memory row, [Hkv, F]."""
    log_decay = (-DECAY_SCALE * core.forget_b.detach().sigmoid()).clamp_max(-1e-7)
    return math.log(0.5) / log_decay
