"""The entity workload: names unique per bank, queries laid out like their gold document with
exactly the asked values masked, and both learned arms starting from the same router weights."""
from __future__ import annotations

import pytest
import torch

from harness.tasks.routing.workload import Layout, Vocabulary, make_documents, make_queries


def _layout() -> Layout:
    return Layout(Vocabulary(n_entities=6, n_attributes=5, n_values=7), entity_len=2, doc_facts=3,
                  query_facts=2, chunk_size=2)


def test_documents_have_distinct_names_and_distinct_attributes() -> None:
    layout = _layout()
    docs = make_documents(layout, 36, torch.Generator().manual_seed(0))
    vocab = layout.vocabulary
    assert docs.shape == (36, layout.doc_len)
    names = {tuple(row) for row in docs[:, : layout.entity_len].tolist()}
    assert len(names) == 36
    assert bool(((docs[:, :2] >= vocab.entity_start) & (docs[:, :2] < vocab.attribute_start)).all())
    attributes, values = docs[:, 2::2], docs[:, 3::2]
    assert all(len(set(row)) == layout.doc_facts for row in attributes.tolist())
    assert bool(((values >= vocab.value_start) & (values < vocab.size)).all())
    with pytest.raises(ValueError, match="37 documents"):
        make_documents(layout, 37, torch.Generator().manual_seed(0))


def test_queries_mask_exactly_the_asked_values_at_their_document_slots() -> None:
    layout = _layout()
    docs = make_documents(layout, 20, torch.Generator().manual_seed(1))
    gold = torch.tensor([3, 3, 7, 19])
    batch = make_queries(layout, docs, gold, max_noise_step=1, n_diffusion_steps=1000,
                         generator=torch.Generator().manual_seed(2))
    blank, mask = layout.vocabulary.BLANK, layout.vocabulary.size
    for row in range(4):
        clean, doc = batch.clean[row], docs[gold[row]]
        assert torch.equal(clean[:2], doc[:2])
        kept = clean != blank
        assert torch.equal(clean[kept], doc[kept])
        assert int(kept.sum()) == layout.entity_len + 2 * layout.query_facts
        values = batch.is_value[row].nonzero().flatten()
        assert len(values) == layout.query_facts and bool((values % 2 == 1).all()) and bool(kept[values].all())
    assert bool(batch.masked[batch.is_value].all())
    assert bool((batch.noisy[batch.masked] == mask).all()) and bool((batch.noisy[~batch.masked] == batch.clean[~batch.masked]).all())
    assert torch.equal(batch.positive_chunks, torch.tensor([[True, False, False, False]]).expand(4, -1))
