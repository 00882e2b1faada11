"""The entity memory workload: synthetic documents of attribute=value facts about named entities.

A document is ``entity_name attribute value attribute value ...``: the entity name is
``entity_len`` tokens, unique within a set of documents (so even a large bank has exactly one
right answer), followed by ``doc_facts`` distinct attributes with values drawn at random per
document. A query is laid out like its gold document: the entity name, the ``query_facts``
asked attributes at their document slots with the values masked, every other slot BLANK (plus
diffusion noise at step t). Values are random, so only the gold document can supply them: no
memory gives chance accuracy, and routing means matching the entity name. Keeping the asked
facts at their slots lets the backbone find the fact in memory by attribute or by slot.
Names are split into disjoint sets (``split_names``): the documents the backbone and the routers
train on never share an entity name with the held-out bank they are evaluated on.
Everything is drawn from explicit generators (the trial's named streams), so a seed fixes the data.

Two regimes (``Layout.regime``) share the documents and differ in the query:
- ``visible_entity`` (above): the route is named by the query's entity tokens, visible and the
  tokens the model is surest about.
- ``uncertain_key`` (multi-key needle): a query is ``segments`` facts ``entity attribute value``
  from distinct documents of the same set; every value is visible but the gold segment's, which is
  masked. Every segment's entity is equally visible and confident, so only the masked (uncertain)
  position tells which of them the memory must answer: the seed's premise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

import torch


@dataclass(frozen=True)
class Vocabulary:
    """Token id layout: BLANK, entity tokens, attributes, values; MASK is ``size``."""

    n_entities: int
    n_attributes: int
    n_values: int

    BLANK = 0

    @property
    def entity_start(self) -> int:
        return 1

    @property
    def attribute_start(self) -> int:
        return 1 + self.n_entities

    @property
    def value_start(self) -> int:
        return 1 + self.n_entities + self.n_attributes

    @property
    def size(self) -> int:
        return 1 + self.n_entities + self.n_attributes + self.n_values


Regime = Literal["visible_entity", "uncertain_key"]
REGIMES: tuple[str, ...] = ("visible_entity", "uncertain_key")


@dataclass(frozen=True)
class Layout:
    vocabulary: Vocabulary
    entity_len: int
    doc_facts: int
    query_facts: int
    chunk_size: int
    regime: Regime = "visible_entity"
    segments: int = 4  # uncertain_key: facts per query, one of them asked

    def __post_init__(self) -> None:
        if self.regime not in REGIMES:
            raise ValueError(f"unknown regime {self.regime!r}; regimes: {', '.join(REGIMES)}")
        if self.regime == "uncertain_key" and self.segments < 2:
            raise ValueError(f"uncertain_key needs at least 2 segments, got {self.segments}")
        if self.entity_len < 1 or self.chunk_size < 1:
            raise ValueError(f"entity_len and chunk_size must be >= 1, got {self.entity_len}, {self.chunk_size}")
        if not 1 <= self.query_facts <= self.doc_facts:
            raise ValueError(f"query_facts must be in 1..doc_facts={self.doc_facts}, got {self.query_facts}")
        if self.doc_facts > self.vocabulary.n_attributes:
            raise ValueError(f"doc_facts {self.doc_facts} exceeds the {self.vocabulary.n_attributes} attributes")

    @property
    def doc_len(self) -> int:
        return self.entity_len + 2 * self.doc_facts

    @property
    def segment_len(self) -> int:
        return self.entity_len + 2

    @property
    def query_len(self) -> int:
        return self.segments * self.segment_len if self.regime == "uncertain_key" else self.doc_len

    @property
    def chunks_per_doc(self) -> int:
        return math.ceil(self.doc_len / self.chunk_size)

    @property
    def max_documents(self) -> int:
        """How many documents can have distinct entity names."""
        return self.vocabulary.n_entities**self.entity_len

    def entity_chunks(self) -> torch.Tensor:
        """(chunks_per_doc,) bool: the chunks holding entity-name tokens (the routing targets)."""
        return torch.arange(self.chunks_per_doc) * self.chunk_size < self.entity_len


PERMUTED_NAME_SPACE = 1 << 22
NAME_DRAWS = 4096


def distinct_names(space: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """n distinct indices in [0, space), uniformly at random; the first m of them do not depend
    on n (a prefix of one permutation, or of a fixed-size stream of draws without repeats when
    the space is too large to permute)."""
    if n > space:
        raise ValueError(f"{n} documents need more than the {space} distinct entity names")
    if space <= PERMUTED_NAME_SPACE:
        return torch.randperm(space, generator=generator)[:n]
    seen: dict[int, None] = {}
    while len(seen) < n:
        for name in torch.randint(space, (NAME_DRAWS,), generator=generator).tolist():
            seen.setdefault(name)
    return torch.tensor(list(seen)[:n])


def split_names(layout: Layout, sizes: Sequence[int], generator: torch.Generator) -> list[torch.Tensor]:
    """Disjoint sets of entity-name indices, one per size, taken in order from one draw of
    distinct names: a set depends only on the generator and the sizes before it."""
    names = distinct_names(layout.max_documents, sum(sizes), generator)
    ends = torch.tensor([0, *sizes]).cumsum(0).tolist()
    return [names[start:end] for start, end in zip(ends[:-1], ends[1:])]


def make_documents(
    layout: Layout, n_docs: int, generator: torch.Generator, names: torch.Tensor | None = None
) -> torch.Tensor:
    """(n_docs, doc_len) token ids with distinct entity names (the given name indices, else drawn)."""
    if names is None:
        names = split_names(layout, [n_docs], generator)[0]
    elif names.shape != (n_docs,):
        raise ValueError(f"names must have shape ({n_docs},), got {tuple(names.shape)}")
    vocab = layout.vocabulary
    digits = vocab.n_entities ** torch.arange(layout.entity_len - 1, -1, -1)
    entity = names[:, None] // digits % vocab.n_entities + vocab.entity_start
    attributes = torch.rand(n_docs, vocab.n_attributes, generator=generator).argsort(dim=-1)[:, : layout.doc_facts]
    values = torch.randint(vocab.n_values, (n_docs, layout.doc_facts), generator=generator)
    facts = torch.stack([attributes + vocab.attribute_start, values + vocab.value_start], dim=-1).flatten(1)
    return torch.cat([entity, facts], dim=1)


@dataclass
class QueryBatch:
    noisy: torch.Tensor  # (B, S) token ids with MASK where masked
    clean: torch.Tensor  # (B, S) the query
    masked: torch.Tensor  # (B, S) bool
    is_value: torch.Tensor  # (B, S) bool: the asked values (always masked)
    t: torch.Tensor  # (B,) diffusion step
    gold: torch.Tensor  # (B,) index of the gold document
    positive_chunks: torch.Tensor  # (B, chunks_per_doc) bool: gold chunks the router must find
    route_tokens: torch.Tensor  # (B, S) bool: query tokens that identify the gold document (oracle pooling)
    token_docs: torch.Tensor  # (B, S) long: the document whose fact (or name) each token comes from

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
    """Queries about each gold document in the layout's regime: ``visible_entity`` asks
    ``query_facts`` random facts laid out at their document slots (positions restart at 0 in
    documents and queries alike); ``uncertain_key`` see ``needle_queries``."""
    if layout.regime == "uncertain_key":
        return needle_queries(layout, documents, gold, max_noise_step, n_diffusion_steps, generator)
    batch = gold.shape[0]
    asked = torch.rand(batch, layout.doc_facts, generator=generator).argsort(dim=-1)[:, : layout.query_facts]
    asked_slots = torch.zeros(batch, layout.doc_facts, dtype=torch.bool)
    asked_slots.scatter_(1, asked, True)
    fact_tokens = asked_slots.repeat_interleave(2, dim=1)
    keep = torch.cat([torch.ones(batch, layout.entity_len, dtype=torch.bool), fact_tokens], dim=1)
    clean = documents[gold].masked_fill(~keep, layout.vocabulary.BLANK)
    is_value = torch.cat([torch.zeros(batch, layout.entity_len, dtype=torch.bool), fact_tokens], dim=1)
    is_value[:, layout.entity_len :: 2] = False
    route_tokens = torch.arange(layout.query_len).expand(batch, -1) < layout.entity_len
    token_docs = gold[:, None].expand(-1, layout.query_len)
    return _noised(layout, clean, is_value, gold, route_tokens, token_docs, max_noise_step, n_diffusion_steps, generator)


def _noised(layout: Layout, clean: torch.Tensor, is_value: torch.Tensor, gold: torch.Tensor,
            route_tokens: torch.Tensor, token_docs: torch.Tensor, max_noise_step: int, n_diffusion_steps: int,
            generator: torch.Generator) -> QueryBatch:
    """A query batch at a random diffusion step: the asked values always masked, other tokens by the noise."""
    t = torch.randint(1, max_noise_step + 1, (gold.shape[0],), generator=generator)
    noise = torch.rand(clean.shape, generator=generator) < (t.float() / n_diffusion_steps)[:, None]
    masked = noise | is_value
    return QueryBatch(
        noisy=clean.masked_fill(masked, layout.vocabulary.size),
        clean=clean,
        masked=masked,
        is_value=is_value,
        t=t,
        gold=gold,
        positive_chunks=layout.entity_chunks().expand(gold.shape[0], -1).clone(),
        route_tokens=route_tokens,
        token_docs=token_docs.clone(),
    )


def distractor_documents(n_docs: int, gold: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """(B, count) documents per query, distinct within a row and never the row's gold document."""
    if count >= n_docs:
        raise ValueError(f"{count} distractors per query need more than {n_docs} documents")
    offsets = torch.randint(1, n_docs, (gold.shape[0], count), generator=generator)
    while True:
        ordered = offsets.sort(dim=1).values
        repeated = (ordered[:, 1:] == ordered[:, :-1]).any(dim=1)
        if not bool(repeated.any()):
            return (gold[:, None] + offsets) % n_docs
        offsets[repeated] = torch.randint(1, n_docs, (int(repeated.sum()), count), generator=generator)


