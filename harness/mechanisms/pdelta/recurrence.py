"""Delta-rule memory: the chunked form that runs, the token-by-token oracle, and softmax references.

Shapes: B batch, Hq query heads, Hkv key/value heads (query head h reads KV head h // groups),
T time, F feature dim, Dv value dim. The memory S is [B, Hkv, F, Dv].
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

MAX_CHUNK = 32  # with log_decay >= -0.25 per token, 1 / cumulative decay stays below e^8


def check_chunk_size(chunk_size: int) -> int:
    """Chunks longer than 32 tokens would let the within-chunk rescaling overflow float32."""
    if not 1 <= int(chunk_size) <= MAX_CHUNK:
        raise ValueError(f"chunk_size must be in 1..{MAX_CHUNK}, got {chunk_size}")
    return int(chunk_size)


def check_recurrence_shapes(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> None:
    """Fail early with every shape named: a broadcast mistake here would silently mix heads."""
    shapes = (
        f"q {tuple(q.shape)}, k {tuple(k.shape)}, z {tuple(z.shape)}, erase {tuple(erase.shape)}, "
        f"log_decay {tuple(log_decay.shape)}, memory {tuple(memory.shape)}, groups {groups}"
    )
    if any(t.ndim != 4 for t in (q, k, z, erase, log_decay, memory)):
        raise ValueError(f"expected 4-D q, k, z, erase, log_decay and memory; got {shapes}")
    batch, kv_heads, steps, features = k.shape
    value_dim = z.shape[-1]
    consistent = (
        groups >= 1
        and q.shape == (batch, kv_heads * groups, steps, features)
        and erase.shape == k.shape
        and log_decay.shape == k.shape
        and z.shape[:3] == (batch, kv_heads, steps)
        and memory.shape == (batch, kv_heads, features, value_dim)
    )
    if not consistent:
        raise ValueError(
            "inconsistent shapes: need q [B,Hkv*groups,T,F], k/erase/log_decay [B,Hkv,T,F], "
            f"z [B,Hkv,T,Dv], memory [B,Hkv,F,Dv]; got {shapes}"
        )


def delta_token_reference(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> tuple[Tensor, Tensor]:
    """The oracle: decay, read under erase, delta write, then read the output, one token at a time."""
    check_recurrence_shapes(q, k, z, erase, log_decay, memory, groups)
    batch, kv_heads, steps, features = k.shape
    grouped_q = q.reshape(batch, kv_heads, groups, steps, features)
    state = memory
    outputs = []
    for t in range(steps):
        state = log_decay[:, :, t, :, None].exp() * state
        stored = torch.einsum("bhf,bhfd->bhd", erase[:, :, t], state)
        state = state + k[:, :, t, :, None] * (z[:, :, t] - stored)[:, :, None, :]
        outputs.append(torch.einsum("bhgf,bhfd->bhgd", grouped_q[:, :, :, t], state))
    output = torch.stack(outputs, dim=3).reshape(batch, kv_heads * groups, steps, -1)
    return output, state


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
    """Chunked delta rule: within-chunk work is batched matmuls and one triangular solve.

    Everything that does not depend on the memory entering a chunk is computed for all chunks at
    once; only a few matmuls per chunk remain sequential. Padding tokens (zero key, erase, query
    and decay) leave the memory untouched, so T need not be a multiple of chunk_size.
    """
    chunk_size = check_chunk_size(chunk_size)
    check_recurrence_shapes(q, k, z, erase, log_decay, memory, groups)
    batch, kv_heads, steps, features = k.shape
    value_dim = z.shape[-1]
    pad = (-steps) % chunk_size
    chunks = (steps + pad) // chunk_size

    def split(x: Tensor) -> Tensor:
        # [B, H, T, X] -> [B, H, chunks, n, X]
        return _pad_time(x, pad).reshape(x.shape[0], x.shape[1], chunks, chunk_size, x.shape[-1])

    cumulative = split(log_decay).cumsum(dim=3)
    scale = cumulative.exp()  # c_t: decay from the chunk start to t inclusive
    write = split(k) / scale  # k_t / c_t
    read = split(erase) * scale  # erase_t * c_t
    # Query heads of one KV head are stacked along the rows of each chunk: [B, Hkv, chunks, G*n, F].
    grouped_q = _pad_time(q, pad).reshape(batch, kv_heads, groups, chunks, chunk_size, features)
    grouped_q = grouped_q.transpose(2, 3) * scale[:, :, :, None]
    scaled_q = grouped_q.reshape(batch, kv_heads, chunks, groups * chunk_size, features)

    strict = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=k.device).tril(-1)
    inclusive = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=k.device).tril()
    interaction = (read @ write.transpose(-1, -2)).masked_fill(~strict, 0.0)
    identity = torch.eye(chunk_size, dtype=k.dtype, device=k.device)
    system = identity + interaction
    # (I + strictly_lower(read write^T)) U = Z - read M0, solved for Z and read separately so the
    # memory-dependent part reduces to a matmul inside the sequential loop.
    solved = torch.linalg.solve_triangular(
        system, torch.cat([split(z), read], dim=-1), upper=False, unitriangular=True
    )
    solved_z, solved_read = solved.split([value_dim, features], dim=-1)
    mixing = (scaled_q @ write.transpose(-1, -2)).masked_fill(~inclusive.repeat(groups, 1), 0.0)

    # Only the memory entering each chunk is sequential: chunk-major, contiguous operands keep the
    # loop to two small matmuls per chunk; every output is formed afterwards in one batched matmul.
    chunk_z = solved_z.movedim(2, 0).contiguous()
    chunk_read = solved_read.movedim(2, 0).contiguous()
    chunk_write_t = write.transpose(-1, -2).movedim(2, 0).contiguous()
    chunk_scale = scale[:, :, :, -1, :, None].movedim(2, 0).contiguous()  # c_n per chunk
    state = memory
    entering, updates = [], []
    for c in range(chunks):
        update = chunk_z[c] - chunk_read[c] @ state  # rows: z_t - old_t
        entering.append(state)
        updates.append(update)
        state = chunk_scale[c] * (state + chunk_write_t[c] @ update)
    output = scaled_q @ torch.stack(entering, dim=2) + mixing @ torch.stack(updates, dim=2)  # [B, Hkv, C, G*n, Dv]
    output = output.reshape(batch, kv_heads, chunks, groups, chunk_size, value_dim).transpose(2, 3)
    output = output.reshape(batch, kv_heads * groups, chunks * chunk_size, value_dim)
    return output[:, :, :steps], state


def expand_kv(x: Tensor, groups: int) -> Tensor:
    """[B, Hkv, T, D] -> [B, Hkv*groups, T, D]: query head h reads KV head h // groups."""
    return x.repeat_interleave(groups, dim=1) if groups > 1 else x


