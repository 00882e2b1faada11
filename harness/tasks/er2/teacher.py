"""The teacher: a small causal transformer LM (GQA, RoPE) whose probe layer the arms replace.

One attention layer is the "probe": its post-RoPE q/k/v and exact softmax output are captured
for distillation, and a trained replacement ("mixer") can be swapped in while everything else
stays frozen.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.tasks.er2.mechanism.ops.attention import softmax_reference
from harness.services.training_loop import optimizer_step
from harness.services.seeding import global_rng_from
from harness.tasks.base import TrialContext

Mixer = Callable[[Tensor, Tensor, Tensor], Tensor]  # (q, k, v) -> attention output [B,Hq,T,D]
Batches = Callable[[torch.Generator], tuple[Tensor, Tensor | None]]  # data stream -> (tokens, loss mask or weights)


def zero_layer(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """The probed layer removed: its attention output is zero."""
    return torch.zeros_like(q)


@dataclass(frozen=True)
class TeacherConfig:
    vocab_size: int = 256
    model_dim: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    probe_layer: int = 1
    rope_base: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads


def rotate(x: Tensor, base: float, inverse: bool = False) -> Tensor:
    """Rotary position embedding over the last dim of [B,H,T,D] (pairs: first half, second half);
    ``inverse`` turns each pair back by the same angle, recovering the un-rotated vectors."""
    steps, dim = x.shape[-2], x.shape[-1]
    frequencies = base ** (-torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim)
    angles = torch.arange(steps, device=x.device, dtype=torch.float32)[:, None] * frequencies[None]
    if inverse:
        angles = -angles
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., : dim // 2], x[..., dim // 2 :]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, config: TeacherConfig):
        super().__init__()
        self.config = config
        d, hd = config.model_dim, config.head_dim
        self.q_proj = nn.Linear(d, config.num_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, config.num_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, config.num_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(config.num_heads * hd, d, bias=False)

    def forward(self, x: Tensor, mixer: Mixer | None = None, capture: dict[str, Tensor] | None = None) -> Tensor:
        c = self.config
        batch, steps, _ = x.shape

        def heads(t: Tensor, count: int) -> Tensor:
            return t.reshape(batch, steps, count, c.head_dim).transpose(1, 2)

        q = rotate(heads(self.q_proj(x), c.num_heads), c.rope_base)
        k = rotate(heads(self.k_proj(x), c.num_kv_heads), c.rope_base)
        v = heads(self.v_proj(x), c.num_kv_heads)
        out = softmax_reference(q, k, v, c.num_heads // c.num_kv_heads) if mixer is None else mixer(q, k, v)
        if capture is not None:
            capture.update(q=q, k=k, v=v, out=out)
        return self.o_proj(out.transpose(1, 2).reshape(batch, steps, -1))


class Block(nn.Module):
    def __init__(self, config: TeacherConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(config.model_dim)
        self.attn = Attention(config)
        self.mlp_norm = nn.RMSNorm(config.model_dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.model_dim, 4 * config.model_dim), nn.GELU(), nn.Linear(4 * config.model_dim, config.model_dim)
        )

    def forward(self, x: Tensor, mixer: Mixer | None = None, capture: dict[str, Tensor] | None = None) -> Tensor:
        x = x + self.attn(self.attn_norm(x), mixer, capture)
        return x + self.mlp(self.mlp_norm(x))


class TeacherLM(nn.Module):
    def __init__(self, config: TeacherConfig):
        super().__init__()
        if not 0 <= config.probe_layer < config.num_layers:
            raise ValueError(f"probe_layer {config.probe_layer} outside 0..{config.num_layers - 1}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.model_dim)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.norm = nn.RMSNorm(config.model_dim)
        nn.init.normal_(self.embed.weight, std=config.model_dim**-0.5)  # tied output: logits start near uniform

    def hidden(self, tokens: Tensor, mixer: Mixer | None = None, capture: dict[str, Tensor] | None = None) -> Tensor:
        """Final normalised hidden states [B,T,D]: the logits are their products with the tied embedding."""
        x = self.embed(tokens)
        for index, block in enumerate(self.blocks):
            probe = index == self.config.probe_layer
            x = block(x, mixer if probe else None, capture if probe else None)
        return self.norm(x)

    def forward(self, tokens: Tensor, mixer: Mixer | None = None, capture: dict[str, Tensor] | None = None) -> Tensor:
        """Logits [B,T,V]; ``mixer`` replaces the probe layer's attention, ``capture`` receives its q/k/v/out."""
        return self.hidden(tokens, mixer, capture) @ self.embed.weight.T


def next_token_nll(model: TeacherLM, tokens: Tensor, mixer: Mixer | None = None, mask: Tensor | None = None) -> Tensor:
    """Mean next-token NLL per sequence [B]; with a mask, over its nonzero positions weighted by it (a
    boolean mask: the answers alone; a float one: per-position loss weights).

    With a mask only its nonzero positions get logits: on recall they are a few answers among hundreds
    of tokens, and the vocabulary's projection and softmax would otherwise dominate the teacher's cost.
    """
    if mask is None:
        logits = model(tokens[:, :-1], mixer)
        losses = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
        return losses.sum(1) / losses.shape[1]  # bit for bit the text teachers' loss before the masked branch
    weights = mask[:, :-1].float()
    selected = weights != 0
    hidden = model.hidden(tokens[:, :-1], mixer)[selected]
    losses = F.cross_entropy(hidden @ model.embed.weight.T, tokens[:, 1:][selected], reduction="none")
    totals = losses.new_zeros(tokens.shape[0]).index_add(0, selected.nonzero()[:, 0], losses * weights[selected])
    return totals / weights.sum(1).clamp_min(1.0)


@dataclass(frozen=True)
class TeacherRecipe:
    """Everything besides the seed and the data itself that determines a trained teacher (its cache identity)."""

    config: TeacherConfig
    steps: int
    batch: int
    context: int
    lr: float
    data_id: str


def new_teacher(config: TeacherConfig, ctx: TrialContext) -> TeacherLM:
    """Initialised from the seed's ``teacher-init`` stream; the global RNG, which the arm's layer
    init draws from, is left as it was."""
    with global_rng_from(ctx.stream("teacher-init"), ctx.device):
        return TeacherLM(config).to(ctx.device)


def train_teacher(recipe: TeacherRecipe, batches: Batches, ctx: TrialContext) -> dict[str, Tensor]:
    """AdamW with warm-up and cosine decay on the seed's ``teacher-batches``; returns the state dict."""
    model = new_teacher(recipe.config, ctx).train()
    data = ctx.stream("teacher-batches")
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * step / recipe.steps))
    )

    def step(_: int) -> float:
        tokens, mask = batches(data)
        mask = None if mask is None else mask.to(ctx.device)
        loss = next_token_nll(model, tokens.to(ctx.device), mask=mask).mean()
        optimizer_step(loss, optimizer, schedule, clip_norm=1.0)
        return float(loss.detach())

    ctx.fit(recipe.steps, step, name="teacher")
    return model.state_dict()


def frozen_teacher(config: TeacherConfig, state: Mapping[str, Tensor], ctx: TrialContext) -> TeacherLM:
    """The trained teacher from its state dict, in eval mode without gradients."""
    model = new_teacher(config, ctx)
    model.load_state_dict(state)
    return model.eval().requires_grad_(False)
