"""The constructed reader answers from memory exactly when a memory document holds the asked key as the
noisy query shows it, and otherwise as the backbone without memory; run end to end, what it adds with
the gold document is measured (the premise gold_document_answers) and follows the routed documents."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.execution.executor import run_single
from harness.tasks.routing.reader import NoMemoryAnswers, asked_keys, lookup_answers
from harness.tasks.routing.task import RoutingTask
from harness.tasks.routing.workload import Layout, Vocabulary, make_documents, make_queries
from test_routing_task import TINY

LAYOUT = Layout(Vocabulary(n_entities=16, n_attributes=4, n_values=8), entity_len=2, doc_facts=4, query_facts=1,
                chunk_size=2, regime="uncertain_key", segments=4)
MASK = LAYOUT.vocabulary.size


def _batch(noise_step: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    documents = make_documents(LAYOUT, 64, generator)
    gold = torch.randint(64, (400,), generator=generator)
    queries = make_queries(LAYOUT, documents, gold, noise_step, 100, generator)
    return documents, queries


def _wrong_fallback(queries) -> NoMemoryAnswers:
    """A fallback that is always wrong on the asked values (BLANK is never a value)."""
    return NoMemoryAnswers(tokens=torch.full_like(queries.clean, LAYOUT.vocabulary.BLANK),
                           log_probs=torch.full(queries.clean.shape, -3.0))


def _key_visible(queries) -> torch.Tensor:
    rows, _, names, attributes = asked_keys(LAYOUT, queries)
    visible = (names != MASK).all(dim=1) & (attributes != MASK)
    return torch.zeros(queries.gold.shape[0], dtype=torch.bool).index_put_((rows,), visible)


def test_the_gold_document_answers_exactly_the_queries_whose_key_survived_the_noise() -> None:
    documents, queries = _batch(noise_step=40)
    survived = _key_visible(queries)
    assert 0.1 < float(survived.double().mean()) < 0.9  # the noise hides some keys and leaves others
    accuracy, log_prob = lookup_answers(LAYOUT, queries, documents[queries.gold][:, None], _wrong_fallback(queries))
    assert torch.equal(accuracy == 1.0, survived) and torch.equal(accuracy == 0.0, ~survived)
    assert torch.equal(log_prob == 0.0, survived) and bool((log_prob[~survived] == -3.0).all())


def test_distractor_documents_never_answer_even_the_queries_own_distractor_facts() -> None:
    documents, queries = _batch(noise_step=1)
    # memory of the documents of the query's other segments, whose names and facts the query shows
    others = queries.token_docs[:, :: LAYOUT.segment_len]
    distractors = torch.stack([row[row != gold] for row, gold in zip(others, queries.gold)])
    accuracy, _ = lookup_answers(LAYOUT, queries, documents[distractors], _wrong_fallback(queries))
    assert bool((accuracy == 0.0).all())
    with_gold = torch.cat([distractors, queries.gold[:, None]], dim=1)
    accuracy, _ = lookup_answers(LAYOUT, queries, documents[with_gold], _wrong_fallback(queries))
    assert torch.equal(accuracy == 1.0, _key_visible(queries))


def test_a_masked_key_token_falls_back_to_the_backbone_answer() -> None:
    documents, queries = _batch(noise_step=1)
    rows, positions, _, _ = asked_keys(LAYOUT, queries)
    queries.noisy[rows, positions - 1] = MASK  # hide every asked attribute
    fallback = NoMemoryAnswers(tokens=queries.clean.clone(), log_probs=torch.full(queries.clean.shape, -0.5))
    accuracy, log_prob = lookup_answers(LAYOUT, queries, documents[queries.gold][:, None], fallback)
    assert bool((accuracy == 1.0).all()) and bool((log_prob == -0.5).all())


@pytest.mark.integration  # the real task end to end
def test_the_lookup_reader_lifts_the_answers_and_leaves_routing_untouched(tmp_path: Path) -> None:
    base = {**TINY, "router": "mean_pool", "regime": "uncertain_key", "n_attributes": 4}
    backbone = run_single(RoutingTask, base, seed=5, work_root=tmp_path / "backbone")
    lookup = run_single(RoutingTask, {**base, "reader": "lookup"}, seed=5, work_root=tmp_path / "lookup")
    assert backbone.status == lookup.status == "finished", (backbone.error, lookup.error)
    a, b = backbone.metrics, lookup.metrics
    for key in ("recall@1", "recall@2", "acc_none", "asked_slot_auroc", "probe_doc_acc"):
        assert a[key] == b[key], key
    # tiny queries hide few keys: the gold document answers most of what the untrained backbone cannot
    assert b["oracle_lift"] > 0.5 > a["oracle_lift"]
    assert b["acc_none"] <= b["acc_routed"] <= b["acc_oracle"]
