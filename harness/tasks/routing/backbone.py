"""The shared backbone: PC-SHO-DLM with MSA layers, trained once per seed and cached.

The backbone learns to denoise queries while reading chunk-pooled memory as it will be read at
evaluation: each query sees the pooled K/V of ``memory_docs`` (= the routers' top-k) documents
from its batch, its gold document among them with probability ``gold_rate`` and the others
distractors, so it learns to copy a value from the right document's chunk among several and that
memory can be wrong. It trains on the training documents only (names disjoint from the bank). Its precision heads are trained with the precision-weighted energy at the
same time, from each token's own prediction error. Arms then reuse it unchanged (same init, same weights, same data).

With ``slot_retrieval_weight`` > 0 the backbone also learns, with MSA's contrastive routing loss,
to name documents at the routing layer's input, and the gradient reaches the layers below it. The
denoising loss alone gives the asked slot no reason to hold its document's name before the memory
is read, so without it that state need not name its document: the premise of precision routing.
``slot_retrieval_target`` says which states learn it:

- ``asked_slot``: a query made of its asked slots alone (``slot_retrieval_loss``: a training-only
  ``OracleMaskedRouter``) must find its gold document among the batch's; this is oracle_masked's
  pooling, so it trains the backbone for the arms that pool the asked slot.
- ``every_token``: every query token, alone, must find the document its own fact comes from
  (``token_retrieval_loss``: a training-only per-token ``RouterProjector``), the distractors'
  documents among the candidates. The target is the workload's, the same for every position and
  pooling no tokens, so it favours no arm's pooling; ``token_document_accuracy`` measures how
  evenly the positions learnt it. Its query is the per-token family's (MSA's RouterProjector), so
  it may favour that family over the pooled routers.
- ``asked_token``: the ``every_token`` loss at the asked slots only, the per-token form of
  ``asked_slot``: a backbone slanted towards the arms that pool the asked slot, which the
  neutrality figures must catch.
- ``token_and_fact``: the ``every_token`` loss plus, at the same weight, its pooled counterpart
  (``fact_retrieval_loss``): every fact of the query, its tokens pooled uniformly into one query
  through a training-only pooled head, must find its own document. Both router families' kinds of
  query learn the same target with the same weight, and no arm pools a single fact, so it favours
  neither a family nor an arm's pooling; ``family_document_accuracy`` measures the first.

The training-only heads are discarded afterwards (the arms start from the usual weights).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

from harness.tasks.routing.mechanism.model import (
    PCSHOConfig,
    PCSHODLM,
    denoising_loss,
    precision_energy,
    token_errors,
)
from harness.tasks.routing.mechanism.msa import (
    MSAConfig,
    RouterProjector,
    attach_msa_layers,
    chunk_mean_pool,
    create_msa_layers,
    msa_layer_indices,
    routing_contrastive_loss,
)
from harness.services.training_loop import optimizer_step
from harness.services.seeding import global_rng_from
from harness.measure.timing import throughput
from harness.tasks.base import TrialContext
from harness.tasks.routing.pooling import OracleMaskedRouter
from harness.tasks.routing.workload import Layout, QueryBatch, make_documents, make_queries


SlotTarget = Literal["asked_slot", "asked_token", "every_token", "token_and_fact"]
PER_TOKEN: tuple[str, ...] = ("asked_token", "every_token", "token_and_fact")


@dataclass(frozen=True)
class BackboneSpec:
    """Everything besides the seed that determines the trained backbone (its cache identity)."""

    model: PCSHOConfig
    msa: MSAConfig
    layout: Layout
    steps: int
    batch: int
    lr: float
    energy_weight: float
    gold_rate: float
    memory_docs: int
    pool_docs: int
    max_noise_step: int
    slot_retrieval_weight: float = 0.0
    slot_retrieval_temperature: float = 0.05
    slot_retrieval_target: SlotTarget = "asked_slot"

    @property
    def msa_layers(self) -> list[int]:
        return list(msa_layer_indices(self.model, self.msa))


LOGGED = {"denoise": "denoise_loss", "energy": "precision_energy", "slot_retrieval": "slot_retrieval_loss",
          "fact_retrieval": "fact_retrieval_loss"}


@dataclass
class Backbone:
    model: PCSHODLM
    msa: MSAConfig
    train_tokens_per_s: float
    neutrality: dict[str, float] = field(default_factory=dict)  # per-token targets only: see ``neutrality``

    @property
    def routing_layer(self) -> int:
        """The first MSA layer: its router picks the documents every MSA layer reads."""
        return msa_layer_indices(self.model.config, self.msa).start

    @property
    def msa_layers(self) -> list[int]:
        return list(msa_layer_indices(self.model.config, self.msa))


def build_model(spec: BackboneSpec, init: torch.Generator, device: torch.device) -> PCSHODLM:
    """Fresh initialisation fixed by the ``init`` stream (routers included, so arms start equal);
    the global RNG is left as it was."""
    with global_rng_from(init, device):
        model = PCSHODLM(spec.model)
        attach_msa_layers(model, create_msa_layers(spec.model, spec.msa))
    return model.to(device)


def document_states(model: PCSHODLM, documents: torch.Tensor, stop: int) -> list[torch.Tensor]:
    """Inputs of layers 0..stop-1 for clean documents (t = 0, positions restart per document)."""
    t = torch.zeros(documents.shape[0], dtype=torch.long, device=documents.device)
    states = [model.embed(documents, t)]
    for layer in range(stop - 1):
        states.append(model.run_layers(states[-1], t, layer, layer + 1))
    return states


def encode_memory(model: PCSHODLM, msa: MSAConfig, states: list[torch.Tensor]) -> dict[int, dict[str, torch.Tensor]]:
    """Per MSA layer: pooled K, V, KR of every document, each (n_docs, chunks_per_doc, width),
    from the documents' ``document_states`` up to the last MSA layer."""
    return {layer: model.blocks[layer].encode_memory(states[layer]) for layer in msa_layer_indices(model.config, msa)}


