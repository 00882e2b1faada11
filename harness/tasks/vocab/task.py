"""Task ``vocab``: split vocabulary vs the shared table on bitext retrieval.

Arms differ only in which (language, token) pairs get a private row (``index``) and how it is
used (``mode``); data, initial table and batch order are functions of the seed, so arms pair.
The interference index is chosen from scores measured on the control before any split model
trains, cached per seed and shared by arms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, Mapping, Union

import numpy as np
import torch
from scipy.stats import rankdata
from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator, model_validator

from harness.measure.memory import tensor_bytes
from harness.tasks.vocab.mechanism.diagnostics import effective_vocabularies, openness, relative_drift, rows_in_use
from harness.tasks.vocab.mechanism.embedder import StaticEmbedder
from harness.tasks.vocab.mechanism.index import save_index
from harness.tasks.vocab.mechanism.interference import CandidatePairs, candidate_pairs, top_pairs
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary
from harness.tasks.base import (
    DetailScatter,
    Metric,
    ParetoView,
    Task,
    TaskParams,
    TrialContext,
    training_budget,
    training_budget_metrics,
)
from harness.tasks.param_paths import kind_or
from harness.tasks.vocab.alignment import misalignment
from harness.tasks.vocab.cldr import CATEGORIES, MIN_LOCALES, cldr_corpus, cldr_folds, display_names
from harness.tasks.vocab.corpus import PAD, Corpus, refuse_unknown
from harness.tasks.vocab.corpus_payload import corpus_from_payload, corpus_payload
from harness.tasks.vocab.gettext import catalog_locales, catalog_root, catalog_texts, gettext_corpus, gettext_folds
from harness.tasks.vocab.multiway import candidate_count
from harness.tasks.vocab.interference_scores import measure_interference
from harness.measure.ranks import auprc, auroc, spearman
from harness.tasks.vocab.retrieval import retrieval_metrics, retrieval_ranks
from harness.tasks.vocab.synthetic import SyntheticSpec, synthetic_corpus
from harness.tasks.vocab.throughput import embedding_throughput
from harness.tasks.vocab.training import TrainConfig, batches, encode, initial_table, train

class SyntheticWorkload(TaskParams):
    """Generated languages with planted cognates and false friends (the truth is known)."""
    kind: Literal["synthetic"] = "synthetic"
    n_languages: int = Field(4, ge=2)
    n_concepts: int = Field(300, ge=10)
    cognate_rate: float = Field(0.2, ge=0.0, le=1.0)
    false_friend_rate: float = Field(0.15, ge=0.0, le=1.0)
    false_friend_boost: float = Field(1.0, gt=0.0, description="planted frequency cue: false-friend concepts drawn "
                                                               "this much more often (1: none)")
    frequency_spread: float = Field(1.0, ge=0.0, le=5.0, description="sigma of log-normal concept frequencies")
    min_length: int = Field(2, ge=1)
    max_length: int = Field(4, ge=1)
    train_pairs: int = Field(20000, ge=16)
    test_pairs: int = Field(300, ge=2, description="held-out pairs per language pair")
    twin_fraction: float = Field(0.5, ge=0.0, le=1.0, description="test pairs built as false-friend twins")
    partial_false_friend_rate: float = Field(0.2, ge=0.0, le=1.0, description="share of concepts given a cognate "
                                             "form that also means another concept in some of its languages")
    synonym_rate: float = Field(1.0, ge=0.0, le=1.0, description="each language writes its own synonym in place "
                                "of a cognate in a share of its uses drawn uniformly from [0, synonym_rate]")
    alignment_noise: float = Field(0.2, ge=0.0, le=1.0, description="chance that a training target's concept "
                                   "slot is a random concept (loose translations)")

    @model_validator(mode="after")
    def _lengths_ordered(self) -> "SyntheticWorkload":
        if self.min_length > self.max_length:
            raise ValueError(f"workload.min_length {self.min_length} exceeds workload.max_length {self.max_length}")
        return self


def _known_locales(value: tuple[str, ...]) -> tuple[str, ...]:
    from babel.localedata import locale_identifiers

    refuse_unknown("locales", value, locale_identifiers())
    return value


Locales = Annotated[tuple[str, ...], AfterValidator(_known_locales)]


class CldrWorkload(TaskParams):
    """CLDR display names (babel) of territories, languages, scripts, ... in each locale."""
    kind: Literal["cldr"] = "cldr"
    locales: Locales = ("en", "de", "fr", "es", "it", "nl")
    categories: tuple[str, ...] = CATEGORIES
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    folds: int | None = Field(None, ge=1, description="None: one held-out share (test_fraction); K: every "
                              "contested item the held-out rule can hold out is scored once, in one of K or more "
                              "folds (an item no fold can take opens another), each trained apart and filled to "
                              "test_fraction")

    @field_validator("categories")
    @classmethod
    def _known_categories(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        refuse_unknown("categories", value, CATEGORIES)
        return value

    @model_validator(mode="after")
    def _enough_locales(self) -> "CldrWorkload":
        if len(self.locales) < MIN_LOCALES:
            raise ValueError(f"the cldr workload needs at least {MIN_LOCALES} locales, got {list(self.locales)}")
        return self


class GettextWorkload(TaskParams):
    """Django's packaged gettext catalogs ("en": the msgid)."""
    kind: Literal["gettext"] = "gettext"
    locales: Locales = ("en", "de", "fr", "es", "it", "nl")
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    folds: int | None = Field(None, ge=1, description="None: one held-out share (test_fraction); K: every "
                              "contested item the held-out rule can hold out is scored once, in one of K or more "
                              "folds (an item no fold can take opens another), each trained apart and filled to "
                              "test_fraction")

    @model_validator(mode="after")
    def _catalogs_readable(self) -> "GettextWorkload":
        if len(self.locales) < 2:
            raise ValueError(f"the gettext workload needs at least 2 locales, got {list(self.locales)}")
        refuse_unknown("gettext locales", self.locales, catalog_locales(catalog_root()))
        catalog_texts(tuple(self.locales), catalog_root())  # a corrupt catalog is refused here, not mid-run
        return self


