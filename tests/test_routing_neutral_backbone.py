"""The premise regime's backbone is trained for no arm's pooling, and the suite measures it.

``every_token``: MSA's contrastive routing loss of every query token alone, each towards the
document its own fact comes from; its gradient reaches every position (the asked-slot loss reaches
only the asked slot), and ``token_document_accuracy`` says how evenly the positions learnt their
documents. The suite's premise ``backbone_favours_no_pooling`` reads its ``asked_slot_lead``: it holds
for a backbone that taught every position alike and fails for one that taught the asked slot alone."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from test_routing_validity_control import routing_results

from harness.analysis.decide.claims import last_look_premises
from harness.analysis.decide.premises import FAILS, HOLDS
from harness.execution.executor import run_single
from harness.tasks.routing.backbone import (
    FamilyHeads,
    fact_retrieval_loss,
    family_document_accuracy,
    token_document_accuracy,
    token_retrieval_loss,
)
from harness.tasks.routing.mechanism.msa import RouterProjector
from harness.tasks.routing.task import RoutingTask
from harness.tasks.routing.workload import Layout, Vocabulary, make_documents, make_queries

D = 8
LAYOUT = Layout(Vocabulary(n_entities=6, n_attributes=4, n_values=5), entity_len=2, doc_facts=4, query_facts=1,
                chunk_size=2, regime="uncertain_key", segments=3)
SUITE = Path(__file__).resolve().parents[1] / "suites" / "routing_needle.yaml"


def _identity_router() -> RouterProjector:
    router = RouterProjector(D, D, 1)
    with torch.no_grad():
        for projection in (router.q_proj, router.k_proj):
            projection.weight.copy_(torch.eye(D))
            projection.bias.zero_()
    return router


def _batch():
    generator = torch.Generator().manual_seed(0)
    documents = make_documents(LAYOUT, 12, generator)
    queries = make_queries(LAYOUT, documents, torch.tensor([3, 7, 0, 11]), 1, 100, generator)
    candidates = torch.unique(queries.token_docs)
    chunks = torch.randn(candidates.shape[0], LAYOUT.chunks_per_doc, D, generator=generator)
    hidden = torch.randn(4, LAYOUT.query_len, D, generator=generator)
    return queries, candidates, chunks, hidden


def _naming(queries, candidates, chunks, which: torch.Tensor) -> torch.Tensor:
    """Query states equal to the name chunk of each token's own document where ``which``, of the
    next candidate's elsewhere."""
    own = (queries.token_docs[..., None] == candidates).float().argmax(dim=-1)
    wrong = (own + 1) % candidates.shape[0]
    return torch.where(which[..., None], chunks[own, 0], chunks[wrong, 0])


def test_every_token_loss_is_each_tokens_cross_entropy_towards_its_own_document() -> None:
    queries, candidates, chunks, hidden = _batch()
    assert not torch.equal(queries.token_docs, queries.gold[:, None].expand_as(queries.token_docs))
    loss = token_retrieval_loss(_identity_router(), hidden, queries, candidates, chunks, 0.1)
    cosine = F.normalize(hidden.flatten(0, 1), dim=-1) @ F.normalize(chunks.flatten(0, 1), dim=-1).T
    own = (queries.token_docs.flatten()[:, None] == candidates).float().argmax(dim=1)
    name_chunk = own * LAYOUT.chunks_per_doc  # the 2-token name is chunk 0 of every document
    assert torch.allclose(loss, F.cross_entropy(cosine / 0.1, name_chunk), atol=1e-5)


def test_every_token_gradient_reaches_every_position() -> None:
    queries, candidates, chunks, hidden = _batch()
    hidden.requires_grad_(True)
    token_retrieval_loss(_identity_router(), hidden, queries, candidates, chunks, 0.1).backward()
    assert bool((hidden.grad.abs().sum(dim=-1) > 0).all())


def test_asked_token_gradient_reaches_only_the_asked_slots() -> None:
    queries, candidates, chunks, hidden = _batch()
    hidden.requires_grad_(True)
    token_retrieval_loss(_identity_router(), hidden, queries, candidates, chunks, 0.1, queries.is_value).backward()
    reached = hidden.grad.abs().sum(dim=-1) > 0
    assert torch.equal(reached, queries.is_value)


def _heads(fact_knows: bool) -> FamilyHeads:
    heads = FamilyHeads(D, D, torch.Generator().manual_seed(1), torch.device("cpu"))
    heads.token = _identity_router()
    if fact_knows:
        heads.fact = _identity_router()
    else:  # a pooled head that maps every query to one point: it tells no document from another
        with torch.no_grad():
            heads.fact.q_proj.weight.zero_()
    return heads