def _check_attention_shapes(q: Tensor, k: Tensor, v: Tensor, groups: int) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.shape[:3] != k.shape[:3] or q.shape[-1] != k.shape[-1] or (
        q.shape[:3] != (k.shape[0], k.shape[1] * groups, k.shape[2])
    ):
        raise ValueError(
            f"inconsistent shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, groups {groups}"
        )


def softmax_reference(q: Tensor, k: Tensor, v: Tensor, groups: int) -> Tensor:
    """Exact causal softmax attention (the teacher), K/V shared by each group of query heads."""
    _check_attention_shapes(q, k, v, groups)
    return F.scaled_dot_product_attention(q, expand_kv(k, groups), expand_kv(v, groups), is_causal=True)


def local_window_attention(q: Tensor, k: Tensor, v: Tensor, window: int, groups: int) -> Tensor:
    """Causal softmax attention restricted to the last ``window`` tokens (the current one included)."""
    _check_attention_shapes(q, k, v, groups)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    steps, keys = q.shape[2], k.shape[2]
    rows = torch.arange(steps, device=q.device)[:, None]
    cols = torch.arange(keys, device=q.device)[None, :]
    allowed = (cols <= rows) & (cols > rows - window)
    return F.scaled_dot_product_attention(q, expand_kv(k, groups), expand_kv(v, groups), attn_mask=allowed)
