"""Fast routing: top documents over a large bank by one matmul per block of a contiguous,
pre-normalised key matrix (the reference is ``RouterProjector.compute_routing_scores``).

Per-head normalisation is folded into the matrices: keys are unit-normalised per head once,
queries per head and divided by the head count, so one dot product equals the mean over heads
of the cosines. Scores are reduced (max over query tokens, max over a document's chunks, top-k)
block by block, so memory stays bounded by the block size, not the bank size.
"""
from __future__ import annotations

import torch

from harness.mechanisms.routing.msa import check_routing_keys, ensure_bank_fits, headwise_normalize

BLOCK_CHUNKS = 1 << 16


class RoutingIndex:
    """Routing keys of a bank whose documents all have ``chunks_per_doc`` chunks."""

    def __init__(self, keys: torch.Tensor, n_heads: int, chunks_per_doc: int, block_chunks: int = BLOCK_CHUNKS) -> None:
        if keys.dim() != 2 or keys.shape[0] % chunks_per_doc or keys.shape[1] % n_heads:
            raise ValueError(
                f"keys {tuple(keys.shape)} must be (n_docs * {chunks_per_doc}, router_dim divisible by {n_heads})"
            )
        ensure_bank_fits(keys.shape[0], keys.shape[1], keys.device, keys.dtype)
        self.n_heads = n_heads
        self.chunks_per_doc = chunks_per_doc
        self.block_chunks = max(chunks_per_doc, block_chunks // chunks_per_doc * chunks_per_doc)
        self.keys = headwise_normalize(keys, n_heads).contiguous()

    @property
    def n_docs(self) -> int:
        return self.keys.shape[0] // self.chunks_per_doc

    @property
    def router_dim(self) -> int:
        return self.keys.shape[1]

    def _prepared(self, queries: torch.Tensor) -> torch.Tensor:
        if queries.dim() != 3:
            raise ValueError(f"queries must be (B, S, {self.router_dim}), got {tuple(queries.shape)}")
        check_routing_keys(queries.flatten(0, 1), self.router_dim)
        return (headwise_normalize(queries, self.n_heads) / self.n_heads).flatten(0, 1).to(self.keys.dtype)

    def _block_scores(self, flat: torch.Tensor, batch: int, start: int) -> torch.Tensor:
        block = self.keys[start : start + self.block_chunks]
        chunk_scores = (flat @ block.T).view(batch, -1, block.shape[0]).amax(dim=1)
        return chunk_scores.view(batch, -1, self.chunks_per_doc).amax(dim=-1)

    def document_scores(self, queries: torch.Tensor) -> torch.Tensor:
        """(B, n_docs): each document's best chunk score for queries (B, S, router_dim)."""
        flat = self._prepared(queries)
        return torch.cat(
            [self._block_scores(flat, queries.shape[0], start) for start in range(0, self.keys.shape[0], self.block_chunks)],
            dim=1,
        )

    def top_documents(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(scores, doc indices), each (B, k), keeping only k candidates per block."""
        flat = self._prepared(queries)
        best_scores, best_docs = [], []
        for start in range(0, self.keys.shape[0], self.block_chunks):
            scores = self._block_scores(flat, queries.shape[0], start)
            top = scores.topk(min(k, scores.shape[1]), dim=1)
            best_scores.append(top.values)
            best_docs.append(top.indices + start // self.chunks_per_doc)
        scores, docs = torch.cat(best_scores, dim=1), torch.cat(best_docs, dim=1)
        top = scores.topk(min(k, scores.shape[1]), dim=1)
        return top.values, torch.gather(docs, 1, top.indices)


def random_keys(n_chunks: int, router_dim: int, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """A synthetic bank for throughput figures, refused before allocation if it cannot fit."""
    ensure_bank_fits(n_chunks, router_dim, device)
    return torch.randn(n_chunks, router_dim, generator=generator).to(device)
