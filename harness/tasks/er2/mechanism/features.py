"""PDelta2 core: feature maps, the curvature key preconditioner and the delta memory around them.

Shapes: q [B,Hq,T,D]; k, v [B,Hkv,T,D]; F feature dim. The persistent state is the delta memory
[B,Hkv,F,D] plus the preconditioner's running key curvature [B,Hkv,F].
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.tasks.er2.mechanism.ops.chunk import delta_recurrence, precondition_chunked
from harness.tasks.er2.mechanism.ops.common import (
    DENOMINATOR_FLOOR,
    check_chunk_size,
    curvature_scaling,
)

NORMALIZE_EPS = 1e-12  # F.normalize's default


@dataclass
class PDeltaState:
    """What a PDelta2 core carries between calls."""

    memory: Tensor  # [B, Hkv, F, D]
    curvature: Tensor  # [B, Hkv, F]


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


class ER2Core(nn.Module):
    """Normalised feature maps, gated erase/write and preconditioned keys feeding a delta memory."""

    def __init__(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        feature_dim: int = 96,
        chunk_size: int = 32,
        forget_bias: float | None = None,
    ):
        super().__init__()
        if num_heads < 1 or num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(
                f"num_heads ({num_heads}) must be a positive multiple of num_kv_heads ({num_kv_heads})"
            )
        if head_dim < 1 or feature_dim < 1:
            raise ValueError(f"head_dim ({head_dim}) and feature_dim ({feature_dim}) must be positive")
        self.num_heads = int(num_heads)
        self.num_kv_heads = int(num_kv_heads)
        self.head_dim = int(head_dim)
        self.feature_dim = int(feature_dim)
        self.chunk_size = check_chunk_size(chunk_size)
        self.groups = self.num_heads // self.num_kv_heads
        kv, f, d = self.num_kv_heads, self.feature_dim, self.head_dim

        key_map = torch.empty(kv, f, d)
        for head in range(kv):
            if f == d:
                key_map[head] = torch.eye(d)
            else:
                nn.init.orthogonal_(key_map[head])
        self.wk = nn.Parameter(key_map)
        self.wq = nn.Parameter(key_map.repeat_interleave(self.groups, dim=0).clone())
        self.forget_w = nn.Parameter(torch.zeros(kv, f, d))
        self.forget_b = nn.Parameter(torch.full((kv, f), _logit(0.04) if forget_bias is None else float(forget_bias)))
        self.erase_w = nn.Parameter(torch.zeros(kv, f, d))
        self.erase_b = nn.Parameter(torch.full((kv, f), -1.0))
        self.write_w = nn.Parameter(torch.zeros(kv, d, d))
        self.write_b = nn.Parameter(torch.full((kv, d), -1.0))
        self.pre_log_decay = nn.Parameter(torch.full((kv, f), math.log(0.995)))
        self.pre_gain_logit = nn.Parameter(torch.full((kv, f), _logit(0.12)))
        self.pre_range_raw = nn.Parameter(torch.zeros(kv, 1))
        self.pre_center = nn.Parameter(torch.zeros(kv, 1))
        self.log_gain = nn.Parameter(torch.zeros(self.num_heads))

    def precondition_parameters(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(alpha, beta, log_x, center): curvature decay, gain, scaling range and centre."""
        alpha = self.pre_log_decay.clamp(math.log(0.98), math.log(0.9999)).exp()
        beta = self.pre_gain_logit.sigmoid()
        log_x = math.log(2.0) + self.pre_range_raw.sigmoid() * (math.log(8.0) - math.log(2.0))
        return alpha, beta, log_x, self.pre_center

    def fresh_state(self, batch: int, value_dim: int, device: torch.device, dtype: torch.dtype) -> PDeltaState:
        """Empty memory and unit curvature."""
        kv, f = self.num_kv_heads, self.feature_dim
        return PDeltaState(
            memory=torch.zeros(batch, kv, f, value_dim, device=device, dtype=dtype),
            curvature=torch.ones(batch, kv, f, device=device, dtype=dtype),
        )

    def _check_inputs(self, q: Tensor, k: Tensor, v: Tensor) -> None:
        b, t = k.shape[0], k.shape[2] if k.ndim == 4 else -1
        if (
            q.ndim != 4
            or k.shape != (b, self.num_kv_heads, t, self.head_dim)
            or q.shape != (b, self.num_heads, t, self.head_dim)
            or v.shape[:3] != (b, self.num_kv_heads, t)
        ):
            raise ValueError(
                f"expected q [B,{self.num_heads},T,{self.head_dim}], k [B,{self.num_kv_heads},T,{self.head_dim}], "
                f"v [B,{self.num_kv_heads},T,Dv]; got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
            )

    def features(self, q: Tensor, k: Tensor, v: Tensor) -> dict[str, Tensor]:
        """Query/key features, erase vectors, per-feature log decay and gated write values."""
        dtype = self.wq.dtype
        qn = F.normalize(q.to(dtype), dim=-1)
        kn = F.normalize(k.to(dtype), dim=-1)
        v = v.to(dtype)
        qp = F.normalize(torch.einsum("hfd,bhtd->bhtf", self.wq, qn), dim=-1)
        kp = F.normalize(torch.einsum("hfd,bhtd->bhtf", self.wk, kn), dim=-1)
        forget = torch.einsum("hfd,bhtd->bhtf", self.forget_w, kn) + self.forget_b[None, :, None]
        erase_gate = torch.einsum("hfd,bhtd->bhtf", self.erase_w, kn) + self.erase_b[None, :, None]
        write_gate = torch.einsum("hed,bhtd->bhte", self.write_w, F.normalize(v, dim=-1)) + self.write_b[None, :, None]
        return {
            "q": qp,
            "k": kp,
            "log_decay": -0.25 * forget.sigmoid(),
            "erase": kp * erase_gate.sigmoid(),
            "z": v * write_gate.sigmoid(),
        }

    def forward(
        self, q: Tensor, k: Tensor, v: Tensor, state: PDeltaState | None = None, return_state: bool = False
    ):
        self._check_inputs(q, k, v)
        feats = self.features(q, k, v)
        if state is None:
            state = self.fresh_state(k.shape[0], v.shape[-1], k.device, self.wq.dtype)
        keys, curvature = precondition_chunked(
            feats["k"], state.curvature, *self.precondition_parameters(), chunk_size=self.chunk_size
        )
        output, memory = delta_recurrence(
            feats["q"], keys, feats["z"], feats["erase"], feats["log_decay"], state.memory, self.groups, self.chunk_size
        )
        output = output * self.log_gain.clamp(-4.0, 4.0).exp()[None, :, None, None]
        if return_state:
            return output, PDeltaState(memory, curvature)
        return output

    def decoder(self) -> "CoreDecoder":
        """The one-token step with everything that depends only on the weights computed once."""
        return CoreDecoder([self])

    @torch.inference_mode()
    def step(self, q: Tensor, k: Tensor, v: Tensor, state: PDeltaState | None = None) -> tuple[Tensor, PDeltaState]:
        """Decode one token, q [B,Hq,D], k/v [B,Hkv,D], to inference tensors (see ``CoreDecoder``)."""
        self._check_inputs(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2))
        decoder, values = self.decoder(), v.unsqueeze(2)
        states = decoder.fresh_states(k.shape[0], v.shape[-1], k.device) if state is None else [state]
        qn, kn, vn = decoder.normalize(q.unsqueeze(2), k.unsqueeze(2), values)
        reads, new_states = decoder.step(qn, kn, values, vn, states)
        return reads[:, :, 0], new_states[0]

    def recurrent_state_bytes(self, batch_size: int = 1) -> int:
        """Memory plus curvature at the parameter dtype."""
        per_row = self.num_kv_heads * self.feature_dim * self.head_dim + self.num_kv_heads * self.feature_dim
        return int(batch_size) * per_row * self.wq.element_size()


