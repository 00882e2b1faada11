"""Chunked forms: everything independent of the carried state is batched over chunks, and only a
small product per chunk recurs. Each is tested against its token-by-token reference in ``naive``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from harness.tasks.er2.mechanism.ops.common import (
    check_chunk_size,
    check_recurrence_shapes,
    preconditioned_key,
)


def _pad_time(x: Tensor, pad: int) -> Tensor:
    return F.pad(x, (0, 0, 0, pad)) if pad else x


def delta_recurrence(
    q: Tensor,
    k: Tensor,
    z: Tensor,
    erase: Tensor,
    log_decay: Tensor,
    memory: Tensor,
    groups: int,
    chunk_size: int = 32,
) -> tuple[Tensor, Tensor]:
    """Chunked delta rule (WY form): everything independent of the carried memory is batched over chunks.

    With A = (I + strictly_lower(read write^T))^-1, a chunk entered with memory M0 has updates
    U = A Z - (A read) M0, outputs (q c) M0 + P U with P = lower_incl((q c) write^T), and final memory
    diag(c_n) M0 + (c_n write)^T U. Only U and the final memory are sequential (two small matmuls per
    chunk); the outputs of all chunks are formed afterwards in batched matmuls. Padding tokens (zero key,
    erase, query and decay) leave the memory untouched, so T need not be a multiple of chunk_size.
    """
    chunk_size = check_chunk_size(chunk_size)
    check_recurrence_shapes(q, k, z, erase, log_decay, memory, groups)
    batch, kv_heads, steps, features = k.shape
    value_dim = z.shape[-1]
    chunk_size = min(chunk_size, max(steps, 1))  # every chunk size gives the same result: skip padding work
    n = chunk_size
    pad = (-steps) % n
    chunks = (steps + pad) // n

    def split(x: Tensor) -> Tensor:
        # [B, H, T, X] -> [B, H, chunks, n, X]
        return _pad_time(x, pad).reshape(x.shape[0], x.shape[1], chunks, n, x.shape[-1])

    scale = split(log_decay).cumsum(dim=3).exp()  # c_t: decay from the chunk start to t inclusive
    last_scale = scale[:, :, :, -1:]  # c_n
    write = split(k) / scale  # k_t / c_t
    # Rows of each chunk: erase, then the queries of each head sharing the KV head, all times c_t:
    # [B, Hkv, chunks, n + G*n, F] = [read; q c].
    grouped_q = _pad_time(q, pad).reshape(batch, kv_heads, groups, chunks, n, features).transpose(2, 3)
    rows = torch.cat([split(erase)[:, :, :, None], grouped_q], dim=3) * scale[:, :, :, None]
    rows = rows.flatten(3, 4)
    read = rows[:, :, :, :n]  # erase_t * c_t
    products = rows @ write.transpose(-1, -2)  # [read write^T; (q c) write^T]

    # A = (I + strictly_lower(read write^T))^-1: a unit-triangular solve reads only the strict lower part.
    identity = torch.eye(n, dtype=k.dtype, device=k.device)
    inverse = torch.linalg.solve_triangular(
        products[:, :, :, :n], identity.expand(batch, kv_heads, chunks, n, n), upper=False, unitriangular=True
    )
    solved_z, solved_read = inverse @ split(z), inverse @ read  # two matmuls beat copying [Z, read] into one
    inclusive = torch.ones(n, n, dtype=torch.bool, device=k.device).tril().repeat(groups, 1)
    mixing = products[:, :, :, n:].masked_fill(~inclusive, 0.0)  # P = lower_incl((q c) write^T)

    # Sequential part, chunk-major [chunks, B*Hkv, ...]: two small matmuls per chunk.
    def chunk_major(x: Tensor) -> Tensor:
        return x.movedim(2, 0).reshape(chunks, batch * kv_heads, *x.shape[-2:])

    chunk_z, chunk_read = chunk_major(solved_z), chunk_major(solved_read)
    chunk_write_t = chunk_major((write * last_scale).transpose(-1, -2))  # (c_n / c_t) k_t, at most |k_t|
    chunk_scale = chunk_major(last_scale.transpose(-1, -2))  # c_n as a column
    state = memory.reshape(batch * kv_heads, features, value_dim)
    entering, updates = [], []
    for c in range(chunks):
        update = torch.baddbmm(chunk_z[c], chunk_read[c], state, alpha=-1.0)  # rows: z_t - old_t
        entering.append(state)
        updates.append(update)
        state = torch.baddbmm(chunk_scale[c] * state, chunk_write_t[c], update)

    def batch_major(parts: list[Tensor]) -> Tensor:
        return torch.stack(parts, dim=1).view(batch, kv_heads, chunks, *parts[0].shape[-2:])

    # Outputs of all chunks at once: (q c) M0 + P U, [B, Hkv, chunks, G*n, Dv].
    output = torch.baddbmm(  # one pass: P U plus (q c) M0 added in the matmul
        (mixing @ batch_major(updates)).flatten(0, 2),
        rows[:, :, :, n:].flatten(0, 2),
        batch_major(entering).flatten(0, 2),
    )
    output = output.view(batch, kv_heads, chunks, groups, n, value_dim).transpose(2, 3)
    output = output.reshape(batch, kv_heads * groups, chunks * n, value_dim)
    return output[:, :, :steps], state.reshape(batch, kv_heads, features, value_dim)


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
    keys = preconditioned_key(chunked, seen, log_x[:, None, None, :], center[:, None, None, :])
    keys = keys.reshape(batch, kv_heads, chunks * n, features)[:, :, :steps]
    if pad:  # the last chunk ends at its last real token, not after the padding
        last = steps - (chunks - 1) * n
        curvature = start_powers[None, :, last] * entering[-1] + key_sums[:, :, -1, last]
    return keys, curvature
