"""The workloads behind one interface: byte-level pydoc text, plain or with a pass key to retrieve, and
multi-query associative recall."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from harness.tasks.er2.data import (
    RecallLayout,
    document_windows,
    guess_from_context_recall,
    load_pydoc_corpus,
    plant_passkeys,
    recall_batch,
    recall_mixture_batch,
    sample_windows,
)
from harness.tasks.er2.distill import Capture
from harness.tasks.er2.teacher import Batches, Mixer, TeacherLM, next_token_nll



@dataclass
class SwapComparison:
    """Per-document scores of the teacher and of the LM with the probe layer swapped."""

    documents: list[str]
    teacher_nll: list[float]
    layer_nll: list[float]
    teacher_recall: list[float] = field(default_factory=list)
    layer_recall: list[float] = field(default_factory=list)
    guess_recall: list[float] = field(default_factory=list)  # guess a value shown in the context

    def per_document(self) -> dict[str, list]:
        table = {"document": self.documents, "teacher_nll": self.teacher_nll, "layer_nll": self.layer_nll}
        if self.layer_recall:
            table.update(teacher_recall=self.teacher_recall, layer_recall=self.layer_recall, guess_recall=self.guess_recall)
        return table

    def teacher_scores(self) -> dict[str, tuple[list[float], list[float]]]:
        """The teacher's per-document (NLL, recall), to reuse on the same sequences without running it again."""
        return {"teacher": (self.teacher_nll, self.teacher_recall)}

    def summary(self) -> dict[str, float]:
        n = len(self.documents)
        result = {
            "nll": sum(self.layer_nll) / n,
            "teacher_nll": sum(self.teacher_nll) / n,
            "nll_delta": sum(a - b for a, b in zip(self.layer_nll, self.teacher_nll)) / n,
        }
        if self.layer_recall:
            result.update(
                recall=sum(self.layer_recall) / n,
                teacher_recall=sum(self.teacher_recall) / n,
                guess_recall=sum(self.guess_recall) / n,
            )
        return result


class Workload(Protocol):
    vocab_size: int
    data_id: str

    def training_batch(self, batch: int, length: int, generator: torch.Generator) -> tuple[Tensor, Tensor | None]: ...

    def held_out_batch(self, batch: int, length: int, generator: torch.Generator) -> Tensor: ...

    def teacher_data(self, batch: int, length: int) -> tuple[Batches, str]:
        """What the teacher trains on, and its cache identity."""

    def swapped_comparison(
        self, teacher: TeacherLM, mixer: Mixer, context: int, documents: int, device: torch.device,
        generator: torch.Generator, reference: SwapComparison | None = None,
    ) -> SwapComparison:
        """Teacher and swapped LM on ``documents`` evaluation sequences of ``context`` tokens; the teacher's
        scores are taken from ``reference`` (an earlier comparison on the same sequences) when given."""


@torch.no_grad()
def capture(teacher: TeacherLM, tokens: Tensor) -> Capture:
    """The probe layer's post-RoPE q/k/v and exact attention output for these tokens."""
    captured: Capture = {}
    teacher(tokens, capture=captured)
    return captured


@torch.no_grad()
def answer_recall(teacher: TeacherLM, tokens: Tensor, answers: Tensor, mixer: Mixer | None) -> list[float]:
    """Per sequence: the fraction of answers (positions whose next token is asked) the LM's top
    prediction gets right, teacher-forced. Only the answers are projected onto the vocabulary (a few
    positions among hundreds: the full logits would cost more than the model)."""
    asked = answers[:, :-1]
    logits = teacher.hidden(tokens[:, :-1], mixer)[asked] @ teacher.embed.weight.T
    right = (logits.argmax(-1) == tokens[:, 1:][asked]).float()
    return (right.new_zeros(tokens.shape[0]).index_add(0, asked.nonzero()[:, 0], right) / asked.sum(1).clamp_min(1)).tolist()


class TextWorkload:
    """Byte-level English; held-out topics are the documents NLL is paired over."""

    vocab_size = 256

    def __init__(self) -> None:
        self.corpus = load_pydoc_corpus()
        self.data_id = f"pydoc-topics-{self.corpus.checksum}"
        self.held_out_stream = torch.cat(list(self.corpus.held_out.values()))

    def training_batch(self, batch: int, length: int, generator: torch.Generator) -> tuple[Tensor, None]:
        return sample_windows(self.corpus.train, batch, length, generator), None

    def held_out_batch(self, batch: int, length: int, generator: torch.Generator) -> Tensor:
        return sample_windows(self.held_out_stream, batch, length, generator)

    def teacher_data(self, batch: int, length: int) -> tuple[Batches, str]:
        """The teacher trains on the data the arms distil on."""
        return (lambda generator: self.training_batch(batch, length, generator)), self.data_id

    @torch.no_grad()
    def swapped_comparison(
        self, teacher: TeacherLM, mixer: Mixer, context: int, documents: int, device: torch.device,
        generator: torch.Generator, reference: SwapComparison | None = None,
    ) -> SwapComparison:
        """The held-out topics themselves (``generator`` is unused: documents are fixed)."""
        names, tokens = document_windows(self.corpus.held_out, context + 1, documents)
        tokens = tokens.to(device)
        return SwapComparison(
            documents=names,
            teacher_nll=next_token_nll(teacher, tokens).tolist() if reference is None else reference.teacher_nll,
            layer_nll=next_token_nll(teacher, tokens, mixer).tolist(),
        )


