"""PDelta2 core: feature maps, the curvature key preconditioner and the delta memory around them.

Shapes: q [B,Hq,T,D]; k, v [B,Hkv,T,D]; F feature dim. The persistent state is the delta memory
[B,Hkv,F,D] plus the preconditioner's running key curvature [B,Hkv,F].
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.mechanisms.pdelta.recurrence import check_chunk_size, delta_recurrence, delta_step

CURVATURE_FLOOR = 1e-4  # keeps log(curvature) finite for keys never seen
DENOMINATOR_FLOOR = 1e-4  # keeps the normalised write finite when k.num is near -1


@dataclass
class PDeltaState:
    """What a PDelta2 core carries between calls."""

    memory: Tensor  # [B, Hkv, F, D]
    curvature: Tensor  # [B, Hkv, F]


def _preconditioned_key(key: Tensor, curvature: Tensor, log_x: Tensor, center: Tensor) -> Tensor:
    """Scale each feature down where keys have often been large (high curvature), then normalise."""
    relative = torch.log(curvature + CURVATURE_FLOOR) - center
    squashed = relative / (1.0 + relative.abs())
    numerator = torch.exp(-log_x * squashed) * key
    denominator = (1.0 + (key * numerator).sum(dim=-1, keepdim=True)).clamp_min(DENOMINATOR_FLOOR)
    return numerator / denominator


def precondition_step(
    key: Tensor, curvature: Tensor, alpha: Tensor, beta: Tensor, log_x: Tensor, center: Tensor
) -> tuple[Tensor, Tensor]:
    """One token: the key [B,Hkv,F] preconditioned by the curvature before it, then the curvature updated."""
    return _preconditioned_key(key, curvature, log_x, center), alpha * curvature + beta * key.square()


def precondition_reference(
    kp: Tensor, curvature: Tensor, alpha: Tensor, beta: Tensor, log_x: Tensor, center: Tensor
) -> tuple[Tensor, Tensor]:
    """Token-by-token oracle: key t sees the curvature accumulated from keys before it."""
    keys = []
    for t in range(kp.shape[2]):
        key, curvature = precondition_step(kp[:, :, t], curvature, alpha, beta, log_x, center)
        keys.append(key)
    return torch.stack(keys, dim=2), curvature


def precondition_chunked(
    kp: Tensor,
    curvature: Tensor,
    alpha: Tensor,
    beta: Tensor,
    log_x: Tensor,
    center: Tensor,
    chunk_size: int = 32,
) -> tuple[Tensor, Tensor]:
    """Within a chunk the curvature seen by each token is a closed form; only chunks recur.

    C_t = alpha^t C0 + beta * sum_{j<t} alpha^(t-1-j) k_j^2 for t = 0..n: the key sums are taken for
    all chunks at once, then only the curvature entering each chunk (row n of the previous one) recurs.
    Zero padding of a ragged last chunk only touches rows after its last real token.
    """
    chunk_size = check_chunk_size(chunk_size)
    if kp.ndim != 4 or curvature.shape != (kp.shape[0], kp.shape[1], kp.shape[3]):
        raise ValueError(
            f"inconsistent shapes: kp {tuple(kp.shape)} needs curvature [B,Hkv,F], got {tuple(curvature.shape)}"
        )
    batch, kv_heads, steps, features = kp.shape
    n = min(chunk_size, max(steps, 1))  # every chunk size gives the same result: skip padding work
    pad = (-steps) % n
    chunks = (steps + pad) // n
    log_alpha = alpha.log()  # [Hkv, F]
    positions = torch.arange(n + 1, device=kp.device, dtype=kp.dtype)
    lags = positions[:, None] - 1 - positions[None, :n]  # t - 1 - j, [n+1, n]
    decay_powers = torch.exp(log_alpha[..., None, None] * lags.clamp_min(0))  # [Hkv, F, n+1, n]
    decay_powers = decay_powers * (lags >= 0)
    start_powers = torch.exp(log_alpha[..., None, :] * positions[:, None])  # [Hkv, n+1, F]

    chunked = F.pad(kp, (0, 0, 0, pad)).reshape(batch, kv_heads, chunks, n, features)
    key_sums = beta[None, :, None, None] * torch.einsum("hftj,bhcjf->bhctf", decay_powers, chunked.square())
    entering = []
    for c in range(chunks):
        entering.append(curvature)
        curvature = start_powers[None, :, n] * curvature + key_sums[:, :, c, n]
    seen = start_powers[None, :, None, :n] * torch.stack(entering, dim=2)[:, :, :, None] + key_sums[:, :, :, :n]
    keys = _preconditioned_key(chunked, seen, log_x[:, None, None, :], center[:, None, None, :])
    keys = keys.reshape(batch, kv_heads, chunks * n, features)[:, :, :steps]
    if pad:  # the last chunk ends at its last real token, not after the padding
        last = steps - (chunks - 1) * n
        curvature = start_powers[None, :, last] * entering[-1] + key_sums[:, :, -1, last]
    return keys, curvature


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


class PDelta2Core(nn.Module):
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
        return CoreDecoder(self)

    def step(self, q: Tensor, k: Tensor, v: Tensor, state: PDeltaState | None = None) -> tuple[Tensor, PDeltaState]:
        """Decode one token, q [B,Hq,D], k/v [B,Hkv,D] (a decode loop should hold ``decoder()`` instead)."""
        self._check_inputs(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2))
        dtype = self.wq.dtype
        return self.decoder().step(F.normalize(q.to(dtype), dim=-1), F.normalize(k.to(dtype), dim=-1), v, state)

    def recurrent_state_bytes(self, batch_size: int = 1) -> int:
        """Memory plus curvature at the parameter dtype."""
        per_row = self.num_kv_heads * self.feature_dim * self.head_dim + self.num_kv_heads * self.feature_dim
        return int(batch_size) * per_row * self.wq.element_size()


class CoreDecoder:
    """One token of a PDelta2 core from its carried state: the delta step with no chunk machinery.

    The same features as ``PDelta2Core.features`` for T=1, but the weight-only terms (the three key
    projections stacked into one matmul, preconditioner constants, output gain) are computed once at
    construction, so each step is a few dozen small kernels: decode is bound by per-op overhead.
    """

    def __init__(self, core: PDelta2Core):
        self.core = core
        kv, f = core.num_kv_heads, core.feature_dim
        self.dtype = core.wq.dtype
        self.query_map = core.wq
        self.key_maps = torch.cat([core.wk, core.forget_w, core.erase_w], dim=1)  # [Hkv, 3F, D]
        self.key_bias = torch.cat([core.forget_b.new_zeros(kv, f), core.forget_b, core.erase_b], dim=1)
        self.write_map, self.write_bias = core.write_w, core.write_b
        self.precondition = core.precondition_parameters()
        self.gain = core.log_gain.clamp(-4.0, 4.0).exp()[:, None]  # [Hq, 1]

    def step(self, qn: Tensor, kn: Tensor, v: Tensor, state: PDeltaState | None) -> tuple[Tensor, PDeltaState]:
        """qn [B,Hq,D], kn [B,Hkv,D] already L2-normalised (the ER2 cores share them); v [B,Hkv,Dv]."""
        core = self.core
        v = v.to(self.dtype)
        if state is None:
            state = core.fresh_state(kn.shape[0], v.shape[-1], kn.device, self.dtype)
        query = F.normalize((self.query_map @ qn.unsqueeze(-1)).squeeze(-1), dim=-1)
        projected = (self.key_maps @ kn.unsqueeze(-1)).squeeze(-1) + self.key_bias
        key, forget, erase_gate = projected.split(core.feature_dim, dim=-1)
        key = F.normalize(key, dim=-1)
        write_gate = (self.write_map @ F.normalize(v, dim=-1).unsqueeze(-1)).squeeze(-1) + self.write_bias
        preconditioned, curvature = precondition_step(key, state.curvature, *self.precondition)
        output, memory = delta_step(
            query, preconditioned, v * write_gate.sigmoid(), key * erase_gate.sigmoid(), -0.25 * forget.sigmoid(),
            state.memory, core.groups,
        )
        return output * self.gain, PDeltaState(memory, curvature)
