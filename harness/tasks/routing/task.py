"""Task ``routing``: precision-guided router vs MSA's RouterProjector on an entity memory.

One trial = one arm at one seed and bank size. The backbone (PC-SHO-DLM with MSA layers) is
trained once per seed and cached; the bank's documents are encoded once into a MemoryBank; the
arm's router (if learned) is trained with the contrastive routing loss on the training
documents (trained once per seed and arm, cached, shared by every bank size); then routing
quality, end-to-end masked-value accuracy (no memory / gold document / routed top-k),
active-retrieval AUROC, precision calibration and costs are measured on queries about the
held-out bank, whose entity names no router or backbone trained on. ``regime`` picks the
queries (see ``workload``): the route named by confident visible entity tokens, or by the one
masked (uncertain) position among confident distractor facts. Every trial also reports whether the
premise of precision routing holds in its backbone: how well 1/Pi marks the asked slot at each layer
(``precision_signal``) and whether a linear probe reads the asked slot's document from its
routing-layer state (``probe``).
"""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import Annotated, Any, Mapping

import torch
import torch.nn as nn
from pydantic import Field, ValidationInfo, field_validator, model_validator

from harness.measure.memory import read_bandwidth
from harness.measure.timing import seconds_per_call
from harness.tasks.routing.mechanism.model import LOG_PRECISION_BOUND, PCSHOConfig, per_token_loss
from harness.tasks.routing.mechanism.msa import MemoryBank, MSAConfig, ensure_bank_fits
from harness.tasks.routing.mechanism.precision_router import PrecisionGuidedRouter
from harness.tasks.base import Metric, Task, TaskParams, TrialContext, training_budget, training_budget_metrics
from harness.tasks.routing.backbone import (
    Backbone,
    BackboneSpec,
    SlotTarget,
    encode_bank,
    train_backbone,
    trained_backbone,
)
from harness.tasks.routing.evaluation import (
    auroc,
    gold_ranks,
    precision_signal,
    retrieval_metrics,
    value_predictions,
)
from harness.tasks.routing.routers import (
    Arm,
    RouterTraining,
    fixed_document_scores,
    install_router,
    new_parameters,
    routing_queries,
    train_router,
)
from harness.tasks.routing.pooling import OracleTokenRouter, pool_tokens_of, pooling_weights
from harness.tasks.routing.probe import ProbeTraining, probe_accuracy, slot_states, train_probe
from harness.tasks.routing.reader import NoMemoryAnswers, Reader, lookup_answers
from harness.tasks.routing.scoring import RoutingIndex, random_keys
from harness.tasks.routing.workload import (
    Layout,
    QueryBatch,
    Regime,
    Vocabulary,
    make_documents,
    make_queries,
    split_names,
)

EVAL_BATCH = 16
DEFAULT_ENTITY_TOKENS = 128
HELD_OUT_ROOM = 4096


class BackboneParams(TaskParams):
    """The backbone's training, shared by every arm of a seed."""
    steps: int = Field(1200, ge=1)
    batch: int = Field(64, ge=2)
    lr: float = Field(3e-3, gt=0)
    docs: int = Field(4096, ge=2, description="training documents (names disjoint from the held-out bank)")


class RouterTrainingParams(TaskParams):
    """The learned routers' keys and their contrastive training (``router`` names the arm's router)."""
    dim: int = Field(64, ge=1, description="routing key dim")
    heads: int = Field(4, ge=1, description="routing heads")
    steps: int = Field(150, ge=1)
    batch: int = Field(32, ge=1)
    lr: float = Field(1e-2, gt=0)
    temperature: float = Field(0.05, gt=0, description="of the contrastive routing loss (and the slot-retrieval loss)")
    negatives: int = Field(256, ge=1)


class ProbeParams(TaskParams):
    """The asked-slot linear probe."""
    queries: int = Field(2048, ge=2, description="training queries of the asked-slot linear probe")
    steps: int = Field(200, ge=1, description="full-batch Adam steps of the asked-slot linear probe")