class RecallWorkload:
    """Key-value bindings then queries: answering needs the binding from far back (loss on answers only)."""

    def __init__(self, pairs: int, keys: int, teacher_pairs: tuple[int, int] | None = None) -> None:
        self.layout = RecallLayout(num_keys=keys, num_values=keys)
        self.pairs = pairs
        self.teacher_pairs = teacher_pairs
        self.vocab_size = self.layout.vocab_size
        self.data_id = f"mqar-v2-{self.layout.num_keys}-{self.layout.num_values}-{pairs}"

    def training_batch(self, batch: int, length: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        return recall_batch(self.layout, batch, length, self.pairs, generator)

    def teacher_data(self, batch: int, length: int) -> tuple[Batches, str]:
        """The mixture of loads where declared, named by the mixture rather than the point's bindings so
        that every point of a sweep shares the teacher; else the arms' own sequences."""
        if self.teacher_pairs is None:
            return (lambda generator: self.training_batch(batch, length, generator)), self.data_id
        low, high = self.teacher_pairs
        return ((lambda generator: recall_mixture_batch(self.layout, batch, length, self.teacher_pairs, generator)),
                f"mqar-mix-v1-{self.layout.num_keys}-{self.layout.num_values}-{low}-{high}")

    def held_out_batch(self, batch: int, length: int, generator: torch.Generator) -> Tensor:
        return recall_batch(self.layout, batch, length, self.pairs, generator)[0]

    @torch.no_grad()
    def swapped_comparison(
        self, teacher: TeacherLM, mixer: Mixer, context: int, documents: int, device: torch.device,
        generator: torch.Generator, reference: SwapComparison | None = None,
    ) -> SwapComparison:
        """Fresh sequences from ``generator``, the same for every arm of a seed."""
        tokens, answers = recall_batch(self.layout, documents, context, self.pairs, generator)
        return self.scored(teacher, mixer, tokens.to(device), answers.to(device), reference)

    @torch.no_grad()
    def scored(self, teacher: TeacherLM, mixer: Mixer, tokens: Tensor, answers: Tensor,
               reference: SwapComparison | None = None) -> SwapComparison:
        """Teacher and swapped LM on these sequences: NLL and recall on the answers, and guessing."""
        documents = tokens.shape[0]
        scores = {}
        for label, swap in (("teacher", None), ("layer", mixer)):
            if label == "layer" or reference is None:
                scores[label] = (next_token_nll(teacher, tokens, swap, answers).tolist(),
                                 answer_recall(teacher, tokens, answers, swap))
        scores.update(reference.teacher_scores() if reference is not None else {})
        return SwapComparison(
            documents=[f"sequence-{i}" for i in range(documents)],
            teacher_nll=scores["teacher"][0], layer_nll=scores["layer"][0],
            teacher_recall=scores["teacher"][1], layer_recall=scores["layer"][1],
            guess_recall=guess_from_context_recall(self.layout, tokens[:, :-1].cpu(), answers[:, :-1].cpu()).tolist(),
        )


class PasskeyWorkload(TextWorkload):
    """pydoc text windows with a pass key planted anywhere in them and asked at their end: the digits are
    random, so predicting them needs attention that reaches back past any short window (a non-local
    probe layer). Scored on the whole window's NLL and on the asked digits (recall, teacher-forced)."""

    digit_chance = 0.1  # guessing a digit uniformly

    def __init__(self, answer_weight: float, short_context: int) -> None:
        super().__init__()
        self.answer_weight = answer_weight
        self.short_context = short_context
        self.data_id = f"pydoc-passkey-v1-{self.corpus.checksum}-weight{answer_weight:g}-short{short_context}"

    def teacher_data(self, batch: int, length: int) -> tuple[Batches, str]:
        """Every other teacher step on windows of ``short_context`` tokens (as many tokens in all): a repeat
        among few positions teaches the retrieval circuit in a few hundred steps, where long windows alone
        left it at chance after 600 (pilot); the long steps keep the LM and its retrieval sound at length."""
        shapes = itertools.cycle([(max(1, batch * length // self.short_context), self.short_context), (batch, length)])
        return (lambda generator: self.training_batch(*next(shapes), generator)), self.data_id

    def training_batch(self, batch: int, length: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Tokens and per-position loss weights: 1 on text, ``answer_weight`` where the next token is an
        asked digit (five of a window's hundreds of positions would otherwise barely train retrieval)."""
        windows = sample_windows(self.corpus.train, batch, length, generator)
        tokens, answers = plant_passkeys(windows, generator, asked_at_end=False)
        return tokens, 1.0 + (self.answer_weight - 1.0) * answers.float()

    def held_out_batch(self, batch: int, length: int, generator: torch.Generator) -> Tensor:
        return plant_passkeys(sample_windows(self.held_out_stream, batch, length, generator), generator)[0]

    @torch.no_grad()
    def swapped_comparison(
        self, teacher: TeacherLM, mixer: Mixer, context: int, documents: int, device: torch.device,
        generator: torch.Generator, reference: SwapComparison | None = None,
    ) -> SwapComparison:
        """Held-out windows with fresh pass keys from ``generator``, the same for every arm of a seed."""
        windows = sample_windows(self.held_out_stream, documents, context + 1, generator)
        tokens, answers = (t.to(device) for t in plant_passkeys(windows, generator))
        scores = {label: (next_token_nll(teacher, tokens, swap).tolist(), answer_recall(teacher, tokens, answers, swap))
                  for label, swap in (("teacher", None), ("layer", mixer)) if label == "layer" or reference is None}
        scores.update(reference.teacher_scores() if reference is not None else {})
        return SwapComparison(
            documents=[f"window-{i}" for i in range(documents)],
            teacher_nll=scores["teacher"][0], layer_nll=scores["layer"][0],
            teacher_recall=scores["teacher"][1], layer_recall=scores["layer"][1],
            guess_recall=[self.digit_chance] * documents,
        )