def test_fact_loss_is_each_facts_pooled_cross_entropy_towards_its_own_document() -> None:
    queries, candidates, chunks, hidden = _batch()
    loss = fact_retrieval_loss(_identity_router(), hidden, queries, LAYOUT, candidates, chunks, 0.1)
    pooled = hidden.unflatten(1, (LAYOUT.segments, LAYOUT.segment_len)).mean(dim=2).flatten(0, 1)
    cosine = F.normalize(pooled, dim=-1) @ F.normalize(chunks.flatten(0, 1), dim=-1).T
    own = (queries.token_docs[:, :: LAYOUT.segment_len].flatten()[:, None] == candidates).float().argmax(dim=1)
    assert torch.allclose(loss, F.cross_entropy(cosine / 0.1, own * LAYOUT.chunks_per_doc), atol=1e-5)


def test_family_document_accuracy_measures_the_per_token_familys_lead() -> None:
    queries, candidates, chunks, _ = _batch()
    everywhere = _naming(queries, candidates, chunks, torch.ones_like(queries.is_value))
    even = family_document_accuracy(_heads(fact_knows=True), everywhere, queries, LAYOUT, candidates, chunks)
    assert even == {"token_doc_acc": 1.0, "fact_doc_acc": 1.0, "family_lead": 0.0}
    slanted = family_document_accuracy(_heads(fact_knows=False), everywhere, queries, LAYOUT, candidates, chunks)
    assert slanted["token_doc_acc"] == 1.0 and slanted["family_lead"] >= 0.5


def test_token_document_accuracy_measures_the_asked_slots_lead() -> None:
    queries, candidates, chunks, _ = _batch()
    router = _identity_router()
    everywhere = _naming(queries, candidates, chunks, torch.ones_like(queries.is_value))
    even = token_document_accuracy(router, everywhere, queries, candidates, chunks)
    assert even == {"token_doc_acc_asked": 1.0, "token_doc_acc_other": 1.0, "asked_slot_lead": 0.0}
    only_asked = _naming(queries, candidates, chunks, queries.is_value)
    slanted = token_document_accuracy(router, only_asked, queries, candidates, chunks)
    assert slanted == {"token_doc_acc_asked": 1.0, "token_doc_acc_other": 0.0, "asked_slot_lead": 1.0}


@pytest.mark.integration  # the real task end to end
def test_an_every_token_backbone_reports_its_neutrality(tmp_path: Path) -> None:
    params = {"regime": "uncertain_key", "bank_size": 16, "d_model": 16, "d_ff": 32, "n_heads": 2, "n_layers": 2,
              "msa_from_layer": 1, "router_training.dim": 8, "router_training.heads": 2, "top_k": 2,
              "backbone.steps": 4, "backbone.batch": 8, "backbone.docs": 32, "router_training.steps": 2,
              "router_training.batch": 8, "router_training.negatives": 8, "eval_queries": 16, "n_entities": 8,
              "probe.queries": 32, "probe.steps": 2, "measure_speed": False, "router": "mean_pool",
              "slot_retrieval_weight": 1.0}
    neutral = run_single(RoutingTask, {**params, "slot_retrieval_target": "every_token"}, seed=2, work_root=tmp_path / "a")
    assert neutral.status == "finished", neutral.error
    metrics = neutral.metrics
    assert 0.0 <= metrics["token_doc_acc_asked"] <= 1.0 and 0.0 <= metrics["token_doc_acc_other"] <= 1.0
    assert metrics["asked_slot_lead"] == pytest.approx(metrics["token_doc_acc_asked"] - metrics["token_doc_acc_other"])
    asked = run_single(RoutingTask, {**params, "slot_retrieval_target": "asked_slot"}, seed=2, work_root=tmp_path / "b")
    assert asked.status == "finished", asked.error
    assert "asked_slot_lead" not in asked.metrics  # the asked-slot router is no per-token router: nothing to read


def _premises(lead: list[float]):
    declared = yaml.safe_load(SUITE.read_text())
    (premise,) = [p for p in declared["premises"] if p["name"] == "backbone_favours_no_pooling"]
    (status,) = last_look_premises(routing_results({"mean_pool": {"asked_slot_lead": lead}}, premises=[premise]))
    return status


def test_the_suites_neutrality_premise_holds_for_an_even_backbone_and_fails_for_a_slanted_one() -> None:
    assert _premises([-0.21, -0.18, -0.25, -0.20]).status == HOLDS  # the asked slot learnt less than the rest
    assert _premises([0.81, 0.78, 0.85, 0.80]).status == FAILS  # the asked slot alone was taught its document