class RoutingParams(TaskParams):
    router: Arm = "router_projector"
    regime: Regime = Field(
        "visible_entity", description="visible_entity: the query names its document by visible entity tokens; "
        "uncertain_key: among `segments` visible facts of distinct documents only the masked value marks the one asked"
    )
    segments: int = Field(4, ge=2, description="uncertain_key: facts per query (one asked, the rest distractors)")
    sharp_temperature: float = Field(0.25, gt=0, description="precision_sharp pools by (1/Pi)^(1/this)")
    bank_size: int = Field(256, ge=2, description="documents in the held-out memory bank")
    # workload
    entity_len: int = Field(2, ge=1, description="tokens of an entity name (names are unique across all documents)")
    n_entities: int | None = Field(
        None, ge=2, description="entity-name tokens; None: the smallest count >= 128 whose names cover the training "
        "documents plus a held-out bank of 4096 (128 for names of 2+ tokens, 8192 for 1-token names)"
    )
    n_attributes: int = Field(16, ge=1)
    n_values: int = Field(16, ge=2)
    doc_facts: int = Field(4, ge=1, description="attribute=value facts per document")
    query_facts: int = Field(2, ge=1, description="facts a query asks (their values masked)")
    chunk_size: int = Field(
        2, ge=1, description="tokens per pooled memory chunk: 2 keeps one attribute=value fact (and the entity "
        "name) per chunk, so mean pooling does not blur facts together (the MSA paper's P = 64 is for long text)"
    )
    query_noise: float = Field(0.1, ge=0.0, le=1.0, description="largest diffusion step of a query, as a fraction of T")
    # backbone
    d_model: int = Field(64, ge=8)
    n_heads: int = Field(4, ge=1)
    n_layers: int = Field(3, ge=2)
    d_ff: int = Field(128, ge=8)
    n_diffusion_steps: int = Field(100, ge=1)
    n_settling_steps: int = Field(2, ge=0)
    msa_from_layer: int = Field(1, ge=0, description="first MSA layer (the routing layer) is max(this, n_layers // 2); "
                                "below n_layers")
    backbone: BackboneParams = BackboneParams()
    energy_weight: float = Field(0.1, ge=0)
    gold_rate: float = Field(0.9, ge=0.0, le=1.0, description="chance the backbone's memory holds the gold document")
    slot_retrieval_weight: float = Field(
        0.0, ge=0, description="weight of the backbone's slot-retrieval loss: MSA's contrastive routing loss of a "
        "training-only router (temperature router_training.temperature); 0 leaves it out"
    )
    slot_retrieval_target: SlotTarget = Field(
        "asked_slot", description="asked_slot: the asked slots, pooled, find the gold document (oracle_masked's pooling); "
        "asked_token: each asked slot alone finds its document (the per-token form of asked_slot); "
        "every_token: each query token alone finds its own fact's document (no arm's pooling; the per-token family's "
        "query); token_and_fact: every_token plus, at the same weight, each fact's tokens pooled find its document "
        "(both router families' queries)"
    )
    reader: Reader = Field(
        "backbone", description="who answers from the memory documents in acc_oracle and acc_routed: backbone, its MSA "
        "layers reading their pooled K/V; lookup, the constructed reader (reader.py): at every masked value of the "
        "noisy query it copies the value of the fact whose entity name and attribute the query shows there, else "
        "answers as the backbone without memory (it is not told which value is asked)"
    )
    read_k: int | None = Field(
        None, ge=1, description="documents the end-to-end answers read: the router's top read_k (None: top_k)"
    )
    # router
    router_training: RouterTrainingParams = RouterTrainingParams()
    top_k: int = Field(4, ge=1)
    # evaluation
    eval_queries: int = Field(256, ge=2)
    probe: ProbeParams = ProbeParams()
    measure_speed: bool = True
    score_bank_chunks: tuple[Annotated[int, Field(ge=1)], ...] = Field((10_000, 100_000, 1_000_000), min_length=1)
    score_batch: int = Field(1, ge=1, description="queries per scoring call in the throughput figure")

    @field_validator("msa_from_layer")
    @classmethod
    def _a_layer(cls, layer: int, info: ValidationInfo) -> int:
        n_layers = info.data.get("n_layers")
        if n_layers is not None and layer >= n_layers:
            raise ValueError(f"{layer} names no layer of the {n_layers}-layer backbone: the routing layer must be "
                             f"below n_layers")
        return layer

    @model_validator(mode="after")
    def _consistent(self) -> "RoutingParams":
        if self.top_k >= self.backbone.batch:
            raise ValueError(
                f"top_k ({self.top_k}) documents of memory per query while training the backbone must be fewer "
                f"than backbone.batch ({self.backbone.batch})"
            )
        names = self.entity_tokens**self.entity_len
        if self.bank_size + self.backbone.docs > names:
            raise ValueError(
                f"bank_size ({self.bank_size}) + backbone.docs ({self.backbone.docs}) documents with disjoint names "
                f"exceed the {names} distinct entity names (n_entities ** entity_len)"
            )
        if self.read_k is not None and self.read_k > self.top_k:
            raise ValueError(f"read_k ({self.read_k}) exceeds top_k ({self.top_k}): the reader reads the routed documents")
        if self.top_k > self.bank_size:
            raise ValueError(f"top_k ({self.top_k}) exceeds bank_size ({self.bank_size})")
        if self.regime == "uncertain_key" and min(self.bank_size, self.backbone.docs) <= self.segments:
            raise ValueError(
                f"uncertain_key queries hold {self.segments} facts of distinct documents: bank_size ({self.bank_size}) "
                f"and backbone.docs ({self.backbone.docs}) must exceed segments"
            )
        return self

    @property
    def entity_tokens(self) -> int:
        """``n_entities``, or the rule its description states."""
        if self.n_entities is not None:
            return self.n_entities
        return max(DEFAULT_ENTITY_TOKENS, math.ceil((self.backbone.docs + HELD_OUT_ROOM) ** (1 / self.entity_len)))


