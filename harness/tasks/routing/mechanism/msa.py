"""Memory Sparse Attention (MSA): chunk-pooled document memory and its learned router.

Per document and layer, keys K = H W_K, values V = H W_V and routing keys K^R = H W_KR are
compressed by mean pooling over fixed chunks. A query's routing projection Q^R = H_q W_QR scores
a chunk by the max over query tokens of the mean over router heads of cos(Q^R_t, K^R_chunk);
routing runs in the upper half of the layers. The router is trained with a supervised
contrastive loss. ``RouterProjector.compute_routing_scores`` is the readable reference; the
task's ``RoutingIndex`` is the fast equivalent over blocks of pre-normalised keys.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

from harness.tasks.routing.mechanism.model import PCSHOConfig, PCSHODLM, TransformerBlock, check_hidden


@dataclass(frozen=True)
class MSAConfig:
    chunk_size: int = 64
    top_k: int = 16
    router_dim: int = 64
    n_router_heads: int = 4
    apply_from_layer: int = 0

    def __post_init__(self) -> None:
        for name in ("chunk_size", "top_k", "router_dim", "n_router_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"MSAConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.router_dim % self.n_router_heads:
            raise ValueError(f"router_dim {self.router_dim} is not divisible by n_router_heads {self.n_router_heads}")


def msa_layer_indices(model_config: PCSHOConfig, msa_config: MSAConfig) -> range:
    """Model layers that carry MSA: from max(apply_from_layer, n_layers // 2) to the top."""
    return range(max(msa_config.apply_from_layer, model_config.n_layers // 2), model_config.n_layers)


def chunk_mean_pool(x: torch.Tensor, chunk_size: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over consecutive chunks of the sequence axis (second to last), padding excluded.

    x: (S, D) or (B, S, D); mask: same leading shape as x without D, True for real tokens.
    A trailing partial chunk averages only its real tokens; a chunk without any gives zeros.
    """
    if x.dim() not in (2, 3):
        raise ValueError(f"chunk_mean_pool expects (S, D) or (B, S, D), got {tuple(x.shape)}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if mask is None:
        mask = torch.ones(x.shape[:-1], dtype=torch.bool, device=x.device)
    elif mask.shape != x.shape[:-1]:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match x shape {tuple(x.shape)} without D")
    seq = x.shape[-2]
    pad = (-seq) % chunk_size
    weights = F.pad(mask.to(x.dtype), (0, pad))
    values = F.pad(x, (0, 0, 0, pad)) * weights.unsqueeze(-1)
    n_chunks = (seq + pad) // chunk_size
    sums = values.unflatten(-2, (n_chunks, chunk_size)).sum(dim=-2)
    counts = weights.unflatten(-1, (n_chunks, chunk_size)).sum(dim=-1, keepdim=True)
    return sums / counts.clamp_min(1.0)


def headwise_normalize(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Unit-normalise each of the n_heads equal slices of the last axis."""
    return F.normalize(x.unflatten(-1, (n_heads, x.shape[-1] // n_heads)), dim=-1).flatten(-2)


def check_routing_keys(keys: torch.Tensor, router_dim: int) -> None:
    if keys.dim() != 2 or keys.shape[-1] != router_dim:
        raise ValueError(f"routing keys must have shape (N, {router_dim}), got {tuple(keys.shape)}")


class RouterProjector(nn.Module):
    """MSA's learned router: W_QR for query tokens and W_KR for (pooled) document tokens."""

    def __init__(self, d_model: int, router_dim: int, n_heads: int) -> None:
        super().__init__()
        if router_dim % n_heads:
            raise ValueError(f"router_dim {router_dim} is not divisible by n_heads {n_heads}")
        self.d_model = d_model
        self.router_dim = router_dim
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, router_dim)
        self.k_proj = nn.Linear(d_model, router_dim)

    def project_query(self, h_q: torch.Tensor) -> torch.Tensor:
        """(B, S, D) -> (B, S, router_dim): one routing query per token."""
        check_hidden(h_q, self.d_model, "query hidden states")
        return self.q_proj(h_q)

    def project_key(self, h_doc: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., router_dim)."""
        if h_doc.shape[-1] != self.d_model:
            raise ValueError(f"document hidden states must end in {self.d_model}, got {tuple(h_doc.shape)}")
        return self.k_proj(h_doc)

    def compute_routing_scores(self, h_query: torch.Tensor, memory_routing_keys: torch.Tensor) -> torch.Tensor:
        """(B, N): per chunk, max over query tokens of the mean over heads of the cosine."""
        check_routing_keys(memory_routing_keys, self.router_dim)
        queries = self.project_query(h_query).unflatten(-1, (self.n_heads, -1))
        keys = memory_routing_keys.to(queries.device).unflatten(-1, (self.n_heads, -1))
        cosine = torch.einsum(
            "bshd,nhd->bshn", F.normalize(queries, dim=-1), F.normalize(keys, dim=-1)
        )
        return cosine.mean(dim=2).amax(dim=1)


class MSALayer(TransformerBlock):
    """A transformer block that can read chunk-pooled memory, with its router attached."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, msa_config: MSAConfig, layer_idx: int) -> None:
        super().__init__(d_model, n_heads, d_ff)
        self.layer_idx = layer_idx
        self.chunk_size = msa_config.chunk_size
        self.router: nn.Module = RouterProjector(d_model, msa_config.router_dim, msa_config.n_router_heads)

    def compute_routing_scores(self, h_query: torch.Tensor, kr_all: torch.Tensor) -> torch.Tensor:
        return self.router.compute_routing_scores(h_query, kr_all)

    def encode_memory(self, h_doc: torch.Tensor, mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Chunk-pooled K, V (this layer's attention space) and routing keys KR of documents."""
        normed = self.norm_attn(h_doc)
        return {
            "K": chunk_mean_pool(self.k_attn(normed), self.chunk_size, mask),
            "V": chunk_mean_pool(self.v_attn(normed), self.chunk_size, mask),
            "KR": chunk_mean_pool(self.router.project_key(h_doc), self.chunk_size, mask),
        }


def create_msa_layers(model_config: PCSHOConfig, msa_config: MSAConfig) -> nn.ModuleList:
    """One MSALayer per routed layer (see ``msa_layer_indices``)."""
    return nn.ModuleList(
        MSALayer(model_config.d_model, model_config.n_heads, model_config.d_ff, msa_config, layer_idx)
        for layer_idx in msa_layer_indices(model_config, msa_config)
    )


def attach_msa_layers(model: PCSHODLM, msa_layers: nn.ModuleList) -> None:
    """Install the MSA layers as the model's blocks at their layer indices (drop-in)."""
    for msa_layer in msa_layers:
        if not 0 <= msa_layer.layer_idx < len(model.blocks):
            raise ValueError(f"MSA layer index {msa_layer.layer_idx} outside the model's {len(model.blocks)} layers")
        model.blocks[msa_layer.layer_idx] = msa_layer


def routing_contrastive_loss(
    scores: torch.Tensor, positive_mask: torch.Tensor, temperature: float
) -> torch.Tensor:
    """MSA's supervised-contrastive router loss.

    For every positive p of a query: -log(exp(s_p/tau) / (exp(s_p/tau) + sum_neg exp(s_n/tau)));
    other positives stay out of p's denominator. Averaged over all positives of the batch.
    The per-pair terms are computed at the positives only (a few per row of thousands of chunks):
    the same values and gradients as computing every pair and keeping the positives, at half the cost.
    """
    if scores.shape != positive_mask.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and positive_mask {tuple(positive_mask.shape)} differ")
    if not bool(positive_mask.any()):
        raise ValueError("routing_contrastive_loss needs at least one positive")
    logits = scores / temperature
    negatives = torch.logsumexp(logits.masked_fill(positive_mask, float("-inf")), dim=-1, keepdim=True)
    positives = logits[positive_mask]
    return (torch.logaddexp(positives, negatives.expand_as(logits)[positive_mask]) - positives).mean()


class BankTooLargeError(MemoryError):
    """A memory bank that would not fit in the device's free memory, refused before allocation."""


def available_bytes(device: torch.device) -> int:
    """Free memory on the device (CUDA: driver's free bytes; CPU: MemAvailable)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def ensure_bank_fits(
    n_chunks: int, width: int, device: torch.device, dtype: torch.dtype = torch.float32, headroom: float = 0.8
) -> int:
    """Bytes of an (n_chunks, width) bank; raises BankTooLargeError if it exceeds free memory."""
    needed = n_chunks * width * torch.empty((), dtype=dtype).element_size()
    free = available_bytes(device)
    if needed > headroom * free:
        raise BankTooLargeError(
            f"a bank of {n_chunks} chunks x {width} {dtype} needs {needed} bytes "
            f"({needed / 2**30:.2f} GiB) but only {free} bytes are free on {device}"
        )
    return needed


class MemoryBank:
    """Documents encoded once: per layer, chunk-pooled K, V and routing keys KR."""

    FIELDS = ("K", "V", "KR")

    def __init__(self, chunk_size: int) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.chunk_size = chunk_size
        self.doc_ids: list[str] = []
        self._entries: dict[int, list[dict[str, torch.Tensor]]] = {}
        self._widths: dict[int, dict[str, int]] = {}
        self._concatenated: dict[tuple[int, str], tuple[torch.Tensor, list[str]]] = {}
        self._doc_index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def layers(self) -> list[int]:
        return sorted(self._entries)

    def add_document(self, doc_id: str, layer_kvs: Mapping[int, Mapping[str, torch.Tensor]]) -> None:
        """Add one document: ``{layer: {"K": (n, D), "V": (n, D), "KR": (n, router_dim)}}``."""
        if doc_id in self._index():
            raise ValueError(f"document {doc_id!r} is already in the bank")
        if self.doc_ids and set(layer_kvs) != set(self._entries):
            raise ValueError(f"document {doc_id!r} has layers {sorted(layer_kvs)}, the bank has {self.layers}")
        for layer, entry in layer_kvs.items():
            self._check_entry(doc_id, layer, entry)
        for layer, entry in layer_kvs.items():
            self._entries.setdefault(layer, []).append({name: entry[name] for name in self.FIELDS})
            self._widths.setdefault(layer, {name: entry[name].shape[1] for name in self.FIELDS})
        self.doc_ids.append(doc_id)
        self._concatenated.clear()
        if self._doc_index is not None:  # kept up to date: rebuilding it per document made a bank O(n^2) to fill
            self._doc_index[doc_id] = len(self.doc_ids) - 1

    def _check_entry(self, doc_id: str, layer: int, entry: Mapping[str, torch.Tensor]) -> None:
        missing = [name for name in self.FIELDS if name not in entry]
        if missing:
            raise ValueError(f"document {doc_id!r} layer {layer} lacks {missing}")
        shapes = {name: tuple(entry[name].shape) for name in self.FIELDS}
        if any(len(shape) != 2 for shape in shapes.values()) or len({s[0] for s in shapes.values()}) != 1:
            raise ValueError(f"document {doc_id!r} layer {layer}: K, V, KR must be (n_chunks, width), got {shapes}")
        if shapes["K"] != shapes["V"]:
            raise ValueError(f"document {doc_id!r} layer {layer}: K {shapes['K']} and V {shapes['V']} differ")
        widths = self._widths.get(layer)
        if widths and any(widths[name] != shapes[name][1] for name in self.FIELDS):
            raise ValueError(
                f"document {doc_id!r} layer {layer}: widths {shapes} do not match the bank's {widths}"
            )

    def _index(self) -> dict[str, int]:
        if self._doc_index is None:
            self._doc_index = {doc_id: i for i, doc_id in enumerate(self.doc_ids)}
        return self._doc_index

    def concatenated(self, layer: int, name: str) -> tuple[torch.Tensor | None, list[str]]:
        """All documents' ``name`` entries at ``layer`` stacked (n_chunks_total, width), chunk doc ids."""
        if layer not in self._entries:
            return None, []
        key = (layer, name)
        if key not in self._concatenated:
            entries = self._entries[layer]
            chunk_doc_ids = [doc_id for doc_id, entry in zip(self.doc_ids, entries) for _ in range(entry[name].shape[0])]
            self._concatenated[key] = (torch.cat([entry[name] for entry in entries]), chunk_doc_ids)
        return self._concatenated[key]

    def get_routing_keys(self, layer: int) -> tuple[torch.Tensor | None, list[str]]:
        """(kr_all (n_chunks_total, router_dim) or None when empty, the doc id of every chunk)."""
        return self.concatenated(layer, "KR")
