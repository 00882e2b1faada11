"""Pieces the ER layers add around a PDelta2 core: a streaming value convolution and retention spectra."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from harness.mechanisms.pdelta.features import PDelta2Core

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


def causal_value_conv_step(v: Tensor, weight: Tensor | None, tail: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """One token of ``causal_value_conv_stream`` for decode: v [B,H,D] -> (y [B,H,D] float32, new tail).

    A weighted sum of the tail and the current value, without the conv1d reshapes around it.
    """
    if v.ndim != 3:
        raise ValueError(f"v must be [B,H,D], got {tuple(v.shape)}")
    if weight is None:
        return v.float(), None
    batch, heads, dim = v.shape
    if weight.ndim != 3 or weight.shape[:2] != (heads * dim, 1):
        raise ValueError(f"weight must be [{heads * dim},1,K] for v {tuple(v.shape)}, got {tuple(weight.shape)}")
    kernel = weight.shape[-1]
    taps = weight.float().view(heads, dim, kernel).transpose(1, 2)  # [H, K, D], last tap = current token
    if kernel == 1:
        return v.float() * taps[:, 0], None
    if tail is None:
        tail = v.new_zeros(batch, heads, kernel - 1, dim, dtype=torch.float32)
    elif tail.shape != (batch, heads, kernel - 1, dim):
        raise ValueError(f"tail must be [{batch},{heads},{kernel - 1},{dim}] for v {tuple(v.shape)}, got {tuple(tail.shape)}")
    stream = torch.cat([tail.float(), v.float().unsqueeze(2)], dim=2)  # [B, H, K, D]
    return (stream * taps).sum(dim=2), stream[:, :, 1:]


def initialize_retention_spectrum(core: PDelta2Core, minimum: float = 8.0, maximum: float = 2048.0) -> None:
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


def retention_half_lives(core: PDelta2Core) -> Tensor:
    """Tokens for the bias-only decay to halve a memory row, [Hkv, F]."""
    log_decay = (-DECAY_SCALE * core.forget_b.detach().sigmoid()).clamp_max(-1e-7)
    return math.log(0.5) / log_decay