def _metrics() -> tuple[Metric, ...]:
    q, s, m, i = "quality", "speed", "memory", "info"
    bank = "bank size (chunks)"
    return (
        Metric(name="recall", direction="higher", unit="fraction", kind=q,
               description="gold document in the router's top-1 / top-k (k = top_k)", key=True,
               axis="k (documents retrieved)"),
        Metric(name="mrr", direction="higher", unit="fraction", kind=q,
               description="mean reciprocal rank of the gold document"),
        Metric(name="recall_over_chance", direction="higher", unit="x", kind=q,
               description="recall@1 divided by chance (1 / bank_size)", key=True),
        Metric(name="hub_share", direction="lower", unit="fraction", kind=q,
               description="share of queries whose top-1 is the most retrieved document", key=True),
        Metric(name="top1_entropy", direction="higher", unit="bits", kind=q,
               description="entropy of the top-1 document histogram"),
        Metric(name="acc_none", direction="higher", unit="fraction", kind=q,
               description="masked-value accuracy without memory"),
        Metric(name="acc_oracle", direction="higher", unit="fraction", kind=q,
               description="masked-value accuracy with the gold document as memory"),
        Metric(name="acc_routed", direction="higher", unit="fraction", kind=q,
               description="masked-value accuracy with the routed top read_k documents (read_k: top_k unless set)"),
        Metric(name="oracle_lift", direction="higher", unit="fraction", kind=q,
               description="acc_oracle - acc_none: what memory can add", key=True),
        Metric(name="gap_closed", direction="higher", unit="fraction", kind=q,
               description="(acc_routed - acc_none) / (acc_oracle - acc_none)", key=True),
        Metric(name="auroc_helps", direction="higher", unit="fraction", kind=q,
               description="AUROC of precision gain (precision arm) or top-1 score margin (others) for 'retrieval helps'"),
        Metric(name="weight_on_asked", direction="none", unit="fraction", kind=i,
               description="pooling weight on the asked (masked) value positions, mean over queries (pooled routers)"),
        Metric(name="weight_on_route", direction="none", unit="fraction", kind=i,
               description="pooling weight on the tokens that identify the gold document, mean over queries (pooled routers)"),
        Metric(name="asked_slot_auroc", direction="higher", unit="AUROC", kind=i,
               description="AUROC of 1/Pi for the asked (masked value) slots against "
               "the visible tokens, at the routing layer",
               key=True),
        Metric(name="uncertainty_spearman", direction="higher", unit="rho", kind=i,
               description="Spearman(1/Pi, per-token denoising loss) over all "
               "positions, at the routing layer"),
        Metric(name="uncertainty_spearman_masked", direction="higher", unit="rho", kind=i,
               description="the same over masked positions only"),
        Metric(name="layer_asked_slot_auroc", direction="higher", unit="AUROC", kind=i,
               description="asked_slot_auroc at layer L (@L)", axis="layer"),
        Metric(name="layer_uncertainty_spearman", direction="higher", unit="rho", kind=i,
               description="uncertainty_spearman at layer L (@L)", axis="layer"),
        Metric(name="layer_uncertainty_spearman_masked", direction="higher", unit="rho", kind=i,
               description="uncertainty_spearman_masked at layer L (@L)", axis="layer"),
        Metric(name="probe_doc_acc", direction="higher", unit="fraction", kind=i,
               description="linear probe of the asked slot's routing-layer state: "
               "fraction of asked slots whose document's whole entity name it reads (held-out names)",
               key=True),
        Metric(name="token_doc_acc_asked", direction="none", unit="fraction", kind=i,
               description="every_token backbones: share of asked slots whose own routing query (the backbone's "
               "training-only per-token router) finds their document's name chunk first"),
        Metric(name="token_doc_acc_other", direction="none", unit="fraction", kind=i,
               description="the same at every other query position (each finds its own fact's document)"),
        Metric(name="asked_slot_lead", direction="none", unit="fraction", kind=i,
               description="token_doc_acc_asked - token_doc_acc_other: how much more the backbone taught the asked "
               "slot its document than the other positions theirs (a backbone trained for no arm's pooling: <= 0)"),
        Metric(name="token_doc_acc", direction="none", unit="fraction", kind=i,
               description="per-token slot-retrieval backbones: share of query tokens whose own routing query (the "
               "training-only per-token head) finds their document's name chunk first"),
        Metric(name="fact_doc_acc", direction="none", unit="fraction", kind=i,
               description="the same for each fact's tokens pooled into one query (the training-only pooled head)"),
        Metric(name="family_lead", direction="none", unit="fraction", kind=i,
               description="token_doc_acc - fact_doc_acc: how much better the backbone taught the per-token family's "
               "kind of query than the pooled family's (a backbone neutral between the families: near 0)"),
        Metric(name="at_bound/log_precision", direction="none", unit="fraction", kind=i,
               description="fraction of routing-layer token log-precisions "
               "within 1% of their bound (visible tokens, whose error is 0, belong there)"),
        *training_budget_metrics("optimizer steps the arm's router trained (0: a fixed router)",
                                 "training queries the arm's router saw"),
        Metric(name="new_params", direction="lower", unit="parameters", kind=m,
               description="new trainable router parameters (shared heads excluded)"),
        Metric(name="key_bytes_per_doc", direction="lower", unit="bytes", kind=m,
               description="routing-key bytes stored per document"),
        Metric(name="score_qps", direction="higher", unit="queries/s", kind=s,
               description="top-k routing throughput against a bank of N chunks (@N)", axis=bank),
        Metric(name="score_bw_frac", direction="higher", unit="fraction", kind=s,
               description="routing-key bytes read per second / streaming read rate of a bank-sized tensor (the memory level "
               "the bank lives in) (@N)",
               axis=bank),
        Metric(name="read_bandwidth", direction="none", unit="GB/s", kind=s,
               description="streaming read rate (a sum) of a tensor of the bank's key "
               "bytes, measured right before the scoring (@N)",
               axis=bank),
        Metric(name="router_train_tokens_per_s", direction="higher", unit="tokens/s", kind=s,
               description="router training step throughput"),
        Metric(name="backbone_train_tokens_per_s", direction="higher", unit="tokens/s", kind=s,
               description="backbone training step throughput"),
    )