WorkloadParams = Annotated[
    Union[Annotated[SyntheticWorkload, Tag("synthetic")], Annotated[CldrWorkload, Tag("cldr")],
          Annotated[GettextWorkload, Tag("gettext")]],
    Discriminator(kind_or("synthetic")),
]


class ThroughputParams(TaskParams):
    """Lookup throughput against EmbeddingBag on a synthetic vocabulary of its own."""
    measure: bool = True
    vocab: int = Field(50_000, ge=2)
    tokens: int = Field(4096, ge=1)
    dim: int = Field(256, ge=1)
    min_time: float = Field(0.2, gt=0.0, description="seconds the forwards are timed in turn, call by call")


# the sentence length of the throughput batches where the workload has no max_length of its own
REAL_DATA_SENTENCE_LENGTH = 4


def sentence_length(workload: SyntheticWorkload | CldrWorkload | GettextWorkload) -> int:
    """Tokens per sentence of the throughput batches: the synthetic workload's longest sentence."""
    return workload.max_length if isinstance(workload, SyntheticWorkload) else REAL_DATA_SENTENCE_LENGTH


# per-fold counts a trial reports as their sum over folds (every other per-fold figure is averaged)
SUMMED = frozenset({"test_pairs", "contested_test_pairs", "contested_pools"})


@dataclass(frozen=True)
class FoldFit:
    """What one fold's training leaves for the trial's metrics."""
    metrics: dict[str, float]
    ranks: "FoldRanks"
    model: StaticEmbedder
    corpus: Corpus
    chosen: CandidatePairs
    gates: tuple[list[float], list[float]] | None  # (interference score, final gate) per split row
    candidates: int
    contested_candidates: int | None


