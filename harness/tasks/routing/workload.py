"""The key=value memory workload: synthetic documents of facts and queries about them.

Every chunk of a document holds one fact laid out as ``key = value filler...``: keys are distinct
within a document (drawn from a shared key vocabulary, so a key recurs across documents), values
and fillers are random. A query quotes some of its gold document's facts at their document slots
among fresh filler; its value tokens are always masked and its other tokens are masked with
diffusion noise at step t. Everything is drawn from explicit generators, so a seed fixes the data.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Vocabulary:
    """Token id layout: '=' first, then fillers, keys and values; MASK is ``size``."""

    n_fillers: int
    n_keys: int
    n_values: int

    EQUALS = 0

    @property
    def filler_start(self) -> int:
        return 1

    @property
    def key_start(self) -> int:
        return 1 + self.n_fillers

    @property
    def value_start(self) -> int:
        return 1 + self.n_fillers + self.n_keys

    @property
    def size(self) -> int:
        return 1 + self.n_fillers + self.n_keys + self.n_values


@dataclass(frozen=True)
class Layout:
    vocabulary: Vocabulary
    chunk_size: int
    doc_facts: int
    query_facts: int

    def __post_init__(self) -> None:
        if self.chunk_size < 3:
            raise ValueError(f"chunk_size must be >= 3 to hold 'key = value', got {self.chunk_size}")
        if not 1 <= self.query_facts <= self.doc_facts:
            raise ValueError(f"query_facts must be in 1..doc_facts={self.doc_facts}, got {self.query_facts}")
        if self.doc_facts > self.vocabulary.n_keys:
            raise ValueError(f"doc_facts {self.doc_facts} exceeds the {self.vocabulary.n_keys} distinct keys")

    @property
    def doc_len(self) -> int:
        return self.doc_facts * self.chunk_size

    @property
    def query_len(self) -> int:
        return self.doc_len


def make_documents(layout: Layout, n_docs: int, generator: torch.Generator) -> torch.Tensor:
    """(n_docs, doc_len) token ids; chunk c of a document is its fact c."""
    vocab = layout.vocabulary
    keys = torch.rand(n_docs, vocab.n_keys, generator=generator).argsort(dim=-1)[:, : layout.doc_facts]
    values = torch.randint(vocab.n_values, (n_docs, layout.doc_facts), generator=generator)
    n_filler = layout.chunk_size - 3
    fillers = torch.randint(vocab.n_fillers, (n_docs, layout.doc_facts, n_filler), generator=generator)
    chunks = torch.cat(
        [
            (keys + vocab.key_start).unsqueeze(-1),
            torch.full((n_docs, layout.doc_facts, 1), vocab.EQUALS),
            (values + vocab.value_start).unsqueeze(-1),
            fillers + vocab.filler_start,
        ],
        dim=-1,
    )
    return chunks.reshape(n_docs, layout.doc_len)


@dataclass
class QueryBatch:
    noisy: torch.Tensor  # (B, S) token ids with MASK where masked
    clean: torch.Tensor  # (B, S) the passage
    masked: torch.Tensor  # (B, S) bool
    is_value: torch.Tensor  # (B, S) bool: the value positions (always masked)
    t: torch.Tensor  # (B,) diffusion step
    gold: torch.Tensor  # (B,) index of the gold document
    fact_chunks: torch.Tensor  # (B, doc_facts) bool: the gold chunks the query quotes

    def to(self, device: torch.device) -> "QueryBatch":
        return QueryBatch(**{name: value.to(device) for name, value in vars(self).items()})


def make_queries(
    layout: Layout,
    documents: torch.Tensor,
    gold: torch.Tensor,
    max_noise_step: int,
    n_diffusion_steps: int,
    generator: torch.Generator,
) -> QueryBatch:
    """Queries quoting ``query_facts`` random facts of each gold document at their document
    slots (positions restart at 0 in documents and queries alike); the other slots hold fresh
    filler, so a query is as long as a document."""
    batch = gold.shape[0]
    vocab = layout.vocabulary
    quoted = torch.rand(batch, layout.doc_facts, generator=generator).argsort(dim=-1)[:, : layout.query_facts]
    fact_chunks = torch.zeros(batch, layout.doc_facts, dtype=torch.bool)
    fact_chunks.scatter_(1, quoted, True)
    filler = torch.randint(vocab.n_fillers, (batch, layout.doc_len), generator=generator) + vocab.filler_start
    keep = fact_chunks.repeat_interleave(layout.chunk_size, dim=1)
    clean = torch.where(keep, documents[gold], filler)
    slot_offset = torch.arange(layout.doc_len) % layout.chunk_size
    is_value = keep & (slot_offset == 2)[None, :]
    t = torch.randint(1, max_noise_step + 1, (batch,), generator=generator)
    noise = torch.rand(clean.shape, generator=generator) < (t.float() / n_diffusion_steps)[:, None]
    masked = noise | is_value
    return QueryBatch(
        noisy=clean.masked_fill(masked, vocab.size),
        clean=clean,
        masked=masked,
        is_value=is_value,
        t=t,
        gold=gold,
        fact_chunks=fact_chunks,
    )


def stream(seed: int, *purpose: object) -> torch.Generator:
    """A CPU generator fixed by the trial seed and a purpose, so arms share data and order."""
    text = "/".join(str(p) for p in (seed, *purpose))
    value = 0
    for char in text.encode():
        value = (value * 1_000_003 + char) % (2**61 - 1)
    return torch.Generator().manual_seed(value)
