"""ER2: a Conv4 PDelta2 base memory plus a secondary "Residual16" memory that corrects its error.

``compressed`` (the mechanism) projects the residual read-out onto a learned rank-R basis per
query head and scales it by a query gate trained to predict where the teacher error is large.
``raw`` (the control) adds the residual read-out as is: same state bytes, no basis, no gate.
``none`` keeps the base memory only. ``gate_mode`` crosses the two for ablations: ``one`` fixes
compressed's gate at 1, ``learned`` gives raw the query gate. Parameter names follow the research seed so checkpoints
interchange. Persistent memories may be stored in fp16 between calls; curvature stays fp32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.tasks.er2.mechanism.er import (
    causal_value_conv_stream,
    initialize_retention_spectrum,
    retention_half_lives,
)
from harness.tasks.er2.mechanism.features import ER2Core, PDeltaState

RESIDUAL_MODES = ("none", "raw", "compressed")
GATE_MODES = ("learned", "one")
STATE_DTYPES = {"fp16": torch.float16, "fp32": torch.float32}
GAIN_LIMIT = 1.5  # the seed's clamp on the residual gain
INITIAL_GATE = 0.2  # prior probability that a position needs the correction


@dataclass
class ER2State:
    """Everything carried between streaming calls."""

    base: PDeltaState
    residual: PDeltaState | None = None
    conv_tail: Tensor | None = None


def hard_error_mask(base: Tensor, target: Tensor, fraction: float = 0.25) -> tuple[Tensor, Tensor]:
    """Per head, mark the ``fraction`` of positions where the base output misses the teacher most.

    Returns (mask, squared error), both [B,H,T]; gradients never flow through the selection.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0,1), got {fraction}")
    error = (target.detach() - base.detach()).square().mean(dim=-1)
    cutoff = torch.quantile(error, 1.0 - fraction, dim=-1, keepdim=True)
    return error >= cutoff, error


def normalized_hard_weights(mask: Tensor, boost: float = 3.0) -> Tensor:
    """1 + boost on hard positions, rescaled to mean one over (H,T) so the loss scale is unchanged."""
    if boost < 0:
        raise ValueError(f"boost must be non-negative, got {boost}")
    weights = 1.0 + boost * mask.to(torch.float32)
    return weights / weights.mean(dim=(-1, -2), keepdim=True).clamp_min(1e-8)