class RoutingTask(Task):
    name = "routing"
    # 9: the lookup reader finds the masked values itself and reads the top read_k documents; the token_and_fact
    # target and its family figures (8: mask_pool, every_token; 6: the spec's energy, oracle_masked; 5: regimes)
    version = "9"
    description = (
        "precision-guided router vs its mean-pooling ablation and MSA RouterProjector on an entity attribute=value "
        "memory, evaluated on a held-out bank (PC-SHO-DLM backbone)"
    )
    Params = RoutingParams
    metrics = _metrics()
    smoke_params = {
        "bank_size": 16, "d_model": 16, "d_ff": 32, "n_heads": 2, "n_layers": 2, "msa_from_layer": 1,
        "router_training.dim": 8, "router_training.heads": 2, "top_k": 2, "backbone.steps": 6, "backbone.batch": 8,
        "backbone.docs": 32, "router_training.steps": 4, "router_training.batch": 8, "router_training.negatives": 8,
        "eval_queries": 16, "score_bank_chunks": [400], "n_entities": 8, "router": "precision", "probe.queries": 32,
        "probe.steps": 5,
    }

    def run(self, params: RoutingParams, ctx: TrialContext) -> Mapping[str, float]:
        device = ctx.device
        layout = layout_of(params)
        spec = backbone_spec(params, layout)
        training_names, bank_names = split_names(layout, [params.backbone.docs, params.bank_size], ctx.stream("names"))
        training_docs = make_documents(layout, params.backbone.docs, ctx.stream("backbone-docs"), names=training_names)
        backbone = ctx.cached("backbone", asdict(spec), build=lambda: train_backbone(spec, training_docs, ctx),
                              restore=lambda payload: trained_backbone(spec, payload, ctx))
        documents = make_documents(layout, params.bank_size, ctx.stream("bank", params.bank_size), names=bank_names)
        documents = documents.to(device)
        widths = 2 * params.d_model * len(backbone.msa_layers) + params.router_training.dim + params.d_model
        ensure_bank_fits(params.bank_size * layout.chunks_per_doc, widths, device)
        encoded, pooled = ctx.cached("bank", {"backbone": asdict(spec), "bank_size": params.bank_size},
                                     build=lambda: encode_bank(backbone.model, backbone.msa, documents))

        router = install_router(params.router, backbone, params.sharp_temperature)
        metrics: dict[str, float] = {"backbone_train_tokens_per_s": backbone.train_tokens_per_s, **backbone.neutrality}
        if router is not None:
            metrics["router_train_tokens_per_s"] = fit_router(params, spec, backbone, router, training_docs, ctx)
        bank = build_bank(backbone, router, encoded, pooled, layout.chunk_size)
        queries = make_queries(
            layout, documents.cpu(), torch.randint(params.bank_size, (params.eval_queries,),
                                                   generator=ctx.stream("eval-gold", params.bank_size)),
            max_noise_step(params), params.n_diffusion_steps, ctx.stream("eval", params.bank_size),
        ).to(device)
        shared = arm_free_evaluation(params, spec, backbone, encoded, documents, queries, training_docs, ctx)
        metrics.update(shared["figures"])
        with torch.no_grad():
            metrics.update(evaluate(params, backbone, router, bank, encoded, documents, queries, shared, ctx))
        steps = params.router_training.steps if router is not None else 0
        metrics.update(training_budget(steps, params.router_training.batch))
        metrics["new_params"] = float(sum(p.numel() for p in new_parameters(router))) if router is not None else 0.0
        metrics["key_bytes_per_doc"] = float(layout.chunks_per_doc * params.router_training.dim * 4) if router is not None else 0.0
        if router is not None and params.measure_speed:
            # synthetic banks, independent of bank_size: measured once per seed and arm
            identity = {"arm": params.router, "layout": asdict(layout), "router_dim": params.router_training.dim,
                        "heads": params.router_training.heads, "top_k": params.top_k, "score_batch": params.score_batch,
                        "score_bank_chunks": list(params.score_bank_chunks)}
            metrics.update(ctx.cached("scoring-speed", identity,
                                      build=lambda: scoring_speed(params, router, layout, device, ctx.stream("speed"))))
        return metrics


