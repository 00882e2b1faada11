"""Fast routing: top documents over a large bank by one matmul per block of pre-normalised keys
(the reference is ``RouterProjector.compute_routing_scores``).

Per-head normalisation is folded into the matrices: keys are unit-normalised per head once,
queries per head and divided by the head count, so one dot product equals the mean over heads
of the cosines. Scores are reduced (max over query tokens, max over a document's chunks, top-k)
block by block, so memory stays bounded by the block size, not the bank size.
"""
from __future__ import annotations

import torch

from harness.tasks.routing.mechanism.msa import check_routing_keys, ensure_bank_fits, headwise_normalize

# A key block of 2 MiB (8,192 chunks of 64 float32) stays in a core's L2 while every query token
# is scored against it. Measured at 10^6 chunks: blocks of 8k-16k chunks scored 3 or 10 tokens
# 1.2-1.45x faster than blocks of 32k-64k (so the key block, not the tokens x block score tile,
# must fit); one pooled query lost up to 15% against 64k blocks of this layout, and still ran
# 1.3x faster than with the row-major 64k blocks used before.
KEY_BLOCK_BYTES = 2 << 20


def chunk_major(block: torch.Tensor, chunks_per_doc: int) -> torch.Tensor:
    """(width, chunks) copy of a (chunks, width) block whose column ``j * docs + d`` is chunk j of
    doc d: the product's rows then view as (chunks_per_doc, docs), so the max over a document's
    chunks and the max over query tokens are one contiguous reduction, and the product streams
    the block without transposing it."""
    width = block.shape[1]
    return block.view(-1, chunks_per_doc, width).permute(2, 1, 0).reshape(width, -1)


class RoutingIndex:
    """Routing keys of a bank whose documents all have ``chunks_per_doc`` chunks."""

    def __init__(self, keys: torch.Tensor, n_heads: int, chunks_per_doc: int, block_chunks: int | None = None) -> None:
        if keys.dim() != 2 or keys.shape[0] % chunks_per_doc or keys.shape[1] % n_heads:
            raise ValueError(
                f"keys {tuple(keys.shape)} must be (n_docs * {chunks_per_doc}, router_dim divisible by {n_heads})"
            )
        ensure_bank_fits(keys.shape[0], keys.shape[1], keys.device, keys.dtype)
        if block_chunks is None:
            block_chunks = KEY_BLOCK_BYTES // (keys.shape[1] * keys.element_size())
        self.n_heads = n_heads
        self.chunks_per_doc = chunks_per_doc
        self.n_docs = keys.shape[0] // chunks_per_doc
        self.router_dim = keys.shape[1]
        self.dtype = keys.dtype
        self.block_docs = max(1, block_chunks // chunks_per_doc)
        self.blocks = [
            chunk_major(headwise_normalize(block, n_heads), chunks_per_doc)
            for block in keys.split(self.block_docs * chunks_per_doc)
        ]

    def _prepared(self, queries: torch.Tensor) -> torch.Tensor:
        if queries.dim() != 3:
            raise ValueError(f"queries must be (B, S, {self.router_dim}), got {tuple(queries.shape)}")
        check_routing_keys(queries.flatten(0, 1), self.router_dim)
        return (headwise_normalize(queries, self.n_heads) / self.n_heads).flatten(0, 1).to(self.dtype)

    def _block_scores(self, flat: torch.Tensor, batch: int, block: torch.Tensor) -> torch.Tensor:
        """(B, docs in the block): rows (query, token) x columns (chunk, doc) view as
        (query, token * chunk, doc), so one max reduces both."""
        return (flat @ block).view(batch, -1, block.shape[1] // self.chunks_per_doc).amax(dim=1)

    def document_scores(self, queries: torch.Tensor) -> torch.Tensor:
        """(B, n_docs): each document's best chunk score for queries (B, S, router_dim)."""
        flat = self._prepared(queries)
        return torch.cat([self._block_scores(flat, queries.shape[0], block) for block in self.blocks], dim=1)

    def top_documents(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(scores, doc indices), each (B, k), keeping only k candidates per block."""
        flat = self._prepared(queries)
        best_scores, best_docs = [], []
        for first_doc, block in zip(range(0, self.n_docs, self.block_docs), self.blocks):
            scores = self._block_scores(flat, queries.shape[0], block)
            top = scores.topk(min(k, scores.shape[1]), dim=1)
            best_scores.append(top.values)
            best_docs.append(top.indices + first_doc)
        scores, docs = torch.cat(best_scores, dim=1), torch.cat(best_docs, dim=1)
        top = scores.topk(min(k, scores.shape[1]), dim=1)
        return top.values, torch.gather(docs, 1, top.indices)


def random_keys(n_chunks: int, router_dim: int, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """A synthetic bank for throughput figures, refused before allocation if it cannot fit."""
    ensure_bank_fits(n_chunks, router_dim, device)
    return torch.randn(n_chunks, router_dim, generator=generator).to(device)