class CoreDecoder:
    """One token of one or more PDelta2 cores that read the same q and k, from their carried states.

    The same features and delta step as the chunked forward at T=1, with no chunk machinery. Decode
    is bound by per-op overhead, not FLOPs, so the cores run as one: their features lie side by side
    (F_total per KV head, core c's memory rows a contiguous block), the sums that stay within one core
    (normalisations, the preconditioner's denominator, the erase and query reads) are matmuls with a
    one-hot core membership, and every weight-only term (stacked projections, preconditioner constants,
    output gains) is computed here once. The memory is updated in place in a working buffer the decoder
    owns (fresh buffers per token made decode allocation-bound), so a decoder is for inference from
    frozen weights, one decode loop at a time; callers run ``step`` in ``torch.inference_mode``. It
    never modifies the states it is given.
    """

    @torch.no_grad()
    def __init__(self, cores: Sequence[ER2Core]):
        first = cores[0]
        if any((c.num_heads, c.num_kv_heads, c.head_dim) != (first.num_heads, first.num_kv_heads, first.head_dim)
               for c in cores):
            raise ValueError("stacked cores must share num_heads, num_kv_heads and head_dim")
        self.num_heads, self.groups, self.dtype = first.num_heads, first.groups, first.wq.dtype
        self.sizes = [c.feature_dim for c in cores]
        sizes = torch.tensor(self.sizes, device=first.wq.device)
        core_of_feature = torch.arange(len(cores), device=first.wq.device).repeat_interleave(sizes)
        self.membership = F.one_hot(core_of_feature, len(cores)).transpose(0, 1).to(self.dtype)  # [C, F_total]
        self.membership_t = self.membership.transpose(0, 1).contiguous()  # [F_total, C]
        self.query_maps = torch.cat([c.wq for c in cores], dim=1).mT.contiguous()  # [Hq, D, F_total]
        # Key, forget and erase projections in one matmul: [Hkv, D, 3 F_total] plus a bias [Hkv, 1, 3 F_total].
        self.key_maps = torch.cat(
            [torch.cat([getattr(c, name) for c in cores], dim=1) for name in ("wk", "forget_w", "erase_w")], dim=1
        ).mT.contiguous()
        forget_b = torch.cat([c.forget_b for c in cores], dim=1)
        erase_b = torch.cat([c.erase_b for c in cores], dim=1)
        self.key_bias = torch.cat([torch.zeros_like(forget_b), forget_b, erase_b], dim=1).unsqueeze(1)
        # Per (KV head, core) value gates as one matmul: [Hkv*C, D, D] plus a bias [Hkv*C, 1, D].
        self.write_maps = torch.stack([c.write_w for c in cores], dim=1).flatten(0, 1).mT.contiguous()
        self.write_bias = torch.stack([c.write_b for c in cores], dim=1).flatten(0, 1).unsqueeze(1)
        parameters = [c.precondition_parameters() for c in cores]  # per core: [Hkv,F], [Hkv,F], [Hkv,1], [Hkv,1]
        self.alpha, self.beta, self.log_x, self.center = (
            torch.cat([p[i].expand(-1, size) for p, size in zip(parameters, self.sizes)], dim=1).unsqueeze(1)
            for i in range(4)
        )  # each [Hkv, 1, F_total]
        self.core_gain = torch.stack([c.log_gain.clamp(-4.0, 4.0).exp() for c in cores], dim=1)  # [Hq, C]
        self.gained_membership = self.core_gain.unsqueeze(-1) * self.membership  # [Hq, C, F_total]
        self.work: Tensor | None = None  # the working memory [B, Hkv, F_total, Dv]

    def normalize(self, q: Tensor, k: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """L2-normalise q [B,Hq,1,D], k [B,Hkv,1,D] and values [B,Hkv,C,D] together (one kernel chain)."""
        heads, kv_heads = q.shape[1], k.shape[1]
        joint = torch.cat([q, k, values.view(values.shape[0], -1, 1, values.shape[-1])], dim=1).to(self.dtype)
        qn, kn, vn = F.normalize(joint, dim=-1).split([heads, kv_heads, joint.shape[1] - heads - kv_heads], dim=1)
        return qn, kn, vn

    def fresh_states(self, batch: int, value_dim: int, device: torch.device) -> list[PDeltaState]:
        """Empty memories and unit curvatures, one state per core."""
        kv_heads = self.key_maps.shape[0]
        return [PDeltaState(torch.zeros(batch, kv_heads, f, value_dim, device=device, dtype=self.dtype),
                            torch.ones(batch, kv_heads, f, device=device, dtype=self.dtype)) for f in self.sizes]

    def _working_memory(self, states: Sequence[PDeltaState]) -> Tensor:
        """The stacked memories at the working dtype, copied into the decoder's buffer."""
        batch, kv_heads, _, value_dim = states[0].memory.shape
        shape = (batch, kv_heads, sum(self.sizes), value_dim)
        if self.work is None or self.work.shape != shape or self.work.device != states[0].memory.device:
            self.work = torch.empty(shape, device=states[0].memory.device, dtype=self.dtype)
        for rows, state in zip(self.work.split(self.sizes, dim=2), states):
            rows.copy_(state.memory)
        return self.work

    def step(
        self, qn: Tensor, kn: Tensor, values: Tensor, vn: Tensor, states: Sequence[PDeltaState],
        memory_dtype: torch.dtype | None = None,
    ) -> tuple[Tensor, list[PDeltaState]]:
        """One token from ``normalize``'s qn, kn, vn and the raw values [B,Hkv,C,Dv], one per core.

        Returns each core's gained read-out [B,Hq,C,Dv] and new states, the memories stored at
        ``memory_dtype`` (default: the cores' dtype) as views of one new tensor.
        """
        membership, membership_t = self.membership, self.membership_t
        memory = self._working_memory(states)
        curvature = torch.cat([s.curvature for s in states], dim=2).unsqueeze(2)  # [B, Hkv, 1, F_total]
        key, forget, erase_gate = (kn @ self.key_maps).add_(self.key_bias).chunk(3, dim=-1)  # [B, Hkv, 1, F_total]
        key = key / ((key.square() @ membership_t).clamp_min(NORMALIZE_EPS**2).sqrt() @ membership)
        numerator = curvature_scaling(curvature, self.log_x, self.center) * key
        denominator = ((key * numerator) @ membership_t).add_(1.0).clamp_min_(DENOMINATOR_FLOOR)
        preconditioned = numerator / (denominator @ membership)
        new_curvature = torch.addcmul(self.alpha * curvature, self.beta, key.square())

        write_gate = (vn @ self.write_maps).add_(self.write_bias).sigmoid_()  # [B, Hkv*C, 1, Dv]
        z = values * write_gate.view_as(values)
        erase = (key * erase_gate.sigmoid()) * membership  # [B, Hkv, C, F_total]
        memory.mul_((-0.25 * forget.sigmoid()).exp_().mT)  # decay the rows
        difference = z - erase @ memory  # [B, Hkv, C, Dv]: what each core writes
        memory.view(-1, *memory.shape[2:]).baddbmm_(  # row f gets its core's difference times its key
            (preconditioned.mT * membership_t).flatten(0, 1), difference.flatten(0, 1)
        )

        query = qn @ self.query_maps  # [B, Hq, 1, F_total]
        inverse_norms = (query.square() @ membership_t).clamp_min_(NORMALIZE_EPS**2).rsqrt_()  # [B, Hq, 1, C]
        reads = (inverse_norms.mT * self.gained_membership) * query  # [B, Hq, C, F_total]
        batch, kv_heads = kn.shape[:2]
        reads = reads.reshape(batch, kv_heads, -1, reads.shape[-1]) @ memory  # [B, Hkv, G*C, Dv]
        stored = memory.to(memory_dtype or self.dtype, copy=True).split(self.sizes, dim=2)
        new_states = [PDeltaState(m, c.squeeze(2)) for m, c in zip(stored, new_curvature.split(self.sizes, dim=3))]
        return reads.view(batch, self.num_heads, -1, reads.shape[-1]), new_states
