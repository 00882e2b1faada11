"""Workload data: byte-level English from ``pydoc_data.topics`` and multi-query associative recall.

Both ship with Python or are generated, so nothing is downloaded at run time.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch
from torch import Tensor

HELD_OUT_EVERY = 4  # every 4th topic (sorted by name) is a held-out document


@dataclass(frozen=True)
class Corpus:
    """Training stream and held-out documents, all as uint8 byte tensors."""

    train: Tensor
    held_out: dict[str, Tensor]
    checksum: str


def load_pydoc_corpus() -> Corpus:
    """Topics split by name: training topics are joined into one stream, held-out topics stay documents."""
    from pydoc_data.topics import topics

    names = sorted(topics)
    digest = hashlib.sha256()
    train_parts: list[bytes] = []
    held_out: dict[str, Tensor] = {}
    for index, name in enumerate(names):
        data = topics[name].encode("utf-8")
        digest.update(name.encode() + b"\0" + data)
        if index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1:
            held_out[name] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        else:
            train_parts.append(data)
    train = torch.frombuffer(bytearray(b"\n\n".join(train_parts)), dtype=torch.uint8)
    return Corpus(train=train, held_out=held_out, checksum=digest.hexdigest()[:16])


def sample_windows(stream: Tensor, batch: int, length: int, generator: torch.Generator) -> Tensor:
    """``batch`` random windows of ``length`` tokens from a 1-D stream, as int64 [batch, length]."""
    if stream.numel() <= length:
        raise ValueError(f"stream of {stream.numel()} tokens is too short for windows of {length}")
    starts = torch.randint(0, stream.numel() - length, (batch,), generator=generator)
    return torch.stack([stream[s : s + length] for s in starts.tolist()]).long()


def document_windows(documents: dict[str, Tensor], length: int, limit: int) -> tuple[list[str], Tensor]:
    """The first ``length`` tokens of each held-out document long enough, at most ``limit`` of them."""
    names = [name for name, doc in documents.items() if doc.numel() >= length][:limit]
    if not names:
        raise ValueError(f"no held-out document has {length} tokens")
    return names, torch.stack([documents[name][:length] for name in names]).long()


@dataclass(frozen=True)
class RecallLayout:
    """Token layout of multi-query associative recall: keys, values, then a filler token."""

    num_keys: int = 48
    num_values: int = 48

    @property
    def vocab_size(self) -> int:
        return self.num_keys + self.num_values + 1

    @property
    def filler(self) -> int:
        return self.num_keys + self.num_values


def recall_batch(
    layout: RecallLayout, batch: int, length: int, pairs: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Sequences of ``pairs`` key-value bindings followed by queries (key then its value) among filler.

    Returns (tokens [batch, length], answer mask [batch, length]) where the mask marks the positions
    whose *next* token is an answer, i.e. query keys: predicting it needs recall of the binding.
    """
    if 2 * pairs + 2 > length or pairs > layout.num_keys:
        raise ValueError(f"{pairs} pairs do not fit in {length} tokens with {layout.num_keys} keys")
    tokens = torch.full((batch, length), layout.filler, dtype=torch.long)
    answers = torch.zeros(batch, length, dtype=torch.bool)
    slots = (length - 2 * pairs) // 2  # query slots of two tokens after the bindings
    queries = min(pairs, slots)
    # Whole batch at once (argsort of uniform noise = one random permutation per row): the teacher
    # draws thousands of these batches, a per-row loop would dominate its training time.
    keys = torch.rand(batch, layout.num_keys, generator=generator).argsort(-1)[:, :pairs]
    values = layout.num_keys + torch.randint(0, layout.num_values, (batch, pairs), generator=generator)
    tokens[:, 0 : 2 * pairs : 2] = keys
    tokens[:, 1 : 2 * pairs : 2] = values
    asked = torch.rand(batch, pairs, generator=generator).argsort(-1)[:, :queries]
    chosen = torch.rand(batch, slots, generator=generator).argsort(-1)[:, :queries].sort(-1).values
    positions = 2 * pairs + 2 * chosen
    rows = torch.arange(batch)[:, None]
    tokens[rows, positions] = keys.gather(1, asked)
    tokens[rows, positions + 1] = values.gather(1, asked)
    answers[rows, positions] = True
    return tokens, answers


def recall_mixture_batch(
    layout: RecallLayout, batch: int, length: int, pairs: tuple[int, int], generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Like ``recall_batch``, but each sequence draws its own number of bindings, log-uniformly from
    ``pairs`` = (low, high) inclusive, so every doubling of the load is as frequent: one teacher trained
    on it serves every point of a bindings sweep instead of one teacher per point."""
    low, high = pairs
    if not 1 <= low <= high:
        raise ValueError(f"binding range {pairs} must satisfy 1 <= low <= high")
    logs = torch.rand(batch, generator=generator) * (math.log(high + 1) - math.log(low)) + math.log(low)
    counts = logs.exp().floor().long().clamp(low, high)
    tokens = torch.empty(batch, length, dtype=torch.long)
    answers = torch.empty(batch, length, dtype=torch.bool)
    for count in counts.unique().tolist():
        rows = (counts == count).nonzero().flatten()
        tokens[rows], answers[rows] = recall_batch(layout, rows.numel(), length, count, generator)
    return tokens, answers


def guess_from_context_recall(layout: RecallLayout, tokens: Tensor, answers: Tensor) -> Tensor:
    """Per sequence [B]: expected recall of answering each query with a value drawn uniformly from the
    distinct values shown before it. The bound value is always among them, so this is what a model
    scores that knows the answer is "some value from the context" without recalling which."""
    is_value = (tokens >= layout.num_keys) & (tokens < layout.filler)
    seen = torch.zeros(*tokens.shape, layout.num_values, dtype=torch.bool)
    seen.scatter_(2, (tokens - layout.num_keys).clamp(0, layout.num_values - 1).unsqueeze(-1), is_value.unsqueeze(-1))
    distinct = seen.cummax(dim=1).values.sum(-1).clamp_min(1)  # values seen up to and including t
    per_query = answers.to(torch.float32) / distinct
    return per_query.sum(1) / answers.sum(1).clamp_min(1)