def fit_router(
    params: RoutingParams, spec: BackboneSpec, backbone: Backbone, router: nn.Module, training_docs: torch.Tensor,
    ctx: TrialContext,
) -> float:
    """Train the installed router on the training documents, once per seed and arm (cached: every
    bank size evaluates the same router); returns its training tokens/s."""
    training = RouterTraining(
        steps=params.router_training.steps, batch=params.router_training.batch, lr=params.router_training.lr,
        temperature=params.router_training.temperature, negatives=params.router_training.negatives,
        max_noise_step=max_noise_step(params),
    )

    def build() -> dict[str, Any]:
        pooled = ctx.cached("training-states", {"backbone": asdict(spec)},
                            build=lambda: encode_bank(backbone.model, backbone.msa, training_docs.to(ctx.device))[1])
        rate = train_router(router, backbone, pooled, training_docs.to(ctx.device), spec.layout, training, ctx)
        return {"state": router.state_dict(), "train_tokens_per_s": rate}

    identity = {"arm": params.router, "backbone": asdict(spec), "training": asdict(training)}
    if params.router == "precision_sharp":
        identity["sharp_temperature"] = params.sharp_temperature
    payload = ctx.cached("router", identity, build=build)
    router.load_state_dict(payload["state"])
    return float(payload["train_tokens_per_s"])


