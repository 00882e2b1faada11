"""The backbone's slot-retrieval loss: MSA's contrastive routing loss of a query made of its asked
slots alone, checked against a cross-entropy written out by hand; its gradient reaches the asked
slots' states and no other query token, and the layers below the routing layer but never the
precision heads; and the backbone's training step with it makes a tiny backbone's asked slot find its
document among the batch's."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from harness.tasks.routing.mechanism.model import PrecisionHead
from harness.tasks.routing.mechanism.msa import chunk_mean_pool
from harness.services.training_loop import optimizer_step
from harness.tasks.routing.backbone import (
    BackboneSpec,
    backbone_loss,
    build_model,
    document_states,
    memory_slots,
    slot_retrieval_loss,
    slot_router,
    total_loss,
)
from harness.tasks.routing.pooling import OracleMaskedRouter
from harness.tasks.routing.task import RoutingParams, backbone_spec, layout_of
from harness.tasks.routing.workload import Layout, Vocabulary, make_documents, make_queries

D = 8
LAYOUT = Layout(Vocabulary(n_entities=6, n_attributes=4, n_values=5), entity_len=2, doc_facts=4, query_facts=1,
                chunk_size=2, regime="uncertain_key", segments=3)


def _identity_router() -> OracleMaskedRouter:
    router = OracleMaskedRouter(PrecisionHead(D, 10), D, D, 1)
    with torch.no_grad():
        for projection in (router.q_proj, router.k_proj):
            projection.weight.copy_(torch.eye(D))
            projection.bias.zero_()
    return router


def _batch(gold: torch.Tensor):
    generator = torch.Generator().manual_seed(0)
    documents = make_documents(LAYOUT, 12, generator)
    queries = make_queries(LAYOUT, documents, gold, 1, 100, generator)
    chunks = torch.randn(gold.shape[0], LAYOUT.chunks_per_doc, D, generator=generator)
    hidden = torch.randn(gold.shape[0], LAYOUT.query_len, D, generator=generator)
    return queries, chunks, hidden


def test_slot_retrieval_loss_is_the_cross_entropy_of_the_asked_slot_over_the_batch_chunks() -> None:
    gold = torch.tensor([3, 7, 0, 11])  # distinct: one positive (the entity chunk) per query
    queries, chunks, hidden = _batch(gold)
    temperature = 0.1
    loss = slot_retrieval_loss(_identity_router(), hidden, queries, chunks, temperature)
    asked = hidden[queries.is_value]  # one asked slot per needle query
    cosine = F.normalize(asked, dim=-1) @ F.normalize(chunks.flatten(0, 1), dim=-1).T
    entity_chunk = torch.arange(4) * LAYOUT.chunks_per_doc  # the name is chunk 0 of each document
    assert torch.allclose(loss, F.cross_entropy(cosine / temperature, entity_chunk), atol=1e-6)
    # a slot that holds its own document's name chunk finds it; one holding another's does not
    named = hidden.clone()
    named[queries.is_value] = chunks[:, 0]
    wrong = hidden.clone()
    wrong[queries.is_value] = chunks.roll(1, dims=0)[:, 0]
    router = _identity_router()
    assert slot_retrieval_loss(router, named, queries, chunks, temperature) < 0.1
    assert slot_retrieval_loss(router, wrong, queries, chunks, temperature) > 5.0


def test_slot_retrieval_gradient_reaches_only_the_asked_slots_and_repeated_documents_are_positives() -> None:
    gold = torch.tensor([3, 7, 3, 11])  # queries 0 and 2 ask the same document
    queries, chunks, hidden = _batch(gold)
    hidden.requires_grad_(True)
    slot_retrieval_loss(_identity_router(), hidden, queries, chunks, 0.1).backward()
    touched = hidden.grad.abs().sum(dim=-1) > 0
    assert torch.equal(touched, queries.is_value)
    # the same document encodes the same in both rows; were the other row's copy a negative, a slot
    # holding the name would score a negative as high as its positive (a loss of at least log 2)
    chunks[2] = chunks[0]
    named = hidden.detach().clone()
    named[queries.is_value] = chunks[:, 0]
    assert slot_retrieval_loss(_identity_router(), named, queries, chunks, 0.05) < 0.1


def _tiny_spec(weight: float) -> BackboneSpec:
    params = RoutingParams(regime="uncertain_key", segments=3, d_model=16, d_ff=32, n_heads=2, n_layers=2,
                           router_training={"dim": 8}, n_entities=6, n_attributes=4,
                           backbone={"docs": 24, "batch": 8}, bank_size=8, top_k=2, slot_retrieval_weight=weight)
    return backbone_spec(params, layout_of(params))


def test_without_its_weight_the_backbone_loss_is_denoising_plus_energy_and_computes_no_retrieval() -> None:
    spec = _tiny_spec(0.0)
    model = build_model(spec, torch.Generator().manual_seed(0), torch.device("cpu"))
    generator = torch.Generator().manual_seed(1)
    documents = make_documents(spec.layout, 8, generator)
    queries = make_queries(spec.layout, documents, torch.arange(8), 1, 100, generator)
    slots = torch.arange(8)[:, None]
    losses = backbone_loss(model, spec, queries, documents, slots)
    assert set(losses) == {"denoise", "energy"}
    assert torch.equal(total_loss(spec, losses), losses["denoise"] + spec.energy_weight * losses["energy"])
    with_router = backbone_loss(model, replace(spec, slot_retrieval_weight=2.0), queries, documents, slots,
                                OracleMaskedRouter(model.precision_up[1], 16, 8, 1))
    assert set(with_router) == {"denoise", "energy", "slot_retrieval"}
    assert torch.equal(with_router["denoise"], losses["denoise"])
    assert torch.allclose(total_loss(replace(spec, slot_retrieval_weight=2.0), with_router),
                          losses["denoise"] + spec.energy_weight * losses["energy"] + 2.0 * with_router["slot_retrieval"])


def test_the_spec_takes_the_weight_and_the_routers_temperature_from_the_params() -> None:
    params = RoutingParams(regime="uncertain_key", slot_retrieval_weight=0.7,
                           router_training={"temperature": 0.2})
    spec = backbone_spec(params, layout_of(params))
    assert spec.slot_retrieval_weight == 0.7 and spec.slot_retrieval_temperature == 0.2
    assert backbone_spec(RoutingParams(), layout_of(RoutingParams())).slot_retrieval_weight == 0.0


def _tiny_training(spec: BackboneSpec):
    model = build_model(spec, torch.Generator().manual_seed(0), torch.device("cpu"))
    router = slot_router(spec, model, torch.Generator().manual_seed(1), torch.Generator().manual_seed(3),
                         torch.device("cpu"))
    documents = make_documents(spec.layout, spec.pool_docs, torch.Generator().manual_seed(2))
    return model, router, documents


def _batch_of(spec: BackboneSpec, documents: torch.Tensor, generator: torch.Generator):
    gold = torch.randperm(spec.pool_docs, generator=generator)[: spec.batch]
    queries = make_queries(spec.layout, documents, gold, spec.max_noise_step, spec.model.n_diffusion_steps, generator)
    return queries, documents[gold], memory_slots(spec.batch, spec.memory_docs, spec.gold_rate, generator)


def test_slot_retrieval_trains_the_layers_below_the_routing_layer_and_never_the_precision_heads() -> None:
    spec = _tiny_spec(1.0)
    model, router, documents = _tiny_training(spec)
    losses = backbone_loss(model, spec, *_batch_of(spec, documents, torch.Generator().manual_seed(3)), router)
    losses["slot_retrieval"].backward()

    def moved(module: torch.nn.Module) -> bool:
        return any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in module.parameters())

    routing = spec.msa_layers[0]
    assert moved(model.token_embedding) and all(moved(model.blocks[layer]) for layer in range(routing))
    assert moved(router.q_proj) and moved(router.k_proj)
    assert not any(moved(head) for head in model.precision_up)  # precision learns from its energy alone
    assert not moved(model.blocks[routing]) and not moved(model.lm_head)


def _slot_finds_its_document(spec: BackboneSpec, model, router, documents: torch.Tensor) -> float:
    """Top-1 accuracy of the asked slot's routing query over the batch's entity chunks (fresh queries)."""
    queries, gold_documents, _ = _batch_of(spec, documents, torch.Generator().manual_seed(99))
    routing = spec.msa_layers[0]
    with torch.no_grad():
        hidden = model.hidden_before(routing, queries.noisy, queries.t)
        states = document_states(model, gold_documents, routing + 1)[routing]
        names = chunk_mean_pool(states, spec.msa.chunk_size)[:, 0]
        scores = router.pooled_scores(hidden, router.project_key(names), queries.is_value)
    return float((scores.argmax(dim=1) == torch.arange(spec.batch)).double().mean())


@pytest.fixture
def one_thread():
    """A model this small trains faster on one thread than on several contending cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_training_with_slot_retrieval_makes_the_asked_slot_find_its_document(one_thread) -> None:
    torch.manual_seed(0)
    spec = replace(_tiny_spec(1.0), batch=16)
    model, router, documents = _tiny_training(spec)
    optimizer = torch.optim.Adam([*model.parameters(), *router.q_proj.parameters(), *router.k_proj.parameters()],
                                 lr=1e-2)
    before = _slot_finds_its_document(spec, model, router, documents)
    generator = torch.Generator().manual_seed(4)
    for _ in range(200):
        optimizer_step(total_loss(spec, backbone_loss(model, spec, *_batch_of(spec, documents, generator), router)),
                       optimizer)
    after = _slot_finds_its_document(spec, model, router, documents)
    assert before < 0.3 and after > 0.8, (before, after)