@torch.no_grad()
def encode_bank(
    model: PCSHODLM, msa: MSAConfig, documents: torch.Tensor, batch_size: int = 256
) -> tuple[dict[int, dict[str, torch.Tensor]], torch.Tensor]:
    """Encode documents once: per-layer memory entries, and the routing layer's chunk-pooled
    input states (n_docs, chunks_per_doc, D), from which any router's keys follow."""
    layers = list(msa_layer_indices(model.config, msa))
    parts, pooled = [], []
    for start in range(0, documents.shape[0], batch_size):
        states = document_states(model, documents[start : start + batch_size], layers[-1] + 1)
        parts.append(encode_memory(model, msa, states))
        pooled.append(chunk_mean_pool(states[layers[0]], msa.chunk_size))
    encoded = {
        layer: {name: torch.cat([part[layer][name] for part in parts]) for name in ("K", "V", "KR")}
        for layer in layers
    }
    return encoded, torch.cat(pooled)


def batch_memory(
    encoded: dict[int, dict[str, torch.Tensor]], slots: torch.Tensor
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Memory of each query from its document slots (B, k) into the encoded batch documents."""
    return {
        layer: (entry["K"][slots].flatten(1, 2), entry["V"][slots].flatten(1, 2))
        for layer, entry in encoded.items()
    }


def memory_slots(batch: int, k: int, gold_rate: float, generator: torch.Generator) -> torch.Tensor:
    """(B, k) document slots: distinct in-batch distractors, the query's own document at a
    random slot with probability gold_rate."""
    k = min(k, batch)
    offsets = torch.randperm(batch - 1, generator=generator)[: k] + 1 if batch > 1 else torch.zeros(1, dtype=torch.long)
    slots = (torch.arange(batch)[:, None] + offsets[None, :k]) % batch
    with_gold = torch.rand(batch, generator=generator) < gold_rate
    position = torch.randint(k, (batch,), generator=generator)
    rows = torch.arange(batch)
    slots[rows[with_gold], position[with_gold]] = rows[with_gold]
    return slots


class FamilyHeads(nn.Module):
    """The training-only heads of the per-token targets, one routing head each: ``token`` reads every
    query token alone (the RouterProjector's query), ``fact`` every fact's tokens pooled into one
    query (a pooled router's query). ``fact`` learns only under ``token_and_fact``."""

    def __init__(self, d_model: int, router_dim: int, fact_init: torch.Generator, device: torch.device) -> None:
        super().__init__()
        self.token = RouterProjector(d_model, router_dim, 1)
        with global_rng_from(fact_init, device):
            self.fact = RouterProjector(d_model, router_dim, 1)


def slot_router(
    spec: BackboneSpec, model: PCSHODLM, init: torch.Generator, fact_init: torch.Generator, device: torch.device
) -> OracleMaskedRouter | FamilyHeads:
    """The training-only router of the slot-retrieval loss, initialised from its own streams: an
    ``OracleMaskedRouter`` for ``asked_slot`` (it never reads the precision head it is handed), the
    ``FamilyHeads`` for the per-token targets."""
    with global_rng_from(init, device):
        if spec.slot_retrieval_target in PER_TOKEN:
            router = FamilyHeads(spec.model.d_model, spec.msa.router_dim, fact_init, device)
        else:
            router = OracleMaskedRouter(model.precision_up[spec.msa_layers[0]], spec.model.d_model, spec.msa.router_dim, 1)
    return router.to(device)


def trained_heads(spec: BackboneSpec, router: OracleMaskedRouter | FamilyHeads | None) -> list[nn.Parameter]:
    """The training-only parameters the target trains (the fact head only under ``token_and_fact``)."""
    if router is None:
        return []
    if isinstance(router, FamilyHeads):
        heads = [router.token, router.fact] if spec.slot_retrieval_target == "token_and_fact" else [router.token]
        return [parameter for head in heads for parameter in (*head.q_proj.parameters(), *head.k_proj.parameters())]
    return [*router.q_proj.parameters(), *router.k_proj.parameters()]


def slot_retrieval_loss(
    router: OracleMaskedRouter, hidden: torch.Tensor, queries: QueryBatch, document_chunks: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """MSA's contrastive routing loss of a query made of its asked slots alone: ``hidden`` (B, S, D)
    enters the routing layer, ``document_chunks`` (B, chunks_per_doc, D) are the chunk-pooled
    routing-layer states of the batch's documents (row j is the document ``queries.gold[j]``);
    the positives are the gold document's entity chunks, the negatives every other chunk."""
    keys = router.project_key(document_chunks).flatten(0, 1)
    scores = router.pooled_scores(hidden, keys, queries.is_value)
    same_document = queries.gold[:, None] == queries.gold[None, :]
    positive = same_document[:, :, None] & queries.positive_chunks[:, None, :]
    return routing_contrastive_loss(scores, positive.flatten(1), temperature)


def token_document_scores(
    router: RouterProjector, hidden: torch.Tensor, candidate_chunks: torch.Tensor
) -> torch.Tensor:
    """(B * S, C * chunks_per_doc): cosine of every query token's own routing query with every chunk
    of the candidate documents (``candidate_chunks`` (C, chunks_per_doc, D), chunk-pooled states)."""
    queries = F.normalize(router.project_query(hidden).flatten(0, 1), dim=-1)
    return queries @ F.normalize(router.project_key(candidate_chunks).flatten(0, 1), dim=-1).T


def own_document_chunks(queries: QueryBatch, candidates: torch.Tensor, docs: torch.Tensor | None = None) -> torch.Tensor:
    """(N, C * chunks_per_doc) bool: the name chunks of each reader's own document among the
    candidates; the readers are the query tokens (``queries.token_docs``), or ``docs`` (B, n) given."""
    docs = queries.token_docs if docs is None else docs
    own = docs.flatten()[:, None, None] == candidates[None, :, None]
    return (own & queries.positive_chunks[:1, None, :]).flatten(1)


def fact_length(layout: Layout) -> int:
    """Tokens of one fact of the query: a needle query's segment, else the whole (one-document) query."""
    return layout.segment_len if layout.regime == "uncertain_key" else layout.query_len


def fact_document_scores(
    head: RouterProjector, hidden: torch.Tensor, candidate_chunks: torch.Tensor, layout: Layout
) -> torch.Tensor:
    """(B * facts, C * chunks_per_doc): cosine of every fact's pooled query (the mean of its tokens'
    states) with every chunk of the candidate documents."""
    pooled = hidden.unflatten(1, (-1, fact_length(layout))).mean(dim=2)
    queries = F.normalize(head.project_query(pooled).flatten(0, 1), dim=-1)
    return queries @ F.normalize(head.project_key(candidate_chunks).flatten(0, 1), dim=-1).T


def fact_docs(queries: QueryBatch, layout: Layout) -> torch.Tensor:
    """(B, facts) the document each fact of the query comes from."""
    return queries.token_docs[:, :: fact_length(layout)]


def fact_retrieval_loss(
    head: RouterProjector, hidden: torch.Tensor, queries: QueryBatch, layout: Layout, candidates: torch.Tensor,
    candidate_chunks: torch.Tensor, temperature: float,
) -> torch.Tensor:
    """MSA's contrastive routing loss of every fact pooled: each fact's positives are its own
    document's name chunks, its negatives every other chunk of the ``candidates`` documents."""
    scores = fact_document_scores(head, hidden, candidate_chunks, layout)
    return routing_contrastive_loss(scores, own_document_chunks(queries, candidates, fact_docs(queries, layout)), temperature)


def token_retrieval_loss(
    router: RouterProjector, hidden: torch.Tensor, queries: QueryBatch, candidates: torch.Tensor,
    candidate_chunks: torch.Tensor, temperature: float, learners: torch.Tensor | None = None,
) -> torch.Tensor:
    """MSA's contrastive routing loss of every query token alone (of the ``learners`` (B, S) bool
    only, given): ``hidden`` (B, S, D) enters the routing layer; each token's positives are the name
    chunks of the document its fact comes from (``queries.token_docs``), its negatives every other
    chunk of the ``candidates`` (C,) documents, which hold every token's document."""
    scores = token_document_scores(router, hidden, candidate_chunks)
    positives = own_document_chunks(queries, candidates)
    if learners is not None:
        positives = positives & learners.flatten()[:, None]
    return routing_contrastive_loss(scores, positives, temperature)


@torch.no_grad()
def token_document_accuracy(
    router: RouterProjector, hidden: torch.Tensor, queries: QueryBatch, candidates: torch.Tensor,
    candidate_chunks: torch.Tensor,
) -> dict[str, float]:
    """Share of query tokens whose best-scoring chunk is a name chunk of their own document: at the
    asked slots and at every other position, and the asked slots' lead over the rest (near 0 or
    below: the backbone did not put document names into the asked slot more than elsewhere)."""
    best = token_document_scores(router, hidden, candidate_chunks).argmax(dim=1)
    hit = own_document_chunks(queries, candidates).gather(1, best[:, None]).squeeze(1).view_as(queries.is_value)
    asked = float(hit[queries.is_value].double().mean())
    other = float(hit[~queries.is_value].double().mean())
    return {"token_doc_acc_asked": asked, "token_doc_acc_other": other, "asked_slot_lead": asked - other}


@torch.no_grad()
def family_document_accuracy(
    heads: FamilyHeads, hidden: torch.Tensor, queries: QueryBatch, layout: Layout, candidates: torch.Tensor,
    candidate_chunks: torch.Tensor,
) -> dict[str, float]:
    """How well each router family's kind of query names documents in these states: the share of
    query tokens whose own query (``heads.token``) and of facts whose pooled query (``heads.fact``)
    finds a name chunk of their own document first, and the per-token family's lead over the pooled
    one (near 0: the backbone taught both kinds of query alike)."""
    token_best = token_document_scores(heads.token, hidden, candidate_chunks).argmax(dim=1)
    token = own_document_chunks(queries, candidates).gather(1, token_best[:, None])
    fact_best = fact_document_scores(heads.fact, hidden, candidate_chunks, layout).argmax(dim=1)
    fact = own_document_chunks(queries, candidates, fact_docs(queries, layout)).gather(1, fact_best[:, None])
    token_acc, fact_acc = float(token.double().mean()), float(fact.double().mean())
    return {"token_doc_acc": token_acc, "fact_doc_acc": fact_acc, "family_lead": token_acc - fact_acc}


def backbone_loss(
    model: PCSHODLM, spec: BackboneSpec, queries: QueryBatch, documents: torch.Tensor, slots: torch.Tensor,
    router: OracleMaskedRouter | FamilyHeads | None = None, pool: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The losses of one batch: ``denoise``, ``energy`` (every layer's head reads the tokens' own
    prediction errors of this forward pass, ``token_errors``) and, given the training-only
    ``router``, ``slot_retrieval`` (``documents`` row i is query i's gold document; the per-token
    targets also read the distractors' documents from ``pool``, the training documents) and, under
    ``token_and_fact``, ``fact_retrieval``."""
    states = document_states(model, documents, spec.msa_layers[-1] + 1)
    memory = batch_memory(encode_memory(model, spec.msa, states), slots.to(documents.device))
    trace = model.forward_trace(queries.noisy, queries.t, memory)
    errors = token_errors(trace.logits, queries.clean, queries.masked)
    energy = torch.stack([
        precision_energy(*model.precision_up[layer].log_precisions(state.detach(), queries.t), errors)
        for layer, state in enumerate(trace.layer_inputs)
    ]).mean()
    losses = {"denoise": denoising_loss(trace.logits, queries.clean, queries.masked), "energy": energy}
    routing = spec.msa_layers[0]
    hidden, temperature = trace.layer_inputs[routing], spec.slot_retrieval_temperature
    if isinstance(router, FamilyHeads):
        candidates, candidate_chunks = candidate_documents(model, spec, queries, pool)
        learners = queries.is_value if spec.slot_retrieval_target == "asked_token" else None
        losses["slot_retrieval"] = token_retrieval_loss(router.token, hidden, queries, candidates, candidate_chunks,
                                                        temperature, learners)
        if spec.slot_retrieval_target == "token_and_fact":
            losses["fact_retrieval"] = fact_retrieval_loss(router.fact, hidden, queries, spec.layout, candidates,
                                                           candidate_chunks, temperature)
    elif router is not None:
        losses["slot_retrieval"] = slot_retrieval_loss(
            router, hidden, queries, chunk_mean_pool(states[routing], spec.msa.chunk_size), temperature,
        )
    return losses


def candidate_documents(
    model: PCSHODLM, spec: BackboneSpec, queries: QueryBatch, pool: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every document a query token comes from (C,) and their chunk-pooled routing-layer states."""
    if pool is None:
        raise ValueError("the every_token slot-retrieval loss needs the training documents (pool)")
    candidates = torch.unique(queries.token_docs)
    routing = spec.msa_layers[0]
    states = document_states(model, pool[candidates.to(pool.device)].to(queries.noisy.device), routing + 1)[routing]
    return candidates, chunk_mean_pool(states, spec.msa.chunk_size)


def total_loss(spec: BackboneSpec, losses: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The objective the backbone minimises (the retrieval terms only where they were computed, each at
    ``slot_retrieval_weight``: the two families' terms weigh the same)."""
    total = losses["denoise"] + spec.energy_weight * losses["energy"]
    for name in ("slot_retrieval", "fact_retrieval"):
        if name in losses:
            total = total + spec.slot_retrieval_weight * losses[name]
    return total


def train_backbone(spec: BackboneSpec, pool: torch.Tensor, ctx: TrialContext) -> dict[str, Any]:
    """Train from the seeded init on the (pool_docs, doc_len) training documents; the payload
    holds the state dict and training tokens/s on this device."""
    if pool.shape != (spec.pool_docs, spec.layout.doc_len):
        raise ValueError(f"pool must be ({spec.pool_docs}, {spec.layout.doc_len}), got {tuple(pool.shape)}")
    device = ctx.device
    model = build_model(spec, ctx.stream("backbone-init"), device)
    data = ctx.stream("backbone-batches")
    router = (slot_router(spec, model, ctx.stream("backbone-slot-router"), ctx.stream("backbone-fact-router"), device)
              if spec.slot_retrieval_weight > 0 else None)
    trained = [*model.parameters(), *trained_heads(spec, router)]
    optimizer = torch.optim.AdamW(trained, lr=spec.lr, weight_decay=0.01)
    warmup = max(1, spec.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))

    def step(_: int) -> dict[str, float]:
        gold = torch.randint(spec.pool_docs, (spec.batch,), generator=data)
        queries = make_queries(spec.layout, pool, gold, spec.max_noise_step, spec.model.n_diffusion_steps, data)
        slots = memory_slots(spec.batch, spec.memory_docs, spec.gold_rate, data)
        # the batch's documents are the gold ones, so slot i is query i's gold document
        losses = backbone_loss(model, spec, queries.to(device), pool[gold].to(device), slots, router, pool)
        optimizer_step(total_loss(spec, losses), optimizer, schedule, clip_norm=1.0)
        return {LOGGED[name]: float(loss.detach()) for name, loss in losses.items()}

    ctx.fit(spec.steps, step, name="backbone", log_every=25)
    tokens_per_s = measure_training_throughput(model, spec, ctx.stream("backbone-throughput"), device)
    payload: dict[str, Any] = {"state": model.state_dict(), "train_tokens_per_s": tokens_per_s}
    if isinstance(router, FamilyHeads):
        payload["neutrality"] = neutrality(model.eval(), spec, router, pool, ctx.stream("backbone-neutrality"), device)
    return payload


def neutrality(
    model: PCSHODLM, spec: BackboneSpec, router: FamilyHeads, pool: torch.Tensor, generator: torch.Generator,
    device: torch.device,
) -> dict[str, float]:
    """``token_document_accuracy`` and ``family_document_accuracy`` of the trained backbone and its
    training-only heads on a fresh batch of training queries (the heads are discarded after this)."""
    gold = torch.randint(spec.pool_docs, (spec.batch,), generator=generator)
    queries = make_queries(spec.layout, pool, gold, spec.max_noise_step, spec.model.n_diffusion_steps, generator).to(device)
    with torch.no_grad():
        hidden = model.hidden_before(spec.msa_layers[0], queries.noisy, queries.t)
        candidates, candidate_chunks = candidate_documents(model, spec, queries, pool)
    return {**token_document_accuracy(router.token, hidden, queries, candidates, candidate_chunks),
            **family_document_accuracy(router, hidden, queries, spec.layout, candidates, candidate_chunks)}


def trained_backbone(spec: BackboneSpec, payload: Mapping[str, Any], ctx: TrialContext) -> Backbone:
    """The backbone from ``train_backbone``'s payload, in eval mode."""
    model = build_model(spec, ctx.stream("backbone-init"), ctx.device)
    model.load_state_dict(payload["state"])
    return Backbone(model.eval(), spec.msa, float(payload["train_tokens_per_s"]), dict(payload.get("neutrality", {})))


def measure_training_throughput(
    model: PCSHODLM, spec: BackboneSpec, data: torch.Generator, device: torch.device
) -> float:
    """Tokens/s (query + document tokens) of a forward+backward on a fixed batch, weights untouched."""
    pool = make_documents(spec.layout, spec.batch, data)
    gold = torch.arange(spec.batch)
    queries = make_queries(spec.layout, pool, gold, spec.max_noise_step, spec.model.n_diffusion_steps, data).to(device)
    slots = memory_slots(spec.batch, spec.memory_docs, spec.gold_rate, data)
    documents = pool.to(device)

    def forward_backward() -> None:
        total_loss(spec, backbone_loss(model, spec, queries, documents, slots)).backward()

    tokens = spec.batch * (spec.layout.query_len + spec.layout.doc_len)
    rate = throughput(forward_backward, tokens, min_run_time=0.1)
    model.zero_grad(set_to_none=True)
    return rate
