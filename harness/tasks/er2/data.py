"""Workload data: byte-level English from ``pydoc_data.topics`` (plain, or with a pass key planted and
asked again later) and multi-query associative recall.

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


# "pass key $48213." planted in a window and asked again later. "$" never occurs in pydoc_data.topics, so
# it marks the cue; the digits are random, so predicting them needs attention that reaches back to the key.
# (Pilots: a decoy number beside the key, or two keys told apart by the cue's last byte, were
# not learned by the teacher in 600-1,200 steps: its recall stayed where the zeroed layer's was.)
PASSKEY_CUE = b"pass key $"
PASSKEY_DIGITS = 5
PASSKEY_SENTENCE = len(PASSKEY_CUE) + PASSKEY_DIGITS + 1  # cue, digits, "."
PASSKEY_SPAN = 2 * PASSKEY_SENTENCE  # the key and the question


def plant_passkeys(windows: Tensor, generator: torch.Generator, asked_at_end: bool = True) -> tuple[Tensor, Tensor]:
    """Overwrite each window [B, L] with a pass-key sentence and, after it, the same sentence again, where
    its digits are asked. ``asked_at_end``: the question is the window's last ``PASSKEY_SENTENCE`` tokens
    and the key is anywhere before it (evaluation: the key spread over the whole context); otherwise the
    question is anywhere after the key (training: a question early in a long window is found by attention
    over few positions, how the retrieval circuit forms in a small budget).

    Returns (tokens [B, L], answer mask [B, L]); as in ``recall_batch`` the mask marks the positions whose
    *next* token is an asked digit (the question's "$" and its digits but the last).
    """
    batch, length = windows.shape
    size = PASSKEY_SENTENCE
    if length < PASSKEY_SPAN:
        raise ValueError(f"a pass key and its question need windows of at least {PASSKEY_SPAN} tokens, got {length}")
    digits = torch.randint(0, 10, (batch, PASSKEY_DIGITS), generator=generator) + ord("0")
    cue = torch.tensor(list(PASSKEY_CUE), dtype=torch.long).expand(batch, -1)
    sentence = torch.cat([cue, digits, torch.full((batch, 1), ord("."), dtype=torch.long)], dim=1)
    if asked_at_end:
        keys = torch.randint(0, length - PASSKEY_SPAN + 1, (batch, 1), generator=generator)
        questions = torch.full((batch, 1), length - size)
    else:  # two sorted distinct slots, the second shifted past the key: no overlap
        slots = torch.rand(batch, length - PASSKEY_SPAN + 2, generator=generator).argsort(-1)[:, :2].sort(-1).values
        keys, questions = slots[:, :1], slots[:, 1:] + size - 1
    offsets = torch.arange(size)
    tokens = windows.long().clone()
    tokens.scatter_(1, keys + offsets, sentence)
    tokens.scatter_(1, questions + offsets, sentence)
    answers = torch.zeros(batch, length, dtype=torch.bool)
    answers.scatter_(1, questions + len(PASSKEY_CUE) - 1 + torch.arange(PASSKEY_DIGITS), True)
    return tokens, answers


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
    value_ids = (tokens - layout.num_keys).clamp(0, layout.num_values - 1)
    steps = tokens.shape[1]
    positions = torch.arange(steps).expand_as(tokens)
    # each value's first position per sequence: the values seen up to t are the first sightings up to t
    # (per position, not a [B,T,values] table: that cost grew with the vocabulary)
    first = torch.full((tokens.shape[0], layout.num_values), steps, dtype=torch.long)
    first = first.scatter_reduce(1, value_ids, torch.where(is_value, positions, steps), reduce="amin")
    first_sighting = is_value & (first.gather(1, value_ids) == positions)
    distinct = first_sighting.cumsum(1).clamp_min(1)  # values seen up to and including t
    per_query = answers.to(torch.float32) / distinct
    return per_query.sum(1) / answers.sum(1).clamp_min(1)
