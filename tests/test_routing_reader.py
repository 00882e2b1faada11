"""The constructed reader finds the masked values itself (it is never told which one is asked) and answers
one from memory exactly when a read document holds its key as the noisy query shows it, otherwise as the
backbone without memory; run end to end, it reads the router's top read_k documents, and what it adds with
the gold document is measured (the premise gold_document_answers)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.execution.executor import run_single
from harness.tasks.routing.reader import NoMemoryAnswers, fact_keys, lookup_answers, lookup_read
from harness.tasks.routing.task import RoutingTask
from harness.tasks.routing.workload import Layout, QueryBatch, Vocabulary, make_documents, make_queries
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
    """Per query: whether the asked fact's entity name and attribute survived the noise (test-side, from the truth)."""
    _, starts, attributes = fact_keys(LAYOUT, LAYOUT.query_len)
    asked = queries.is_value[:, LAYOUT.segment_len - 1 :: LAYOUT.segment_len].float().argmax(dim=1)
    rows = torch.arange(queries.gold.shape[0])
    names = queries.noisy[rows[:, None], starts[asked][:, None] + torch.arange(LAYOUT.entity_len)]
    return (names != MASK).all(dim=1) & (queries.noisy[rows, attributes[asked]] != MASK)


def test_the_gold_document_answers_exactly_the_queries_whose_key_survived_the_noise() -> None:
    documents, queries = _batch(noise_step=40)
    survived = _key_visible(queries)
    assert 0.1 < float(survived.double().mean()) < 0.9  # the noise hides some keys and leaves others
    accuracy, log_prob = lookup_answers(LAYOUT, queries, documents[queries.gold][:, None], _wrong_fallback(queries))
    assert torch.equal(accuracy == 1.0, survived) and torch.equal(accuracy == 0.0, ~survived)
    assert torch.equal(log_prob == 0.0, survived) and bool((log_prob[~survived] == -3.0).all())


def test_distractor_documents_never_answer_the_asked_value() -> None:
    documents, queries = _batch(noise_step=1)
    # memory of the documents of the query's other segments, whose names and facts the query shows
    others = queries.token_docs[:, :: LAYOUT.segment_len]
    distractors = torch.stack([row[row != gold] for row, gold in zip(others, queries.gold)])
    accuracy, _ = lookup_answers(LAYOUT, queries, documents[distractors], _wrong_fallback(queries))
    assert bool((accuracy == 0.0).all())
    with_gold = torch.cat([distractors, queries.gold[:, None]], dim=1)
    accuracy, _ = lookup_answers(LAYOUT, queries, documents[with_gold], _wrong_fallback(queries))
    assert torch.equal(accuracy == 1.0, _key_visible(queries))


def test_the_reader_is_not_told_which_value_is_asked() -> None:
    """It fills every masked value whose key a read document holds, the distractors' masked values
    too, and only those: what it answers depends on the noisy query and the documents alone."""
    documents, queries = _batch(noise_step=60)
    every_named = queries.token_docs[:, :: LAYOUT.segment_len]
    answers, from_memory = lookup_read(LAYOUT, queries.noisy, documents[every_named], _wrong_fallback(queries))
    values = torch.zeros_like(queries.is_value)
    values[:, LAYOUT.segment_len - 1 :: LAYOUT.segment_len] = True
    assert bool(from_memory[~values].logical_not().all())  # never a name or attribute position
    assert bool((from_memory & values & ~queries.masked).logical_not().all())  # never a value the query shows
    assert bool((from_memory & ~queries.is_value).any())  # distractors' masked values read as well
    assert torch.equal(answers[from_memory], queries.clean[from_memory])  # names are unique: each is its own fact's
    shuffled = QueryBatch(**{**vars(queries), "is_value": queries.is_value.roll(1, dims=0)})
    again, _ = lookup_read(LAYOUT, shuffled.noisy, documents[every_named], _wrong_fallback(queries))
    assert torch.equal(answers, again)


def test_a_masked_key_token_falls_back_to_the_backbone_answer() -> None:
    documents, queries = _batch(noise_step=1)
    _, _, attributes = fact_keys(LAYOUT, LAYOUT.query_len)
    queries.noisy[:, attributes] = MASK  # hide every attribute
    fallback = NoMemoryAnswers(tokens=queries.clean.clone(), log_probs=torch.full(queries.clean.shape, -0.5))
    accuracy, log_prob = lookup_answers(LAYOUT, queries, documents[queries.gold][:, None], fallback)
    assert bool((accuracy == 1.0).all()) and bool((log_prob == -0.5).all())


def test_the_reader_reads_no_more_documents_than_the_router_fetched() -> None:
    assert RoutingTask.Params(top_k=4, read_k=1).read_k == 1
    with pytest.raises(ValueError, match="read_k"):
        RoutingTask.Params(top_k=4, read_k=5)


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


@pytest.mark.integration  # the real task end to end
def test_the_answers_read_the_routers_top_read_k_documents(tmp_path: Path) -> None:
    base = {**TINY, "regime": "uncertain_key", "n_attributes": 4, "reader": "lookup"}
    oracle = run_single(RoutingTask, {**base, "router": "oracle", "read_k": 1}, seed=5, work_root=tmp_path / "oracle")
    assert oracle.status == "finished", oracle.error
    assert oracle.metrics["acc_routed"] == oracle.metrics["acc_oracle"]  # its top document is the gold one
    top, both = (run_single(RoutingTask, {**base, "router": "random", "read_k": k}, seed=5, work_root=tmp_path / str(k))
                 for k in (1, 2))
    assert top.status == both.status == "finished", (top.error, both.error)
    assert top.metrics["recall@2"] == both.metrics["recall@2"]
    assert top.metrics["acc_routed"] <= both.metrics["acc_routed"]  # a second document can only answer more