def fit_probe(params: RoutingParams, spec: BackboneSpec, backbone: Backbone, training_docs: torch.Tensor,
              ctx: TrialContext) -> dict[str, torch.Tensor]:
    """The asked-slot probe, trained once per seed on the training documents (cached: every arm and
    bank size reads the same probe)."""
    training = probe_training(params)
    return ctx.cached("probe", {"backbone": asdict(spec), "training": asdict(training)},
                      build=lambda: train_probe(backbone, training_docs, spec.layout, training, ctx.stream("probe"), ctx.device,
                                                ctx.stream(training.init)))


def probe_training(params: RoutingParams) -> ProbeTraining:
    return ProbeTraining(queries=params.probe.queries, steps=params.probe.steps, lr=1e-2,
                         max_noise_step=max_noise_step(params))


def layout_of(params: RoutingParams) -> Layout:
    vocabulary = Vocabulary(n_entities=params.entity_tokens, n_attributes=params.n_attributes, n_values=params.n_values)
    return Layout(vocabulary, params.entity_len, params.doc_facts, params.query_facts, params.chunk_size,
                  params.regime, params.segments)


def max_noise_step(params: RoutingParams) -> int:
    return max(1, round(params.query_noise * params.n_diffusion_steps))


def backbone_spec(params: RoutingParams, layout: Layout) -> BackboneSpec:
    model = PCSHOConfig(
        vocab_size=layout.vocabulary.size, max_seq_len=max(layout.doc_len, layout.query_len),
        d_model=params.d_model, n_heads=params.n_heads, n_layers=params.n_layers, d_ff=params.d_ff,
        n_diffusion_steps=params.n_diffusion_steps, n_settling_steps=params.n_settling_steps,
    )
    msa = MSAConfig(chunk_size=params.chunk_size, top_k=params.top_k, router_dim=params.router_training.dim,
                    n_router_heads=params.router_training.heads, apply_from_layer=params.msa_from_layer)
    return BackboneSpec(
        model=model, msa=msa, layout=layout, steps=params.backbone.steps, batch=params.backbone.batch,
        lr=params.backbone.lr, energy_weight=params.energy_weight, gold_rate=params.gold_rate,
        memory_docs=params.top_k,
        pool_docs=params.backbone.docs, max_noise_step=max_noise_step(params),
        slot_retrieval_weight=params.slot_retrieval_weight, slot_retrieval_temperature=params.router_training.temperature,
        slot_retrieval_target=params.slot_retrieval_target,
    )


def build_bank(
    backbone: Backbone, router, encoded: dict[int, dict[str, torch.Tensor]], pooled: torch.Tensor, chunk_size: int
) -> MemoryBank:
    """Documents into the MemoryBank; the routing layer's keys come from the arm's (trained) router."""
    keys = dict(encoded[backbone.routing_layer])
    if router is not None:
        with torch.no_grad():
            keys["KR"] = router.project_key(pooled)
    layers = {**encoded, backbone.routing_layer: keys}
    bank = MemoryBank(chunk_size)
    for doc in range(pooled.shape[0]):
        bank.add_document(str(doc), {layer: {name: entry[name][doc] for name in MemoryBank.FIELDS} for layer, entry in layers.items()})
    return bank


def document_scores(
    params: RoutingParams, backbone: Backbone, router, bank: MemoryBank, hidden: torch.Tensor, queries: QueryBatch,
    generator: torch.Generator,
) -> torch.Tensor:
    """(B, n_docs) for every eval query: the fast index for learned routers, fixed for controls
    (``generator`` draws the random router's scores)."""
    if router is None:
        return fixed_document_scores(params.router, queries.gold, params.bank_size, generator)
    keys, _ = bank.get_routing_keys(backbone.routing_layer)
    heads = 1 if isinstance(router, PrecisionGuidedRouter) else router.n_heads
    pool_tokens = pool_tokens_of(router, queries)
    index = RoutingIndex(keys, heads, layout_of(params).chunks_per_doc)
    return torch.cat([
        index.document_scores(routing_queries(router, hidden[i : i + EVAL_BATCH], queries.t[i : i + EVAL_BATCH],
                                              pool_tokens[i : i + EVAL_BATCH]))
        for i in range(0, hidden.shape[0], EVAL_BATCH)
    ])