def needle_queries(
    layout: Layout,
    documents: torch.Tensor,
    gold: torch.Tensor,
    max_noise_step: int,
    n_diffusion_steps: int,
    generator: torch.Generator,
) -> QueryBatch:
    """Multi-key needle queries: ``segments`` facts ``entity attribute value`` of distinct
    documents in random order, one of them (a random fact of the gold document) with its value
    masked; the others are visible, confident distractors that name other documents."""
    batch, segments, entity_len = gold.shape[0], layout.segments, layout.entity_len
    others = distractor_documents(documents.shape[0], gold, segments - 1, generator)
    order = torch.rand(batch, segments, generator=generator).argsort(dim=1)
    segment_docs = torch.cat([gold[:, None], others], dim=1).gather(1, order)
    is_gold = order == 0  # (B, segments): the segment holding the gold document
    fact = torch.randint(layout.doc_facts, (batch, segments), generator=generator)
    docs = documents[segment_docs]  # (B, segments, doc_len)
    attribute_at = (entity_len + 2 * fact)[..., None]
    segment = torch.cat([docs[..., :entity_len], docs.gather(2, attribute_at), docs.gather(2, attribute_at + 1)], dim=2)
    clean = segment.flatten(1)
    within = torch.arange(layout.segment_len)
    is_value = (is_gold[..., None] & (within == layout.segment_len - 1)).flatten(1)
    route_tokens = (is_gold[..., None] & (within < entity_len)).flatten(1)
    token_docs = segment_docs.repeat_interleave(layout.segment_len, dim=1)
    return _noised(layout, clean, is_value, gold, route_tokens, token_docs, max_noise_step, n_diffusion_steps, generator)

