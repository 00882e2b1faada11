"""Distilling several seeds' ER2 layers as one model (``Task.run_seeds``): the fast op beside
``distill.distil_step``, its reference.

Every parameter of an ER2 layer is per head (or per KV-head channel), and no computation mixes heads
except within a head group, so K layers of one configuration are one layer with K times the heads: their
parameters concatenated along the head axis, each seed's capture in its own block of heads. The pass is
the layer's own code (``torch.func.functional_call`` on a K-times-wider template), and each seed's loss is
the reference's (``distill.loss_from_parts``) on its own block of that pass, so neither can drift from the
reference. The optimiser gives each seed's parameters their own groups, gradient clip and gain clamp: a
seed's update is then its own loss's, equal to one-at-a-time training up to the order of float reductions.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call

from harness.services.training_loop import optimizer_step
from harness.tasks.er2.distill import Capture, loss_from_parts, mean_abs_gain, parameter_groups, scored
from harness.tasks.er2.mechanism.er2 import ER2Layer


class _Components(nn.Module):
    """``layer.components`` as a module's forward, so that ``functional_call`` can lend it parameters."""

    def __init__(self, layer: ER2Layer):
        super().__init__()
        self.layer = layer

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> dict[str, Tensor | None]:
        return self.layer.components(q, k, v)[2]


class SeedStack:
    """K layers of one configuration seen as one layer with K times the heads."""

    def __init__(self, layers: Sequence[ER2Layer]):
        first = layers[0]
        if any(layer.config != first.config for layer in layers):
            raise ValueError("the layers of a seed batch must share their configuration")
        self.layers = list(layers)
        wide = {**first.config, "num_heads": first.num_heads * len(layers),
                "num_kv_heads": first.num_kv_heads * len(layers)}
        with torch.random.fork_rng(devices=[]):  # the template's own initial values are never used
            self.template = _Components(ER2Layer(**wide).to(first.base.wq.device))
        self.names = [name for name, _ in first.named_parameters()]

    def stacked(self) -> dict[str, Tensor]:
        """Each seed's parameters in its block of the head axis (gradients flow back to each layer's own)."""
        per_layer = [dict(layer.named_parameters()) for layer in self.layers]
        return {f"layer.{name}": torch.cat([params[name] for params in per_layer], dim=0) for name in self.names}

    def parts(self, captures: Sequence[Capture]) -> list[dict[str, Tensor | None]]:
        """Each seed's parts of one pass of the stacked layer over every seed's capture."""
        q, k, v = (torch.cat([capture[name] for capture in captures], dim=1) for name in ("q", "k", "v"))
        parts = functional_call(self.template, self.stacked(), (q, k, v))
        count = len(self.layers)
        blocks = {name: None if part is None else part.chunk(count, dim=1) for name, part in parts.items()}
        return [{name: None if chunks is None else chunks[i] for name, chunks in blocks.items()} for i in range(count)]


def transfer_losses(stack: SeedStack, captures: Sequence[Capture]) -> list[tuple[Tensor, Tensor]]:
    """Each seed's (loss, NMSE), the reference's loss on its own block of one stacked pass (scored at its own
    answer positions, where the capture marks them)."""
    return [loss_from_parts(layer, *scored(parts, capture))
            for layer, parts, capture in zip(stack.layers, stack.parts(captures), captures)]


def distil_seeds_step(
    layers: Sequence[ER2Layer], next_captures: Sequence[Callable[[int], Capture]], lr: float,
    rate: Callable[[int], float], gain_lr_scale: float = 1.0,
) -> Callable[[int], list[dict[str, float]]]:
    """``distill.distil_step`` for K seeds' layers trained as one: one AdamW over every seed's parameter
    groups (the same schedule), each seed's gradients clipped on their own, each gain kept in its clamp.
    Returns one (loss, nmse, gain) per seed per call."""
    stack = SeedStack(layers)
    groups = [parameter_groups(layer, lr, gain_lr_scale) for layer in layers]
    optimizer = torch.optim.AdamW([group for seed in groups for group in seed], lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    own = [[p for group in seed for p in group["params"]] for seed in groups]

    def step(index: int) -> list[dict[str, float]]:
        losses = transfer_losses(stack, [next_capture(index) for next_capture in next_captures])
        total = torch.stack([loss for loss, _ in losses])
        optimizer_step(total.sum(), optimizer, schedule, clip_norm=1.0, clip_sets=own)
        for layer in layers:
            layer.project_gain()
        read = torch.stack([total.detach(), torch.stack([nmse for _, nmse in losses])]).tolist()  # one read
        return [{"loss": loss, "nmse": nmse, "gain": mean_abs_gain(layer)}
                for layer, loss, nmse in zip(layers, *read)]

    return step
