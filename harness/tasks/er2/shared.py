"""What every arm of a seed computes alike, built once per seed through the cache service.

The first arm of a seed that needs one of these builds it and the seed's other arms load it: the
teacher's capture of the distillation pool (a teacher pass over hundreds of sequences) and, at each
evaluation context, the reference scores every arm is paired with (the teacher's own, and the LM's
with the probe layer zeroed). A loaded value holds the very numbers the first arm computed, so every
arm's metrics are bit for bit what computing these in each trial gives.

Each artifact's identity names the teacher by a digest of its weights, so a teacher trained (or set)
otherwise can never meet another teacher's captures or scores.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor, nn

from harness.tasks.base import TrialContext
from harness.tasks.er2.distill import Capture
from harness.tasks.er2.teacher import Mixer, zero_layer
from harness.tasks.er2.workloads import SwapComparison, Workload, capture


def tensor_digest(*tensors: Tensor) -> str:
    """sha256 over the dtypes, shapes and bytes of these tensors, in order."""
    digest = hashlib.sha256()
    for tensor in tensors:
        data = tensor.detach().cpu().contiguous()
        digest.update(f"{data.dtype}{tuple(data.shape)}".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def weights_digest(model: nn.Module) -> str:
    """The teacher's identity: a digest of its state dict (names, dtypes, shapes and values)."""
    state = model.state_dict()
    names = sorted(state)
    return hashlib.sha256("".join(names).encode() + tensor_digest(*(state[name] for name in names)).encode()).hexdigest()


def pool_capture(ctx: TrialContext, teacher: nn.Module, tokens: Tensor) -> Capture:
    """The teacher's probe-layer capture of the distillation pool, keyed by the teacher and the pool's tokens."""
    identity = {"teacher": weights_digest(teacher), "tokens": tensor_digest(tokens)}
    return ctx.cached("pool-capture", identity, lambda: capture(teacher, tokens.to(ctx.device)))


def zeroed_reference(
    ctx: TrialContext, workload: Workload, workload_params: dict[str, Any], teacher: nn.Module, context: int,
    documents: int,
) -> SwapComparison:
    """The teacher's scores and the zeroed layer's on ``context``'s evaluation sequences (the seed's
    ``swap-eval`` stream, the same for every arm)."""
    identity = {"teacher": weights_digest(teacher), "workload": workload_params, "data": workload.data_id,
                "context": context, "documents": documents}

    def build() -> dict[str, list]:
        return asdict(workload.swapped_comparison(teacher, zero_layer, context, documents, ctx.device,
                                                  ctx.stream("swap-eval", context)))

    return ctx.cached(f"reference-{context}", identity, build, restore=lambda payload: SwapComparison(**payload))


def arm_comparison(
    ctx: TrialContext, workload: Workload, teacher: nn.Module, mixer: Mixer | None, reference: SwapComparison,
    context: int, documents: int,
) -> SwapComparison:
    """An arm's scores beside the teacher's from ``reference``: the unchanged LM (``mixer`` None) and the
    zeroed layer are the reference's own, any other layer is run on the same sequences."""
    if mixer is zero_layer:
        return reference
    if mixer is None:
        return SwapComparison(documents=reference.documents, teacher_nll=reference.teacher_nll,
                              layer_nll=reference.teacher_nll, teacher_recall=reference.teacher_recall,
                              layer_recall=reference.teacher_recall, guess_recall=reference.guess_recall)
    return workload.swapped_comparison(teacher, mixer, context, documents, ctx.device, ctx.stream("swap-eval", context),
                                       reference=reference)
