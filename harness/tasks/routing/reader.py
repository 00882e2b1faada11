"""The constructed reader: answers the query's masked values by looking their keys up in the routed documents.

The end-to-end figures need a reader that uses the documents a router fetches. The backbone's own
read (its MSA layers attending over the routed documents' pooled K/V) learns that slowly: after
1,600 steps on two CPU cores the gold document alone added 0.04-0.22 to its answers, too little for
an end-to-end claim to mean anything. So the reading path is constructed, and declared as such.

The reader sees what a reader at inference would see: the noisy query and the memory documents. It
is not told which value is asked. It reads the query's layout (where a fact's name, attribute and
value stand) and, at every value position the query shows masked, takes the key the query shows
there (its fact's entity name and attribute) and copies that attribute's value from a memory
document with that name. Where noise hid a key token, or no memory document holds the key, it
answers what the backbone answers without memory. Names are unique, so only the document a fact
comes from can answer it: read through the router's top document alone, the asked value is answered
from memory exactly when that document is the gold one and the asked key survived the noise. Only
the scoring (``score_answers``) looks at which positions were asked and what their values were.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from harness.tasks.routing.workload import Layout, QueryBatch

Reader = Literal["backbone", "lookup"]


@dataclass(frozen=True)
class NoMemoryAnswers:
    """The backbone's answers without memory: the reader's fallback (arm-independent)."""

    tokens: torch.Tensor  # (B, S) argmax token at every position
    log_probs: torch.Tensor  # (B, S) log-probability of the clean token


def fact_keys(layout: Layout, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(values, name_starts, attributes): every value position of the layout's query and where its
    fact's entity name and attribute stand (a needle query's facts each carry their own name; a
    document-shaped query has one name, at its start)."""
    if layout.regime == "uncertain_key":
        values = torch.arange(layout.segment_len - 1, length, layout.segment_len)
        starts = values - (layout.segment_len - 1)
    else:
        values = torch.arange(layout.entity_len + 1, length, 2)
        starts = torch.zeros_like(values)
    return values, starts, values - 1


def lookup_read(
    layout: Layout, noisy: torch.Tensor, memory_documents: torch.Tensor, fallback: NoMemoryAnswers
) -> tuple[torch.Tensor, torch.Tensor]:
    """(answers (B, S), from_memory (B, S) bool): the fallback's answers, with every masked value
    position whose key (as ``noisy`` shows it) a document of ``memory_documents`` (B, k, doc_len)
    holds answered by that document's value."""
    mask = layout.vocabulary.size
    values, starts, attribute_at = (index.to(noisy.device) for index in fact_keys(layout, noisy.shape[1]))
    offsets = torch.arange(layout.entity_len, device=noisy.device)
    names = noisy[:, starts[:, None] + offsets[None, :]]  # (B, facts, entity_len)
    attributes = noisy[:, attribute_at]  # (B, facts)
    key_seen = (names != mask).all(dim=-1) & (attributes != mask) & (noisy[:, values] == mask)
    same_name = (memory_documents[:, None, :, : layout.entity_len] == names[:, :, None, :]).all(dim=-1)  # (B, facts, k)
    facts = memory_documents[..., layout.entity_len :].unflatten(-1, (layout.doc_facts, 2))  # (B, k, doc_facts, 2)
    hits = same_name[..., None] & (facts[:, None, :, :, 0] == attributes[:, :, None, None])  # (B, facts, k, doc_facts)
    found = hits.flatten(2).any(dim=2) & key_seen
    first = hits.flatten(2).double().argmax(dim=2)
    copied = facts[..., 1].flatten(1).gather(1, first)  # (B, facts)
    answers, from_memory = fallback.tokens.clone(), torch.zeros_like(noisy, dtype=torch.bool)
    answers[:, values] = torch.where(found, copied, answers[:, values])
    from_memory[:, values] = found
    return answers, from_memory


def score_answers(
    answers: torch.Tensor, from_memory: torch.Tensor, queries: QueryBatch, fallback: NoMemoryAnswers
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query: the fraction of its asked values answered right and their mean log-probability; a
    value answered from memory has log-probability 0 when right (the reader is sure) and the
    backbone's otherwise, one from the fallback the backbone's."""
    asked = queries.is_value
    right = answers == queries.clean
    log_probs = torch.where(from_memory & right, 0.0, fallback.log_probs.double())
    n_values = asked.sum(dim=1).double()
    accuracy = (right & asked).sum(dim=1).double() / n_values
    return accuracy, (log_probs * asked).sum(dim=1) / n_values


def lookup_answers(
    layout: Layout, queries: QueryBatch, memory_documents: torch.Tensor, fallback: NoMemoryAnswers
) -> tuple[torch.Tensor, torch.Tensor]:
    """``score_answers`` of the reader reading ``memory_documents`` (B, k, doc_len) for the noisy queries."""
    answers, from_memory = lookup_read(layout, queries.noisy, memory_documents, fallback)
    return score_answers(answers, from_memory, queries, fallback)
