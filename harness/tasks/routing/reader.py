"""The constructed reader: answers an asked value by looking its key up in the memory's documents.

The end-to-end figures need a reader that uses the documents a router fetches. The backbone's own
read (its MSA layers attending over the routed documents' pooled K/V) learns that slowly: after
1,600 steps on two CPU cores the gold document alone added 0.04-0.22 to its answers, too little for
an end-to-end claim to mean anything. Training it further would need a GPU, so the reading path is
constructed instead, and declared as such wherever its figures appear:

for every asked value, the key is the entity name and attribute of its fact as the (noisy) query
shows them; the reader copies the value of the fact with that attribute in the memory document with
that entity name. Where noise masked a key token, or no memory document holds the key, it answers
what the backbone answers without memory. Names are unique, so a distractor document never matches:
the reader answers from memory exactly when the gold document was fetched and its key survived the
noise. Whether it reads memory is measured, not assumed (``acc_oracle - acc_none``, the premise
``gold_document_answers``): it fails where the keys are masked or the documents do not hold them.
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


def asked_keys(layout: Layout, queries: QueryBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, positions, names (n, entity_len), attributes (n,)): every asked value and its key as
    the noisy query shows it (MASK where noise hid a key token)."""
    rows, positions = queries.is_value.nonzero(as_tuple=True)
    if layout.regime == "uncertain_key":
        starts = positions - (layout.segment_len - 1)
    else:
        starts = torch.zeros_like(positions)
    offsets = torch.arange(layout.entity_len, device=positions.device)
    names = queries.noisy[rows[:, None], starts[:, None] + offsets[None, :]]
    attributes = queries.noisy[rows, positions - 1]
    return rows, positions, names, attributes


def lookup_answers(
    layout: Layout, queries: QueryBatch, memory_documents: torch.Tensor, fallback: NoMemoryAnswers
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query: the fraction of its asked values answered right and their mean log-probability,
    reading ``memory_documents`` (B, k, doc_len) token ids; a value answered from memory has
    log-probability 0 (the reader is sure), one from the fallback the backbone's."""
    rows, positions, names, attributes = asked_keys(layout, queries)
    documents = memory_documents[rows]  # (n, k, doc_len)
    same_name = (documents[..., : layout.entity_len] == names[:, None, :]).all(dim=-1)  # (n, k)
    facts = documents[..., layout.entity_len :].unflatten(-1, (layout.doc_facts, 2))  # (n, k, facts, 2)
    hits = same_name[..., None] & (facts[..., 0] == attributes[:, None, None])  # (n, k, facts)
    found = hits.flatten(1).any(dim=1)
    first = hits.flatten(1).double().argmax(dim=1)
    copied = facts[..., 1].flatten(1).gather(1, first[:, None]).squeeze(1)
    answer = torch.where(found, copied, fallback.tokens[rows, positions])
    correct = (answer == queries.clean[rows, positions]).double()
    log_prob = torch.where(found & (copied == queries.clean[rows, positions]), 0.0,
                           fallback.log_probs[rows, positions].double())
    n_values = queries.is_value.sum(dim=1).double()
    accuracy = torch.zeros(queries.gold.shape[0], dtype=torch.float64, device=rows.device).index_add_(0, rows, correct)
    mean_log_prob = torch.zeros_like(accuracy).index_add_(0, rows, log_prob)
    return accuracy / n_values, mean_log_prob / n_values