def _masked_nmse(prediction: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Squared error over masked rows relative to the target's energy there."""
    return ((prediction - target).square() * mask).sum() / (target.square() * mask).sum().clamp_min(1e-8)


class ER2Layer(nn.Module):
    """Drop-in replacement for one attention layer: (q, k, v) -> output [B,Hq,T,D], bounded state."""

    def __init__(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        feature_dim: int = 96,
        residual_dim: int = 16,
        code_rank: int = 8,
        chunk_size: int = 32,
        conv_kernel: int = 4,
        retention_spectrum: bool = True,
        retention_min: float = 8.0,
        retention_max: float = 4096.0,
        residual_mode: str = "compressed",
        state_dtype: str = "fp16",
        gate_mode: str | None = None,
        gain_limit: float = GAIN_LIMIT,
        gate_init: float = INITIAL_GATE,
    ):
        super().__init__()
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
        if residual_mode not in RESIDUAL_MODES:
            raise ValueError(f"unknown residual_mode {residual_mode!r}; valid: {', '.join(RESIDUAL_MODES)}")
        if state_dtype not in STATE_DTYPES:
            raise ValueError(f"unknown state_dtype {state_dtype!r}; valid: {', '.join(STATE_DTYPES)}")
        if conv_kernel < 1 or residual_dim < 0:
            raise ValueError(f"conv_kernel ({conv_kernel}) must be >= 1 and residual_dim ({residual_dim}) >= 0")
        if residual_mode == "compressed" and not 1 <= code_rank <= head_dim:
            raise ValueError(f"compressed mode needs 1 <= code_rank ({code_rank}) <= head_dim ({head_dim})")
        if gate_mode is not None and gate_mode not in GATE_MODES:
            raise ValueError(f"unknown gate_mode {gate_mode!r}; valid: {', '.join(GATE_MODES)}")
        if residual_mode == "none" and gate_mode is not None:
            raise ValueError("residual_mode 'none' has no residual correction to gate: leave gate_mode unset")
        if not (math.isfinite(gain_limit) and gain_limit > 0):
            raise ValueError(f"gain_limit must be a finite positive bound on |residual gain|, got {gain_limit}")
        if not 0.0 < gate_init < 1.0:
            raise ValueError(f"gate_init is the learned gate's starting probability, in (0, 1), got {gate_init}")
        if residual_mode == "none":
            residual_dim, code_rank = 0, 0
        if gate_mode is None and residual_mode != "none":
            gate_mode = "learned" if residual_mode == "compressed" else "one"

        self.num_heads = int(num_heads)
        self.num_kv_heads = int(num_kv_heads)
        self.head_dim = int(head_dim)
        self.feature_dim = int(feature_dim)
        self.residual_dim = int(residual_dim)
        self.code_rank = int(code_rank)
        self.chunk_size = int(chunk_size)
        self.conv_kernel = int(conv_kernel)
        self.retention_spectrum = bool(retention_spectrum)
        self.retention_min = float(retention_min)
        self.retention_max = float(retention_max)
        self.residual_mode = residual_mode
        self.state_dtype = state_dtype
        self.gate_mode = gate_mode
        self.gain_limit = float(gain_limit)
        self.gate_init = float(gate_init)
        self.groups = self.num_heads // self.num_kv_heads

        # Construction order matters: it fixes which random draws initialise which tensor.
        self.base = self._core(self.feature_dim, self.retention_min, self.retention_max)
        if self.conv_kernel > 1:
            identity = torch.zeros(self.num_kv_heads * self.head_dim, 1, self.conv_kernel)
            identity[:, 0, -1] = 1.0  # starts as a pass-through of the current value
            self.conv_weight = nn.Parameter(identity)
        else:
            self.register_parameter("conv_weight", None)

        if self.residual_dim:
            self.residual = self._core(self.residual_dim, max(4.0, self.retention_min / 2.0), 2.0 * self.retention_max)
            self.residual_gain = nn.Parameter(torch.zeros(self.num_heads))  # zero: adding it changes nothing
        else:
            self.residual = None
            self.register_parameter("residual_gain", None)

        if self.residual_mode == "compressed":
            basis = torch.empty(self.num_heads, self.code_rank, self.head_dim)
            for head in range(self.num_heads):
                nn.init.orthogonal_(basis[head])
            self.residual_basis = nn.Parameter(basis)
        else:
            self.register_parameter("residual_basis", None)
        if self.residual_dim and self.gate_mode == "learned":
            self.error_gate_w = nn.Parameter(torch.zeros(self.num_heads, self.head_dim))
            self.error_gate_b = nn.Parameter(torch.full((self.num_heads,), math.log(self.gate_init / (1 - self.gate_init))))
        else:
            for name in ("error_gate_w", "error_gate_b"):
                self.register_parameter(name, None)

    def _core(self, feature_dim: int, retention_min: float, retention_max: float) -> ER2Core:
        core = ER2Core(
            self.num_heads, self.num_kv_heads, self.head_dim, feature_dim=feature_dim, chunk_size=self.chunk_size
        )
        if self.retention_spectrum:
            initialize_retention_spectrum(core, retention_min, retention_max)
        return core

    @property
    def config(self) -> dict[str, Any]:
        """Constructor arguments that rebuild this layer."""
        names = (
            "num_heads", "num_kv_heads", "head_dim", "feature_dim", "residual_dim", "code_rank", "chunk_size",
            "conv_kernel", "retention_spectrum", "retention_min", "retention_max", "residual_mode", "state_dtype",
            "gate_mode", "gain_limit", "gate_init",
        )
        return {name: getattr(self, name) for name in names}

    @property
    def storage_dtype(self) -> torch.dtype:
        return STATE_DTYPES[self.state_dtype]

    # --- the low-rank code space (compressed mode) ---
    def normalized_basis(self) -> Tensor | None:
        return None if self.residual_basis is None else F.normalize(self.residual_basis.float(), dim=-1)

    def _require_basis(self) -> Tensor:
        basis = self.normalized_basis()
        if basis is None:
            raise RuntimeError("the residual code space exists only in compressed residual mode")
        return basis

    def project_to_code(self, x: Tensor) -> Tensor:
        return torch.einsum("bhtd,hrd->bhtr", x.float(), self._require_basis())

    def reconstruct_code(self, code: Tensor) -> Tensor:
        return torch.einsum("bhtr,hrd->bhtd", code.float(), self._require_basis())

    def project_vector(self, x: Tensor) -> Tensor:
        return self.reconstruct_code(self.project_to_code(x))

    def orthogonality_penalty(self) -> Tensor:
        basis = self.normalized_basis()
        if basis is None:
            return torch.zeros((), device=self.base.wq.device)
        gram = basis @ basis.transpose(-1, -2)
        return (gram - torch.eye(self.code_rank, device=gram.device, dtype=gram.dtype)).square().mean()

    @property
    def gated(self) -> bool:
        """True when a learned query gate scales the correction (compressed by default, raw_gated)."""
        return self.error_gate_w is not None

    def predicted_error_gate(self, q: Tensor) -> Tensor:
        """Probability [B,H,T] that the base output needs the correction (ones without a learned gate)."""
        if not self.gated:
            return q.new_ones(q.shape[:3])
        logits = torch.einsum("bhtd,hd->bht", F.normalize(q.float(), dim=-1), self.error_gate_w.float())
        return (logits + self.error_gate_b.float()[None, :, None]).sigmoid()

    def applied_gain(self) -> Tensor:
        """The residual gain as the correction uses it, within +-gain_limit (the seed's clamp)."""
        return self.residual_gain.clamp(-self.gain_limit, self.gain_limit)

    @torch.no_grad()
    def project_gain(self) -> None:
        """Put the gain parameter back inside the clamp after an update. Past the clamp it would get no
        gradient and stay stuck there; on the bound it still moves back in when the loss asks."""
        if self.residual_gain is not None:
            self.residual_gain.clamp_(-self.gain_limit, self.gain_limit)

    def gain_at_bound(self) -> Tensor:
        """Per head, whether the gain parameter is at (or past) the clamp."""
        return self.residual_gain.detach().abs() >= self.gain_limit * (1 - 1e-6)

    # --- state handling ---
    def _working_state(self, state: PDeltaState | None, core: ER2Core) -> PDeltaState | None:
        if state is None:
            return None
        return PDeltaState(state.memory.to(core.wq.dtype), state.curvature.to(core.wq.dtype))

    def _stored_state(self, state: PDeltaState) -> PDeltaState:
        return PDeltaState(state.memory.to(self.storage_dtype), state.curvature.float())

    # --- forward ---
    def _residual_correction(self, q: Tensor, residual_raw: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(projected read-out, gate [B,H,T,1], correction added to the base output)."""
        gain = self.applied_gain()[None, :, None, None]
        projected = self.project_vector(residual_raw) if self.residual_mode == "compressed" else residual_raw
        if self.gated:
            gate = self.predicted_error_gate(q).unsqueeze(-1)
            return projected, gate, gain * gate * projected
        gate = residual_raw.new_ones(residual_raw.shape[:-1] + (1,))
        return projected, gate, gain * projected

    def _run(self, q: Tensor, k: Tensor, v: Tensor, state: ER2State | None):
        base_in, residual_in, tail_in = (None, None, None) if state is None else (
            state.base, state.residual, state.conv_tail
        )
        filtered_v, new_tail = causal_value_conv_stream(v.float(), self.conv_weight, tail_in)
        base_out, base_state = self.base(
            q, k, filtered_v, state=self._working_state(base_in, self.base), return_state=True
        )
        parts: dict[str, Tensor | None] = {
            "base": base_out, "residual_raw": None, "residual_projected": None, "gate": None, "output": base_out,
        }
        residual_state = None
        if self.residual is not None:
            residual_raw, residual_state = self.residual(
                q, k, v.float(), state=self._working_state(residual_in, self.residual), return_state=True
            )
            projected, gate, correction = self._residual_correction(q, residual_raw)
            parts.update(residual_raw=residual_raw, residual_projected=projected, gate=gate, output=base_out + correction)
        return parts["output"], self._new_state(base_state, residual_state, new_tail), parts

    def _new_state(self, base: PDeltaState, residual: PDeltaState | None, tail: Tensor | None) -> ER2State:
        return ER2State(
            base=self._stored_state(base),
            residual=None if residual is None else self._stored_state(residual),
            conv_tail=None if tail is None else tail.to(self.storage_dtype),
        )

    def components(self, q: Tensor, k: Tensor, v: Tensor, state: ER2State | None = None):
        """(output, new state, parts): parts holds base, residual_raw, residual_projected, gate, output."""
        return self._run(q, k, v, state)

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        state: ER2State | None = None,
        return_state: bool = False,
        implementation: str = "chunk",
    ):
        if implementation != "chunk":
            raise ValueError(f"unknown implementation {implementation!r}; valid: chunk")
        output, new_state, _ = self._run(q, k, v, state)
        return (output, new_state) if return_state else output

    # --- training losses ---
    def auxiliary_losses(
        self, q: Tensor, k: Tensor, v: Tensor, teacher: Tensor, hard_fraction: float = 0.25, hard_boost: float = 3.0
    ) -> dict[str, Tensor]:
        """Teacher-error-directed losses (training only), from a fresh-state pass."""
        _, _, parts = self._run(q, k, v, None)
        return self.error_directed_losses(parts, teacher, hard_fraction, hard_boost)

    def error_directed_losses(
        self, parts: dict[str, Tensor | None], teacher: Tensor, hard_fraction: float = 0.25, hard_boost: float = 3.0
    ) -> dict[str, Tensor]:
        """The auxiliary losses from an existing pass's parts, so training needs one forward, not two."""
        output, base = parts["output"], parts["base"]
        teacher = teacher.detach()
        mask, error = hard_error_mask(base, teacher, hard_fraction)
        weights = normalized_hard_weights(mask, hard_boost).to(output.device).unsqueeze(-1)
        hard_teacher_nmse = ((output - teacher).square() * weights).mean() / (
            (teacher.square() * weights).mean().clamp_min(1e-8)
        )
        losses = {
            "hard_teacher_nmse": hard_teacher_nmse,
            "hard_fraction_observed": mask.float().mean(),
            "teacher_error_mean": error.mean(),
            "hard_error_mean": error[mask].mean(),
            "easy_error_mean": error[~mask].mean(),
        }
        zero = hard_teacher_nmse.new_zeros(())
        if self.residual is None:
            losses.update(residual_code_nmse=zero, residual_reconstruction_nmse=zero, gate_bce=zero, orthogonality=zero)
            return losses

        missing = teacher - base.detach()  # what the residual memory should supply
        hard = mask.unsqueeze(-1).to(missing.dtype)
        if self.residual_mode == "compressed":
            target_code = self.project_to_code(missing)
            losses["residual_code_nmse"] = _masked_nmse(
                self.project_to_code(parts["residual_raw"]), target_code, mask.unsqueeze(-1).to(target_code.dtype)
            )
            losses["residual_reconstruction_nmse"] = _masked_nmse(self.reconstruct_code(target_code), missing, hard)
            losses["orthogonality"] = self.orthogonality_penalty()
        else:
            losses["residual_code_nmse"] = _masked_nmse(parts["residual_raw"], missing, hard)
            losses.update(residual_reconstruction_nmse=zero, orthogonality=zero)
        losses["gate_bce"] = self._gate_bce(parts["gate"], mask) if self.gated else zero
        return losses

    @staticmethod
    def _gate_bce(gate: Tensor, mask: Tensor) -> Tensor:
        """The gate's own signal: predict the hard positions (the base's worst quarter per head)."""
        gate = gate.squeeze(-1).clamp(1e-5, 1 - 1e-5)
        return F.binary_cross_entropy(gate, mask.to(gate.dtype))

    # --- accounting ---
    def recurrent_state_bytes(self, batch_size: int = 1, context: int | None = None) -> int:
        """Bytes carried between calls; independent of context (and of code_rank)."""
        del context
        memory_bytes = self.storage_dtype.itemsize
        curvature_bytes = 4
        kv, d = self.num_kv_heads, self.head_dim
        total = kv * self.feature_dim * (d * memory_bytes + curvature_bytes)
        total += kv * self.residual_dim * (d * memory_bytes + curvature_bytes)
        if self.conv_kernel > 1:
            total += (self.conv_kernel - 1) * kv * d * memory_bytes
        return batch_size * total

    def retention_statistics(self) -> dict[str, float]:
        """Half-life spread of each memory, mean |residual gain| and the gate's prior mean."""
        stats: dict[str, float] = {}
        cores = [("base", self.base)] + ([("residual", self.residual)] if self.residual is not None else [])
        for label, core in cores:
            half_lives = retention_half_lives(core).float().reshape(-1)
            stats[f"{label}_half_life_min"] = float(half_lives.min())
            stats[f"{label}_half_life_median"] = float(half_lives.median())
            stats[f"{label}_half_life_max"] = float(half_lives.max())
        if self.residual_gain is not None:
            stats["residual_gain_abs_mean"] = float(self.residual_gain.detach().abs().mean())
        if self.gated:
            stats["predicted_gate_mean"] = float(self.error_gate_b.detach().sigmoid().mean())
        return stats