class VocabParams(TaskParams):
    workload: WorkloadParams = SyntheticWorkload()
    # model and training
    dim: int = Field(64, ge=2)
    steps: int = Field(300, ge=1)
    batch_size: int = Field(128, ge=2)
    lr: float = Field(0.02, gt=0.0)
    scale: float = Field(20.0, gt=0.0)
    # split vocabulary
    index: Literal["none", "interference", "oracle", "random", "frequency", "language_count", "alignment",
                   "all"] = Field(
        "none", description="which pairs get a private row: interference, oracle, random, frequency, "
                            "language_count and alignment all pick the same number k (index_size, or "
                            "index_fraction of the candidates); all = every candidate")
    mode: Literal["gated", "fused"] = "gated"
    index_fraction: float = Field(0.25, gt=0.0, le=1.0, description="share k of candidate pairs split")
    index_size: int | None = Field(None, ge=1, description="k itself, in place of index_fraction; refused where "
                                                           "it exceeds the candidate set")
    l1_weight: float = Field(0.001, ge=0.0, description="weight of the mean-gate L1 (the seed's penalty())")
    fusion_weight: float = Field(0.01, ge=0.0, description="weight of the mean group lasso toward each token's consensus row")
    gate_init: float = Field(0.0, ge=-20.0, le=20.0, description="initial gate logit (sigmoid saturates beyond +-20)")
    # interference measurement
    interference_steps: int = Field(30, ge=0)
    interference_batches: int = Field(256, ge=1)
    # diagnostics and throughput
    merge_tolerance: float = Field(0.1, gt=0.0, description="relative distance below which rows count as one")
    throughput: ThroughputParams = ThroughputParams()
    log_every: int = Field(25, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> "VocabParams":
        workload = self.workload
        if isinstance(workload, SyntheticWorkload) and self.batch_size > workload.train_pairs:
            raise ValueError(f"batch_size {self.batch_size} exceeds workload.train_pairs {workload.train_pairs}")
        if self.index_size is not None and self.index_size > most_candidates(workload):
            raise ValueError(f"index_size {self.index_size} exceeds the candidate set of the {workload.kind} "
                             f"workload: at most {most_candidates(workload)} (language, token) pairs whose token two or "
                             f"more languages use")
        return self


def most_candidates(workload: SyntheticWorkload | CldrWorkload | GettextWorkload) -> int:
    """The largest candidate set the workload can give any seed: exact for the real-data workloads
    (every split keeps each word in training in its locale), n_languages x shared forms for the
    synthetic one (a seed's forms may have fewer languages, refused when its trial starts)."""
    if isinstance(workload, CldrWorkload):
        entities = display_names(workload.locales, workload.categories)
        return candidate_count([[entity[code] for code in workload.locales] for entity in entities])
    if isinstance(workload, GettextWorkload):
        return candidate_count(catalog_texts(tuple(workload.locales), catalog_root()))
    rates = workload.cognate_rate + workload.false_friend_rate + workload.partial_false_friend_rate
    return workload.n_languages * int(round(rates * workload.n_concepts))


class VocabTask(Task):
    name = "vocab"
    # 8: graded contestedness in the synthetic workload (partial false friends, synonyms for
    # cognates, loose training translations), the alignment index, contested minimal-pair pools in
    # the real-data workloads' tests, budget metrics; 9: the workload (a union on its kind) and the
    # throughput measurement as nested params
    version = "9"
    Params = VocabParams
    description = "split vocabulary vs the shared table: bitext retrieval with a static embedder"
    metrics = (
        Metric(name="acc1", direction="higher", unit="fraction", kind="quality",
           description="held-out bitext retrieval top-1 accuracy; @fwd source->target, @bwd target->source, @both mean",
           key=True),
        Metric(name="mrr", direction="higher", unit="fraction", kind="quality",
               description="mean reciprocal rank of the partner, both ways averaged"),
        Metric(name="contested_acc1", direction="higher", unit="fraction", kind="quality",
               description="acc1 on held-out pairs containing a truly contested (language, token) on either side (real data: "
           "retrieved within contested minimal-pair pools, each pair against the others that share its word)",
               key=True),
        Metric(name="contested_mrr", direction="higher", unit="fraction", kind="quality",
               description="mrr on pairs with a contested token"),
        Metric(name="gate_auroc", direction="higher", unit="fraction", kind="quality",
               description="AUROC of per-pair openness (gate; fusion: distance from the token's consensus row) vs truth",
               key=True),
        Metric(name="gate_auprc", direction="higher", unit="fraction", kind="quality",
               description="average precision of openness vs truth"),
        Metric(name="interference_auroc", direction="higher", unit="fraction", kind="info",
           description="AUROC of the interference score (measured on the control) vs truth, over candidate pairs"),
        Metric(name="frequency_auroc", direction="none", unit="fraction", kind="info",
               description="AUROC of a candidate's training count vs truth: how much frequency-k can know (0.5: nothing)"),
        Metric(name="language_count_auroc", direction="none", unit="fraction", kind="info",
               description="AUROC of the number of languages using a candidate's token vs truth (0.5: no cue)"),
        Metric(name="alignment_auroc", direction="none", unit="fraction", kind="info",
               description="AUROC of a candidate's misalignment (how rarely its token is on both sides of a training pair "
               "whose languages both use it) vs truth: how much alignment-k can know"),
        *training_budget_metrics("optimizer steps the arm trained (the interference warm-up, shared by a "
                                 "seed's arms, not counted)", "training pairs the arm's batches held (steps x batch)"),
        Metric(name="test_pairs", direction="none", unit="count", kind="info",
               description="held-out pairs (summed over folds)"),
        Metric(name="folds", direction="none", unit="count", kind="info",
               description="corpora trained apart: 1, or the real-data folds that score every contested item once"),
        Metric(name="contested_test_pairs", direction="none", unit="count", kind="info",
               description="held-out pairs with a contested token (real data: queries in the minimal-pair pools, "
               "summed over folds)"),
        Metric(name="contested_pools", direction="none", unit="count", kind="info",
               description="contested minimal-pair pools (real-data workloads)"),
        Metric(name="test_tokens_seen", direction="none", unit="fraction", kind="info",
               description="share of held-out tokens that training shows in their language (unseen rows stay random)"),
        Metric(name="gate_interference_spearman", direction="higher", unit="correlation", kind="info",
           description="Spearman of final openness vs interference score over the indexed pairs"),
        Metric(name="effective_vocabularies", direction="none", unit="count", kind="info",
           description="mean number of distinct rows per shared token across its languages (1 = one vocabulary)"),
        Metric(name="shared_drift", direction="none", unit="fraction", kind="info",
               description="||E_T - E_0|| / ||E_0|| over used shared rows"),
        Metric(name="split_rows", direction="none", unit="count", kind="info", description="size of the split index"),
        Metric(name="rows_in_use", direction="none", unit="count", kind="info",
               description="split rows whose effective row is more than merge_tolerance (relative) away from what the shared "
               "table alone would give: gated, ||g (R - E[w])|| > tol ||E[w]||; fused, from the token's consensus row"),
        Metric(name="extra_params", direction="lower", unit="count", kind="memory",
               description="parameters the arm's split rows and gates add"),
        Metric(name="extra_bytes", direction="lower", unit="bytes", kind="memory",
               description="bytes of the private rows (and gates, gated mode) beyond the shared table; the (language, token) "
               "lookup is left out: any indexed arm needs one, whatever its size",
               key=True),
        Metric(name="embed_throughput", direction="higher", unit="tokens/s", kind="speed",
           description="serving forward of this arm (gates folded into its rows: StaticEmbedder.merged) at "
           "throughput.vocab / throughput.tokens"),
        Metric(name="bag_throughput", direction="higher", unit="tokens/s", kind="speed",
               description="plain nn.EmbeddingBag mean on the same batch"),
        Metric(name="embed_cost_ratio", direction="lower", unit="ratio", kind="speed",
               description="time of this arm's serving forward / EmbeddingBag's, each its fastest call of "
               "those timed in turn (call by call, for throughput.min_time)", key=True),
        Metric(name="train_forward_throughput", direction="higher", unit="tokens/s", kind="speed",
               description="the differentiable pooled forward (no_grad) this arm trains with, same batch"),
        Metric(name="train_forward_cost_ratio", direction="lower", unit="ratio", kind="speed",
               description="time of the training forward / EmbeddingBag's"),
        Metric(name="train_loss", direction="lower", unit="nats", kind="info",
               description="contrastive loss at the last step"),
    )
    pareto_views = (
        ParetoView("extra_bytes", "contested_acc1@both", "contested acc@1 against the bytes an arm adds"),
        ParetoView("extra_bytes", "acc1@both", "acc@1 against the bytes an arm adds"),
    )
    detail_scatters = (
        DetailScatter("gate_vs_interference", "interference", "gate", "final gate vs interference score per split row",
                      "interference score (gradient conflict, measured on the control)", "final gate g"),
    )
    smoke_params = {
        "workload.n_concepts": 40, "workload.train_pairs": 300, "workload.test_pairs": 20, "steps": 6,
        "batch_size": 32, "dim": 8, "interference_steps": 2, "interference_batches": 3, "throughput.vocab": 300,
        "throughput.tokens": 64, "throughput.dim": 8, "throughput.min_time": 0.002, "index": "interference",
    }

    def run(self, params: TaskParams, ctx: TrialContext) -> Mapping[str, float]:
        assert isinstance(params, VocabParams)
        fits = [self._fit(params, corpus, fold, ctx) for fold, corpus in enumerate(build_folds(params, ctx))]
        metrics: dict[str, float] = training_budget(params.steps, params.batch_size)
        metrics.update(pooled_retrieval([fit.ranks for fit in fits]))
        for key in sorted(set().union(*(fit.metrics for fit in fits))):  # a fold's diagnostics, averaged
            values = [fit.metrics[key] for fit in fits if key in fit.metrics]
            metrics[key] = float(np.mean(values)) if key not in SUMMED else float(np.sum(values))
        if getattr(params.workload, "folds", None) is not None:
            metrics["folds"] = float(len(fits))
        ctx.logger.record("index", {"candidates": fits[0].candidates, "split_rows": int(metrics["split_rows"]),
                                    "contested_candidates": fits[0].contested_candidates})
        if fits[0].gates is not None:  # the scientific question: did gates follow interference?
            ctx.logger.record("gate_vs_interference", {
                "interference": [v for fit in fits for v in fit.gates[0]],
                "gate": [v for fit in fits for v in fit.gates[1]]})
        model, corpus, chosen = fits[0].model, fits[0].corpus, fits[0].chosen
        if params.throughput.measure:
            density = len(chosen) / (corpus.n_languages * corpus.vocab_size) if model.split is not None else None
            metrics.update(embedding_throughput(
                density, model.use_gate, corpus.n_languages, params.throughput.vocab, params.throughput.dim,
                params.throughput.tokens, sentence_length(params.workload), ctx.numpy_stream("throughput"), ctx.device,
                params.throughput.min_time))
        return {key: value for key, value in metrics.items() if np.isfinite(value)}

    def _fit(self, params: VocabParams, corpus: Corpus, fold: int, ctx: TrialContext) -> "FoldFit":
        """Index, train and score one fold (the only fold of a single held-out share)."""
        device = ctx.device
        candidates = candidate_pairs(corpus.usage())
        truth = corpus.contested[candidates.language, candidates.token] if corpus.contested is not None else None
        config = TrainConfig(params.steps, params.batch_size, params.lr, params.scale,
                             params.l1_weight, params.fusion_weight)
        warmup = TrainConfig(params.interference_steps, params.batch_size, params.lr, params.scale)
        scores = ctx.cached(
            "interference", {**interference_identity(params), "fold": fold},
            build=lambda: {"score": torch.from_numpy(measure_interference(
                corpus, candidates, params.dim, warmup, params.interference_batches, ctx, params.log_every))},
            restore=lambda payload: payload["score"].cpu().numpy(),
        )
        counts = corpus.counts()[candidates.language, candidates.token]
        sharing = corpus.usage().sum(0)[candidates.token]
        unaligned = misalignment(corpus.train, corpus.usage(), candidates)
        chosen = choose_index(params, candidates, scores, truth, counts, sharing, unaligned,
                              ctx.numpy_stream("random-index"))
        chosen_scores = scores_of(chosen, candidates, scores)
        table = initial_table(corpus.vocab_size, params.dim, ctx.stream("initial-table"), device)
        model = StaticEmbedder(table, PAD, split=self._split(params, corpus, chosen, chosen_scores, ctx),
                               use_gate=params.mode == "gated").to(device)
        stream = batches(corpus.train, params.batch_size, ctx.numpy_stream("batches"), device)
        name = "train" if fold == 0 else f"train_fold{fold}"
        metrics = {"train_loss": train(model, stream, config, ctx, name=name, log_every=params.log_every)}
        metrics.update(diagnose(model, params, corpus, candidates, scores, truth, chosen, table))
        metrics.update(cue_strength(truth, counts, sharing, unaligned))
        metrics.update(held_out_coverage(corpus))
        gates = None
        if model.split is not None and model.use_gate:
            gates = (chosen_scores.tolist(), model.split.gate().detach().cpu().tolist())
        return FoldFit(metrics, retrieval_ranks_of(model, corpus, device), model, corpus, chosen, gates,
                       len(candidates), int(truth.sum()) if truth is not None else None)

    @staticmethod
    def _split(params: VocabParams, corpus: Corpus, chosen: CandidatePairs, chosen_scores: np.ndarray,
               ctx: TrialContext) -> SplitVocabulary | None:
        if params.index == "none":
            return None
        path = ctx.work_dir / "split_index.npz"
        save_index(path, chosen.language, chosen.token, interference_score=chosen_scores)
        return SplitVocabulary(path, corpus.vocab_size, params.dim, corpus.n_languages,
                               gate_init=params.gate_init).to(ctx.device)


def scores_of(chosen: CandidatePairs, candidates: CandidatePairs, scores: np.ndarray) -> np.ndarray:
    """Interference score of each chosen (language, token) pair, in the index's row order."""
    position = {(int(l), int(t)): i for i, (l, t) in enumerate(zip(candidates.language, candidates.token))}
    return np.array([scores[position[(int(l), int(t))]] for l, t in zip(chosen.language, chosen.token)])


def build_folds(params: VocabParams, ctx: TrialContext) -> list[Corpus]:
    """The corpora a trial trains on, built once per seed and workload (every arm trains on the same data)."""
    return ctx.cached("corpus", workload_identity(params),
                      build=lambda: {"folds": [corpus_payload(corpus) for corpus in generate_folds(params, ctx)]},
                      restore=lambda payload: [corpus_from_payload(fold) for fold in payload["folds"]])


def generate_folds(params: VocabParams, ctx: TrialContext) -> list[Corpus]:
    """One corpus, or the real-data workloads' folds (each contested item held out in one)."""
    workload = params.workload
    if isinstance(workload, CldrWorkload):
        rng = ctx.numpy_stream("cldr-split")
        if workload.folds is None:
            return [cldr_corpus(workload.locales, workload.categories, workload.test_fraction, rng)]
        return cldr_folds(workload.locales, workload.categories, workload.test_fraction, workload.folds, rng)
    if isinstance(workload, GettextWorkload):
        rng = ctx.numpy_stream("gettext-split")
        if workload.folds is None:
            return [gettext_corpus(workload.locales, workload.test_fraction, rng)]
        return gettext_folds(workload.locales, workload.test_fraction, workload.folds, rng)
    spec = SyntheticSpec(workload.n_languages, workload.n_concepts, workload.cognate_rate, workload.false_friend_rate,
                         workload.false_friend_boost, workload.frequency_spread, workload.min_length,
                         workload.max_length, workload.train_pairs, workload.test_pairs, workload.twin_fraction,
                         workload.partial_false_friend_rate, workload.synonym_rate, workload.alignment_noise)
    return [synthetic_corpus(spec, ctx.numpy_stream)]


def workload_identity(params: VocabParams) -> dict[str, object]:
    """Everything besides the seed the data depend on: the workload's params and kind."""
    return {**params.workload.model_dump(exclude={"kind"}), "workload": params.workload.kind}


def interference_identity(params: VocabParams) -> dict[str, object]:
    """Everything besides the seed the interference scores depend on (and nothing arm-specific)."""
    identity = workload_identity(params)
    identity.update({name: getattr(params, name) for name in ("dim", "batch_size", "lr", "scale",
                                                              "interference_steps", "interference_batches")})
    return identity


def index_size(params: VocabParams, candidates: CandidatePairs) -> int:
    """k: the budget every sized index spends (``index_size``, else ``index_fraction`` of the candidates)."""
    if params.index_size is not None:
        if params.index_size > len(candidates):
            raise ValueError(f"index_size {params.index_size} exceeds this seed's {len(candidates)} candidate pairs")
        return params.index_size
    return min(max(int(round(params.index_fraction * len(candidates))), 1), len(candidates))


def ranked_with_ties_by(primary: np.ndarray, tie_break: np.ndarray) -> np.ndarray:
    """A key ordering by ``primary``, then by the non-negative integer ``tie_break`` (then by position)."""
    return rankdata(primary, method="dense") * (float(tie_break.max(initial=0)) + 1.0) + tie_break


def choose_index(params: VocabParams, candidates: CandidatePairs, scores: np.ndarray, truth: np.ndarray | None,
                 counts: np.ndarray, sharing: np.ndarray, unaligned: np.ndarray,
                 rng: np.random.Generator) -> CandidatePairs:
    """The arm's split pairs. Every sized index has exactly k pairs (``index_size``):

    - interference: the k highest conflict scores (measured on the control);
    - random: k candidates drawn by ``rng`` (capacity control);
    - frequency: the k candidates with most occurrences in training (``counts``; the budget spent
      where the data is, with no notion of conflict);
    - language_count: the k candidates whose token the most languages use in training (``sharing``),
      ties broken by ``counts`` (a trivial index: a widely shared form looks like a place to split);
    - alignment: the k candidates most rarely translated by their own token (``unaligned``, from
      ``alignment.misalignment``), ties broken by ``counts`` (a trivial index read off the bitext);
    - oracle: the true contested candidates, most frequent first, cut at k, and topped up with the
      most frequent other candidates when fewer than k are contested (an upper bound at the budget).
    """
    if params.index == "none":
        return CandidatePairs(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if params.index == "all":
        return candidates
    size = index_size(params, candidates)
    if params.index == "interference":
        return top_pairs(candidates, scores, size)
    if params.index == "random":
        pick = np.sort(rng.choice(len(candidates), size=size, replace=False))
        return CandidatePairs(candidates.language[pick], candidates.token[pick])
    if params.index == "frequency":
        return top_pairs(candidates, counts.astype(np.float64), size)
    if params.index == "language_count":
        return top_pairs(candidates, ranked_with_ties_by(sharing, counts), size)
    if params.index == "alignment":
        return top_pairs(candidates, ranked_with_ties_by(unaligned, counts), size)
    if truth is None:
        raise ValueError(f"the oracle index needs a workload with a known contested set, not {params.workload.kind}")
    # Contested first (a key above any count), then by count; ties by position (stable).
    return top_pairs(candidates, counts.astype(np.float64) + truth * (float(counts.max(initial=0)) + 1.0), size)


def cue_strength(truth: np.ndarray | None, counts: np.ndarray, sharing: np.ndarray,
                 unaligned: np.ndarray) -> dict[str, float]:
    """How well each trivial index's key alone ranks the contested candidates (0.5: no cue)."""
    if truth is None:
        return {}
    return {"frequency_auroc": auroc(counts, truth), "language_count_auroc": auroc(sharing, truth),
            "alignment_auroc": auroc(unaligned, truth)}


def held_out_coverage(corpus: Corpus) -> dict[str, float]:
    """Size of the held-out set, its contested part, and the share of its tokens that training shows
    in their language: a token never seen keeps its random row in every arm, out of any index's reach."""
    test, seen = corpus.test, corpus.usage()
    tokens = np.concatenate([test.source.reshape(-1), test.target.reshape(-1)])
    languages = np.concatenate([np.repeat(test.source_language, test.source.shape[1]),
                                np.repeat(test.target_language, test.target.shape[1])])
    real = tokens != PAD
    metrics = {"test_pairs": float(len(test)), "test_tokens_seen": float(seen[languages[real], tokens[real]].mean())}
    if corpus.minimal_pairs is not None:
        metrics["contested_test_pairs"] = float(len(corpus.minimal_pairs))
        metrics["contested_pools"] = float(np.unique(corpus.minimal_pairs.pairs.group).size)
        return metrics
    contested = corpus.contested_pairs_mask(test)
    if contested is not None:
        metrics["contested_test_pairs"] = float(contested.sum())
    return metrics


# Ranks of one fold's queries: the prefix ("" all held-out pairs, "contested_" the contested queries)
# to (forward ranks, backward ranks, which of them are scored).
FoldRanks = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def retrieval_ranks_of(model: StaticEmbedder, corpus: Corpus, device: torch.device) -> FoldRanks:
    test = corpus.test
    forward, backward = retrieval_ranks(encode(model, test.source, test.source_language, device),
                                        encode(model, test.target, test.target_language, device), test.group)
    ranks = {"": (forward, backward, np.ones(len(test), dtype=bool))}
    if corpus.minimal_pairs is not None:
        pools = corpus.minimal_pairs.pairs
        ranks["contested_"] = (*retrieval_ranks(encode(model, pools.source, pools.source_language, device),
                                                encode(model, pools.target, pools.target_language, device),
                                                pools.group), corpus.minimal_pairs.scored)
        return ranks
    contested = corpus.contested_pairs_mask(test)
    if contested is not None:
        ranks["contested_"] = (forward, backward, contested)
    return ranks


def pooled_retrieval(folds: list[FoldRanks]) -> dict[str, float]:
    """Retrieval metrics over every fold's queries at once: each query counts once, whatever its fold."""
    metrics: dict[str, float] = {}
    for prefix in folds[0]:
        forward, backward, selected = (np.concatenate(parts) for parts in zip(*(fold[prefix] for fold in folds)))
        metrics.update(retrieval_metrics(forward, backward, selected, prefix=prefix))
    return metrics


def diagnose(model: StaticEmbedder, params: VocabParams, corpus: Corpus, candidates: CandidatePairs,
             scores: np.ndarray, truth: np.ndarray | None, chosen: CandidatePairs,
             table: torch.Tensor) -> dict[str, float]:
    """Mechanism diagnostics read off the trained model."""
    metrics = {
        "split_rows": float(len(chosen)),
        "effective_vocabularies": effective_vocabularies(model, candidates, params.merge_tolerance),
        "shared_drift": relative_drift(table, model.table.detach(), np.flatnonzero(corpus.usage().any(0))),
        "extra_params": 0.0,
        "extra_bytes": 0.0,
        "rows_in_use": 0.0,
    }
    if truth is not None:
        metrics["interference_auroc"] = auroc(scores, truth)
    if model.split is None:
        return metrics
    split = model.split
    added = {"rows": split.rows, **({"gate_logit": split.gate_logit} if model.use_gate else {})}
    metrics["extra_params"] = float(sum(p.numel() for p in added.values()))
    metrics["extra_bytes"] = float(tensor_bytes(added))
    metrics["rows_in_use"] = float(rows_in_use(model, params.merge_tolerance))
    open_score = openness(model, candidates)
    if truth is not None:
        metrics["gate_auroc"] = auroc(open_score, truth)
        metrics["gate_auprc"] = auprc(open_score, truth)
    device = split.lookup.device
    rows = split.lookup[torch.from_numpy(candidates.language).to(device), torch.from_numpy(candidates.token).to(device)]
    indexed = rows.cpu().numpy() >= 0
    metrics["gate_interference_spearman"] = spearman(open_score[indexed], scores[indexed])
    return metrics
