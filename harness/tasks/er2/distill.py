"""Distilling one attention layer into an ER2 layer with the original transfer loss."""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from harness.measure.ranks import auroc
from harness.services.training_loop import optimizer_step
from harness.tasks.base import training_budget
from harness.tasks.er2.mechanism.er2 import ER2Layer, hard_error_mask

HARD_FRACTION = 0.25
HARD_BOOST = 3.0
# Weights of the original study's transfer loss; the error-directed terms apply when the layer has
# a residual memory, the code-space terms only in compressed mode (they are zero otherwise).
ERROR_DIRECTED_WEIGHTS = {
    "hard_teacher_nmse": 0.08,
    "residual_code_nmse": 0.25,
    "residual_reconstruction_nmse": 0.08,
    "gate_bce": 0.03,  # any learned gate (compressed, raw_gated)
    "orthogonality": 0.01,
}

Capture = dict[str, Tensor]  # q, k, v, the teacher's attention output "out"; optionally "answers" [B,T]


def at_answers(tensor: Tensor, answers: Tensor) -> Tensor:
    """[B,H,T,X] -> [1,H,N,X]: the N answer positions of the batch as one sequence, heads kept."""
    return tensor.transpose(1, 2)[answers].transpose(0, 1).unsqueeze(0)


def scored(parts: dict[str, Tensor | None], capture: Capture) -> tuple[dict[str, Tensor | None], Tensor]:
    """(parts, teacher output) where the layer is scored: every position, or only the answers when the
    capture marks them (recall distilled on what it is scored on, not on filler)."""
    teacher = capture["out"]
    if "answers" not in capture:
        return parts, teacher
    answers = capture["answers"]
    return ({name: None if part is None else at_answers(part, answers) for name, part in parts.items()},
            at_answers(teacher, answers))


def scored_outputs(layer: ER2Layer, capture: Capture) -> tuple[Tensor, dict, Tensor]:
    """(output, parts, teacher output) of the layer on the capture, where it is scored (``scored``)."""
    _, _, parts = layer.components(capture["q"], capture["k"], capture["v"])
    parts, teacher = scored(parts, capture)
    return parts["output"], parts, teacher


def output_nmse(prediction: Tensor, target: Tensor) -> Tensor:
    """Squared error relative to the target's energy: 1 means no better than predicting zero."""
    return (prediction - target).square().mean() / target.square().mean().clamp_min(1e-12)


def output_cosine(prediction: Tensor, target: Tensor) -> Tensor:
    """Mean cosine between predicted and teacher head outputs."""
    return F.cosine_similarity(prediction.float(), target.float(), dim=-1).mean()


def transfer_loss(layer: ER2Layer, capture: Capture) -> tuple[Tensor, Tensor]:
    """(loss, output NMSE): nmse + 0.1 (1 - cosine), plus the error-directed terms when the layer has a
    residual memory."""
    _, parts, teacher = scored_outputs(layer, capture)
    return loss_from_parts(layer, parts, teacher)


def loss_from_parts(layer: ER2Layer, parts: dict[str, Tensor | None], teacher: Tensor) -> tuple[Tensor, Tensor]:
    """``transfer_loss`` from a pass's scored parts (one seed's block of a seed batch's pass, too); the NMSE
    detached, read by the caller when it needs a number (on a GPU each read waits for the device)."""
    output = parts["output"]
    nmse = output_nmse(output, teacher)
    loss = nmse + 0.1 * (1.0 - output_cosine(output, teacher))
    if layer.residual is not None:
        losses = layer.error_directed_losses(parts, teacher, HARD_FRACTION, HARD_BOOST)
        for name, weight in ERROR_DIRECTED_WEIGHTS.items():
            loss = loss + weight * losses[name]
    return loss, nmse.detach()


