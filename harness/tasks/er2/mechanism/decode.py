"""ER2 decode: one token at a time from the carried state, the path a served model runs.

The eager step (tensor ops, any device) is the reference; on the CPU the same step runs as one C
call (``ops.fused_decode``) wherever the kernel builds, and the tests hold the two to each other and
to the layer's chunked forward.
"""
from __future__ import annotations

import torch
from torch import Tensor

from harness.tasks.er2.mechanism.er import causal_value_conv_step, value_conv_taps
from harness.tasks.er2.mechanism.er2 import ER2State, ER2Layer
from harness.tasks.er2.mechanism.features import CoreDecoder, PDeltaState
from harness.tasks.er2.mechanism.ops.fused_decode import (
    FusedDecodeStep,
    KernelUnavailable,
    load_kernel,
)


GATE_ONE_LOGIT = 1e4  # sigmoid(1e4) == 1.0 exactly in float32: a gate fixed at one


class ER2Decoder:
    """Decode for an ER2 layer: each token updates the carried state directly, with no chunk machinery.

    Equals the layer's ``forward`` on the same token and state. Built once per decode loop from frozen
    weights (inference only: no gradients), so each step is a few dozen small kernels (decode is bound
    by per-op overhead): the base and residual cores run as one stacked ``CoreDecoder``, one weighted
    sum gives the filtered value (base) and the raw one (residual), and the residual gain, the rank-R
    projector B^T B scaled by it and the gate weights are computed here, not per token. On the CPU
    the whole step is one call of a C kernel (``fused_decode``) wherever it can be built; ``kernel``
    says which step runs and ``kernel_unavailable`` why the fused one does not. The eager step runs
    in ``torch.inference_mode`` (a fifth less overhead per kernel). Either way the outputs are for
    further decode steps or no-grad code, never autograd. It never modifies the state it is given:
    a caller may keep an old state and decode from it again.
    """

    @torch.no_grad()
    def __init__(self, layer: ER2Layer, fused: bool | None = None):
        self.layer = layer
        self.cores = CoreDecoder([layer.base] if layer.residual is None else [layer.base, layer.residual])
        self.taps = value_conv_taps(
            layer.conv_weight, layer.num_kv_heads, layer.head_dim, layer.residual is not None, layer.base.wq.device
        )
        self.gain = None if layer.residual_gain is None else layer.applied_gain()[:, None, None]  # [Hq, 1, 1]
        self.projector, self.gate_weight, self.gate_bias = self._gated_correction(layer)
        mode = "compressed" if self.projector is not None else layer.residual_mode
        self.fused, self.kernel_unavailable = None, None
        if fused is not False:
            try:
                if not FusedDecodeStep.fits(self.cores):
                    raise KernelUnavailable("the fused kernel takes float32 CPU cores within its size limits")
                self.fused = FusedDecodeStep(
                    load_kernel(), self.cores, self.taps, mode, layer.storage_dtype,
                    self.gain if mode == "raw" else None, self.projector, self.gate_weight,
                    self.gate_bias,
                )
            except KernelUnavailable as error:
                if fused:
                    raise
                self.kernel_unavailable = str(error)

    def _gated_correction(self, layer: ER2Layer):
        """(gain x projector [Hq,D,D], gate weight [Hq,1,D], gate bias [Hq,1]) of the projected-and-gated
        step, or Nones when the correction is the plain gained read-out (raw, gate one). The ablations
        map onto that one step: raw with a learned gate projects by the identity; compressed with the
        gate fixed at one gets zero gate weights and a bias whose sigmoid is exactly 1 in float32."""
        if layer.residual_gain is None or not (layer.residual_mode == "compressed" or layer.gated):
            return None, None, None
        basis = layer.normalized_basis()  # [Hq, R, D]
        eye = torch.eye(layer.head_dim, device=self.gain.device).expand(layer.num_heads, -1, -1)
        projector = self.gain * (eye if basis is None else basis.mT @ basis)  # gain B^T B, [Hq, D, D]
        if layer.gated:
            return projector, layer.error_gate_w.float().unsqueeze(1), layer.error_gate_b.float()[:, None]
        weight = torch.zeros(layer.num_heads, 1, layer.head_dim, device=self.gain.device)
        return projector, weight, torch.full((layer.num_heads, 1), GATE_ONE_LOGIT, device=self.gain.device)

    @property
    def kernel(self) -> str:
        """``fused`` (the C kernel) or ``eager`` (tensor ops): the step that ``step`` runs."""
        return "eager" if self.fused is None else "fused"

    def step(self, q: Tensor, k: Tensor, v: Tensor, state: ER2State | None = None) -> tuple[Tensor, ER2State]:
        """q [B,Hq,1,D], k/v [B,Hkv,1,D] -> (output [B,Hq,1,D], new state)."""
        batch, layer, cores = q.shape[0], self.layer, self.cores
        kv_shape = (batch, layer.num_kv_heads, 1, layer.head_dim)
        if q.shape != (batch, layer.num_heads, 1, layer.head_dim) or k.shape != kv_shape or v.shape != kv_shape:
            raise ValueError(f"step takes one token: q [B,{layer.num_heads},1,{layer.head_dim}], k and v "
                             f"[B,{layer.num_kv_heads},1,{layer.head_dim}]; got q {tuple(q.shape)}, "
                             f"k {tuple(k.shape)}, v {tuple(v.shape)}")
        if state is None:
            core_states, tail = cores.fresh_states(k.shape[0], v.shape[-1], k.device), None
        else:
            core_states, tail = [state.base] + ([] if state.residual is None else [state.residual]), state.conv_tail
        if self.fused is not None:
            output, memories, curvatures, new_tail = self.fused(
                q, k, v, [s.memory for s in core_states], [s.curvature for s in core_states], tail
            )
            stored = [PDeltaState(m, c) for m, c in zip(memories, curvatures)]
            return output, ER2State(base=stored[0], residual=stored[1] if len(stored) > 1 else None, conv_tail=new_tail)
        return self._eager_step(q, k, v, core_states, tail)

    @torch.inference_mode()
    def _eager_step(self, q: Tensor, k: Tensor, v: Tensor, core_states: list[PDeltaState],
                    tail: Tensor | None) -> tuple[Tensor, ER2State]:
        """The reference step in tensor ops (any device); the fused kernel is held to it."""
        layer, cores = self.layer, self.cores
        values, new_tail = causal_value_conv_step(v, self.taps, tail)  # [B, Hkv, C, D]: filtered, raw
        qn, kn, vn = cores.normalize(q, k, values)
        reads, stored = cores.step(qn, kn, values, vn, core_states, layer.storage_dtype)
        output = reads[:, :, :1]
        if self.projector is not None:
            gate = (torch.linalg.vecdot(qn.float(), self.gate_weight) + self.gate_bias).sigmoid_()  # [B, Hq, 1]
            output = torch.addcmul(output, gate.unsqueeze(-1), reads[:, :, 1:] @ self.projector)
        elif self.gain is not None:
            output = torch.addcmul(output, self.gain, reads[:, :, 1:])
        stored = [PDeltaState(s.memory, s.curvature.float()) for s in stored]
        return output, ER2State(
            base=stored[0],
            residual=stored[1] if len(stored) > 1 else None,
            conv_tail=None if new_tail is None else new_tail.to(layer.storage_dtype),
        )