def arm_free_evaluation(
    params: RoutingParams, spec: BackboneSpec, backbone: Backbone, encoded: dict[int, dict[str, torch.Tensor]],
    documents: torch.Tensor, queries: QueryBatch, training_docs: torch.Tensor, ctx: TrialContext,
) -> dict[str, Any]:
    """What no arm changes, computed once per seed and bank size (cached): the answers without memory and
    with the gold document, the precision signals, the asked-slot probe; and the backbone's answers
    without memory, the reader's fallback."""
    identity = {"backbone": asdict(spec), "bank_size": params.bank_size, "eval_queries": params.eval_queries,
                "reader": params.reader, "probe": asdict(probe_training(params))}

    def build() -> dict[str, Any]:
        probe = fit_probe(params, spec, backbone, training_docs, ctx)
        with torch.no_grad():
            return arm_free_figures(params, spec, backbone, encoded, documents, queries, probe)

    return ctx.cached("arm-free", identity, build=build)


def arm_free_figures(
    params: RoutingParams, spec: BackboneSpec, backbone: Backbone, encoded: dict[int, dict[str, torch.Tensor]],
    documents: torch.Tensor, queries: QueryBatch, probe: Mapping[str, torch.Tensor],
) -> dict[str, Any]:
    """``arm_free_evaluation``'s payload, computed."""
    model, layer = backbone.model, backbone.routing_layer
    hidden = model.hidden_before(layer, queries.noisy, queries.t)
    fallback = no_memory_answers(backbone, hidden, queries)
    acc_none, logp_none = value_predictions(model, hidden, queries, layer, None)
    acc_oracle, _ = read_answers(params, backbone, encoded, documents, hidden, queries, queries.gold[:, None], fallback)
    none, oracle = float(acc_none.mean()), float(acc_oracle.mean())
    figures = {"acc_none": none, "acc_oracle": oracle, "oracle_lift": oracle - none}
    trace = model.forward_trace(queries.noisy, queries.t)
    token_loss = per_token_loss(trace.logits, queries.clean, queries.masked)
    for at, (tok, ch) in enumerate(zip(trace.tok_precision, trace.ch_precision)):
        signal = precision_signal(tok, ch, queries, token_loss)
        figures.update({f"layer_{name}@{at}": value for name, value in signal.items()})
        if at == layer:
            figures.update(signal)
    log_tok, _ = model.precision_up[layer].log_precisions(hidden, queries.t)
    figures["at_bound/log_precision"] = float((log_tok.abs() >= 0.99 * LOG_PRECISION_BOUND).double().mean())
    figures["probe_doc_acc"] = probe_accuracy(probe, *slot_states(hidden, queries, documents, spec.layout))
    return {"figures": figures, "logp_none": logp_none, "answers": fallback.tokens, "answer_log_probs": fallback.log_probs}


def no_memory_answers(backbone: Backbone, hidden: torch.Tensor, queries: QueryBatch) -> NoMemoryAnswers:
    """The backbone's answer at every position without memory, and the clean token's log-probability."""
    model = backbone.model
    logits = model.readout(model.run_layers(hidden, queries.t, backbone.routing_layer, model.config.n_layers, None))
    log_probs = logits.log_softmax(dim=-1).gather(-1, queries.clean.unsqueeze(-1)).squeeze(-1)
    return NoMemoryAnswers(tokens=logits.argmax(dim=-1), log_probs=log_probs)