def parameter_groups(layer: ER2Layer, lr: float, gain_lr_scale: float) -> list[dict]:
    """The residual gain in its own group at ``gain_lr_scale`` x ``lr``: it starts at zero and Adam moves
    a parameter by about lr per step, so at the shared rate it could not leave its start in the budget."""
    gain = [p for name, p in layer.named_parameters() if name == "residual_gain"]
    rest = [p for name, p in layer.named_parameters() if name != "residual_gain"]
    groups = [{"params": rest, "lr": lr}]
    if gain:
        groups.append({"params": gain, "lr": lr * gain_lr_scale})
    return groups


def mean_abs_gain(layer: ER2Layer) -> float:
    """Mean |residual gain| as applied (clamped); 0 without a residual memory."""
    if layer.residual_gain is None:
        return 0.0
    return float(layer.applied_gain().detach().abs().mean())


def budget_metrics(layer: ER2Layer, steps: float, batch: int) -> dict[str, float]:
    """The fair-arm facts of a distilled arm: the optimizer steps and sequences it trained on, and the
    fraction of its residual gains at or past the clamp, where they get no gradient (0 without a residual)."""
    at_bound = 0.0 if layer.residual_gain is None else float(layer.gain_at_bound().float().mean())
    return {**training_budget(steps, batch), "at_bound/gain": at_bound}


def distil_step(
    layer: ER2Layer, next_capture: Callable[[int], Capture], lr: float,
    rate: Callable[[int], float], gain_lr_scale: float = 1.0,
) -> Callable[[int], dict[str, float]]:
    """One update per call: AdamW (lr 2e-3 in the original) with the multiplier ``rate(step)``; the
    values returned (loss, nmse, mean |gain|) are the curves and what a stop rule watches. After each
    update the gain is put back inside its clamp, so a gain on the bound keeps its gradient."""
    optimizer = torch.optim.AdamW(parameter_groups(layer, lr, gain_lr_scale), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)

    def step(index: int) -> dict[str, float]:
        loss, nmse = transfer_loss(layer, next_capture(index))
        optimizer_step(loss, optimizer, schedule, clip_norm=1.0)
        layer.project_gain()
        return {"loss": float(loss.detach()), "nmse": float(nmse), "gain": mean_abs_gain(layer)}

    return step


def cosine(steps: int) -> Callable[[int], float]:
    """The original study's schedule: cosine decay over ``steps``."""
    return lambda step: 0.5 * (1 + math.cos(math.pi * step / steps))


@torch.no_grad()
def output_fidelity(output: Tensor, teacher: Tensor) -> dict[str, float]:
    """Output NMSE and cosine of any replacement's output against the teacher's."""
    return {"nmse": float(output_nmse(output, teacher)), "cosine": float(output_cosine(output, teacher))}


@torch.no_grad()
def fidelity(layer: ER2Layer, capture: Capture) -> dict[str, float]:
    """Output NMSE, cosine and the hard-position NMSE of a layer against the teacher's output."""
    output, parts, teacher = scored_outputs(layer, capture)
    losses = layer.error_directed_losses(parts, teacher, HARD_FRACTION, HARD_BOOST)
    scores = {
        **output_fidelity(output, teacher),
        "hard_teacher_nmse": float(losses["hard_teacher_nmse"]),
        "gate_mean": float(parts["gate"].mean()) if parts["gate"] is not None else 0.0,  # none: no correction
    }
    if layer.residual_gain is not None:
        gate = parts["gate"].squeeze(-1)  # [B,H,T]
        scores["effective_gain_abs_mean"] = float((layer.applied_gain().abs()[None, :, None] * gate).mean())
        if layer.gated:
            scores["gate_auroc"] = gate_auroc(gate, parts["base"], teacher)
    return scores


def gate_auroc(gate: Tensor, base: Tensor, teacher: Tensor) -> float:
    """How well the gate picks out the hard positions it is trained on (the base's worst quarter per head
    and sequence): AUROC of the gate against them, per head over every position, averaged over heads."""
    mask, _ = hard_error_mask(base, teacher, HARD_FRACTION)
    heads = [auroc(gate[:, h].flatten().double().cpu().numpy(), mask[:, h].flatten().cpu().numpy())
             for h in range(gate.shape[1])]
    return float(sum(heads) / len(heads))
