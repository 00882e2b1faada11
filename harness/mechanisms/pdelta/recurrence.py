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


def delta_step(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> tuple[Tensor, Tensor]:
    """One token of the delta rule on the carried memory: the oracle's step (decode runs it stacked,
    in ``CoreDecoder.step``).

    q [B,Hq,F]; k, erase, log_decay [B,Hkv,F]; z [B,Hkv,Dv]; memory [B,Hkv,F,Dv]. Decay the rows,
    read what is stored under the erase vector, write the difference under k, then read with q.
    Returns (output [B,Hq,Dv], new memory).
    """
    batch, kv_heads, features = k.shape
    state = log_decay.exp().unsqueeze(-1) * memory
    stored = (erase.unsqueeze(-2) @ state).squeeze(-2)  # [B, Hkv, Dv]
    state = state + k.unsqueeze(-1) * (z - stored).unsqueeze(-2)
    output = q.reshape(batch, kv_heads, groups, features) @ state  # [B, Hkv, G, Dv]
    return output.reshape(batch, kv_heads * groups, -1), state


def delta_token_reference(
    q: Tensor, k: Tensor, z: Tensor, erase: Tensor, log_decay: Tensor, memory: Tensor, groups: int
) -> tuple[Tensor, Tensor]:
    """The oracle: decay, read under erase, delta write, then read the output, one token at a time."""
    check_recurrence_shapes(q, k, z, erase, log_decay, memory, groups)
    state = memory
    outputs = []
    for t in range(k.shape[2]):
        output, state = delta_step(
            q[:, :, t], k[:, :, t], z[:, :, t], erase[:, :, t], log_decay[:, :, t], state, groups
        )
        outputs.append(output)
    return torch.stack(outputs, dim=2), state


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