def read_answers(
    params: RoutingParams, backbone: Backbone, encoded: dict[int, dict[str, torch.Tensor]], documents: torch.Tensor,
    hidden: torch.Tensor, queries: QueryBatch, memory_docs: torch.Tensor, fallback: NoMemoryAnswers,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query: accuracy on the asked values and their mean log-probability with the documents
    ``memory_docs`` (B, k) as memory, read by the backbone's MSA layers or by the constructed reader."""
    if params.reader == "lookup":
        return lookup_answers(layout_of(params), queries, documents[memory_docs], fallback)
    memory = {layer: (encoded[layer]["K"][memory_docs].flatten(1, 2), encoded[layer]["V"][memory_docs].flatten(1, 2))
              for layer in backbone.msa_layers}
    return value_predictions(backbone.model, hidden, queries, backbone.routing_layer, memory)


def evaluate(
    params: RoutingParams, backbone: Backbone, router, bank: MemoryBank, encoded: dict[int, dict[str, torch.Tensor]],
    documents: torch.Tensor, queries: QueryBatch, shared: Mapping[str, Any], ctx: TrialContext,
) -> dict[str, float]:
    """The arm's own figures: routing quality, answers with its routed documents, its pooling weights."""
    hidden = backbone.model.hidden_before(backbone.routing_layer, queries.noisy, queries.t)
    scores = document_scores(params, backbone, router, bank, hidden, queries, ctx.stream("random-router", params.bank_size))
    out = retrieval_metrics(scores, queries.gold, params.top_k)
    out["recall_over_chance"] = out["recall@1"] * params.bank_size
    routed = scores.topk(params.read_k or params.top_k, dim=1).indices
    fallback = NoMemoryAnswers(tokens=shared["answers"], log_probs=shared["answer_log_probs"])
    acc_routed, logp_routed = read_answers(params, backbone, encoded, documents, hidden, queries, routed, fallback)
    none, oracle, routed_acc = shared["figures"]["acc_none"], shared["figures"]["acc_oracle"], float(acc_routed.mean())
    out["acc_routed"] = routed_acc
    out["gap_closed"] = (routed_acc - none) / (oracle - none) if oracle > none else math.nan
    if isinstance(router, PrecisionGuidedRouter):
        weights = pooling_weights(router, hidden, queries.t, pool_tokens_of(router, queries))
        out["weight_on_asked"] = float((weights * queries.is_value).sum(dim=1).mean())
        out["weight_on_route"] = float((weights * queries.route_tokens).sum(dim=1).mean())
    out["auroc_helps"] = auroc(retrieval_confidence(params, backbone, router, bank, hidden, queries, scores),
                               logp_routed > shared["logp_none"])
    ctx.logger.record("gold_rank", gold_ranks(scores, queries.gold).tolist())
    return out


def retrieval_confidence(
    params: RoutingParams, backbone: Backbone, router, bank: MemoryBank, hidden: torch.Tensor, queries: QueryBatch, scores: torch.Tensor
) -> torch.Tensor:
    """Per query: a precision-weighted router's top estimated gain, else the top-1 minus top-2 score."""
    if isinstance(router, PrecisionGuidedRouter) and not isinstance(router, OracleTokenRouter):
        return torch.cat([
            router.estimate_precision_gain(hidden[i : i + EVAL_BATCH], queries.t[i : i + EVAL_BATCH], bank,
                                           backbone.routing_layer, top_k=1)[0][:, 0]
            for i in range(0, hidden.shape[0], EVAL_BATCH)
        ])
    top2 = scores.topk(2, dim=1).values
    return top2[:, 0] - top2[:, 1]


def scoring_speed(
    params: RoutingParams, router, layout: Layout, device: torch.device, generator: torch.Generator
) -> dict[str, float]:
    """Top-k routing throughput against synthetic banks of N chunks, and the key bytes it reads
    per second as a share of the streaming read rate of a bank-sized tensor, measured right before:
    the bandwidth of the memory level (cache or DRAM) the bank lives in."""
    per_doc = layout.chunks_per_doc
    largest = max(params.score_bank_chunks) // per_doc * per_doc
    keys = random_keys(largest, params.router_training.dim, device, generator)
    per_token = not isinstance(router, PrecisionGuidedRouter)
    heads = router.n_heads if per_token else 1
    queries = torch.randn(params.score_batch, layout.query_len if per_token else 1, params.router_training.dim, generator=generator).to(device)
    out = {}
    for n_chunks in params.score_bank_chunks:
        n_chunks = n_chunks // per_doc * per_doc
        key_bytes = n_chunks * params.router_training.dim * keys.element_size()
        index = RoutingIndex(keys[:n_chunks], heads, per_doc)
        bandwidth = read_bandwidth(device, key_bytes, min_run_time=0.05)
        seconds = seconds_per_call(lambda: index.top_documents(queries, params.top_k), min_run_time=0.1)
        out[f"read_bandwidth@{n_chunks}"] = bandwidth / 1e9
        out[f"score_qps@{n_chunks}"] = params.score_batch / seconds
        out[f"score_bw_frac@{n_chunks}"] = key_bytes / seconds / bandwidth
    return out
