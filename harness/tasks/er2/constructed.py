"""A constructed MQAR teacher: one softmax attention head set by hand to recall exactly at any load.

Distillation needs only the probe layer's q/k/v and output, so the teacher need not be trained (no
CPU-sized training recipe learned MQAR over more than 16 keys). Every key and value token has a
random unit code in the head dimension. At a binding's value position (the value token right after
a key's first occurrence) k is the key's code and v the value's code; at a query (a key seen before)
q is the key's code times the temperature; everywhere else q, k and v are zero: null keys match
nothing, so no position matches itself and filler only dilutes the weights. The readout is the
argmax over the value codebook (a tied embedding whose rows are the value codes; every other token's
row sits far below, so only values are ever answered).

Exact recall at ``bindings`` follows from the temperature and the codebooks' largest cross-
similarities ``c_k`` (keys) and ``c_v`` (values): the output is ``w* v* + sum_j w_j v_j``, and
``v* . o > v_i . o`` for every other value code ``i`` holds when ``w* (1 - c_v) > 2 sum_j w_j``. With
``w_j / w* <= exp(-t (1 - c_k))`` over the other ``bindings - 1`` keys (null keys scale every weight
alike and cancel), the temperature ``t`` must exceed ``ln(2 (bindings - 1) / (1 - c_v)) / (1 - c_k)``.
The codebooks come from a fixed generator, so the bound is checked before a run, for every seed.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import torch
from torch import Tensor, nn

from harness.tasks.er2.mechanism.ops.attention import softmax_reference
from harness.tasks.er2.data import RecallLayout, recall_batch, recall_mixture_batch
from harness.tasks.er2.teacher import Mixer, TeacherConfig
from harness.tasks.er2.workloads import RecallWorkload, SwapComparison

CODEBOOK_SEED = 20261202  # the codebooks are fixed: the exact-recall bound is checked before any seed runs
OTHER_TOKEN_LOGIT = -1.0e9  # keys and filler are never answers


@functools.lru_cache(maxsize=8)
def codebooks(keys: int, values: int, dim: int) -> tuple[Tensor, Tensor]:
    """Random unit codes [keys, dim] and [values, dim], the same for every seed."""
    generator = torch.Generator().manual_seed(CODEBOOK_SEED)
    key_codes = nn.functional.normalize(torch.randn(keys, dim, generator=generator), dim=-1)
    value_codes = nn.functional.normalize(torch.randn(values, dim, generator=generator), dim=-1)
    return key_codes, value_codes


def largest_cross_similarity(codes: Tensor) -> float:
    """max_{a != b} codes[a] . codes[b] (-1 with a single code: nothing to confuse it with)."""
    if codes.shape[0] < 2:
        return -1.0
    gram = codes @ codes.T
    gram.fill_diagonal_(-math.inf)
    return float(gram.max())


def exact_recall_temperature(bindings: int, key_similarity: float, value_similarity: float) -> float:
    """The temperature above which the constructed head recalls every query exactly (module docstring)."""
    if bindings < 2:
        return 0.0
    return math.log(2 * (bindings - 1) / (1 - value_similarity)) / (1 - key_similarity)


def temperature_problem(temperature: float, bindings: int, keys: int, dim: int) -> str | None:
    """Why ``temperature`` does not guarantee exact recall at ``bindings``, or None when it does."""
    key_codes, value_codes = codebooks(keys, keys, dim)
    key_similarity, value_similarity = largest_cross_similarity(key_codes), largest_cross_similarity(value_codes)
    if max(key_similarity, value_similarity) >= 1.0 - 1e-6:
        return f"two of the {keys} codes in {dim} dims coincide: no temperature recalls exactly; raise code_dim"
    needed = exact_recall_temperature(bindings, key_similarity, value_similarity)
    if temperature <= needed:
        return (f"constructed_temperature {temperature:g} is too low for exact recall at {bindings} bindings: it must "
                f"exceed {needed:.2f} (codes' largest cross-similarity: keys {key_similarity:.3f}, values "
                f"{value_similarity:.3f}, in {dim} dims)")
    return None


class ConstructedTeacher(nn.Module):
    """The hand-set probe head behind the interface of ``TeacherLM`` (config, hidden, forward, embed)."""

    def __init__(self, layout: RecallLayout, dim: int, temperature: float):
        super().__init__()
        self.layout = layout
        self.temperature = float(temperature)
        self.config = TeacherConfig(vocab_size=layout.vocab_size, model_dim=dim, num_layers=1, num_heads=1,
                                    num_kv_heads=1, probe_layer=0)
        key_codes, value_codes = codebooks(layout.num_keys, layout.num_values, dim)
        self.register_buffer("key_codes", key_codes.clone())
        self.register_buffer("value_codes", value_codes.clone())
        # Readout rows over [output, 1]: values score t * (code . output), every other token far below.
        readout = torch.zeros(layout.vocab_size, dim + 1)
        readout[layout.num_keys : layout.filler, :dim] = self.temperature * value_codes
        readout[: layout.num_keys, dim] = OTHER_TOKEN_LOGIT
        readout[layout.filler, dim] = OTHER_TOKEN_LOGIT
        self.embed = nn.Embedding.from_pretrained(readout, freeze=True)

    def probe(self, tokens: Tensor) -> dict[str, Tensor]:
        """q, k, v [B,1,T,D] and the answer mask [B,T] (queries: keys seen before) of these tokens."""
        batch, steps = tokens.shape
        layout, device = self.layout, tokens.device
        is_key = tokens < layout.num_keys
        is_value = (tokens >= layout.num_keys) & (tokens < layout.filler)
        key_ids = torch.where(is_key, tokens, 0)
        positions = torch.arange(steps, device=device).expand(batch, steps)
        first = torch.full((batch, layout.num_keys), steps, device=device, dtype=torch.long)
        first = first.scatter_reduce(1, key_ids, torch.where(is_key, positions, steps), reduce="amin")
        first_seen = first.gather(1, key_ids)
        queries = is_key & (first_seen < positions)
        bound_key = torch.zeros_like(is_key)
        bound_key[:, 1:] = is_key[:, :-1] & ~queries[:, :-1]  # the previous token is a key's first occurrence
        binds = is_value & bound_key
        previous = torch.cat([key_ids[:, :1], key_ids[:, :-1]], dim=1)
        value_ids = torch.where(is_value, tokens - layout.num_keys, 0)
        dim = self.config.head_dim
        scale = self.temperature * math.sqrt(dim)  # attention divides scores by sqrt(dim)
        q = torch.where(queries[..., None], scale * self.key_codes[key_ids], 0.0)
        k = torch.where(binds[..., None], self.key_codes[previous], 0.0)
        v = torch.where(binds[..., None], self.value_codes[value_ids], 0.0)
        return {"q": q[:, None], "k": k[:, None], "v": v[:, None], "answers": queries}

    def hidden(self, tokens: Tensor, mixer: Mixer | None = None, capture: dict[str, Tensor] | None = None) -> Tensor:
        """[output, 1] per position [B,T,D+1], the readout's input (the LM's final hidden states)."""
        probe = self.probe(tokens)
        q, k, v = probe["q"], probe["k"], probe["v"]
        out = softmax_reference(q, k, v, 1) if mixer is None else mixer(q, k, v)
        if capture is not None:
            capture.update(q=q, k=k, v=v, out=out, answers=probe["answers"])
        output = out[:, 0].float()
        return torch.cat([output, output.new_ones(output.shape[:-1] + (1,))], dim=-1)

    def forward(self, tokens: Tensor, mixer: Mixer | None = None, capture: dict[str, Tensor] | None = None) -> Tensor:
        """Logits [B,T,V]: the argmax over the value codebook is the answer."""
        return self.hidden(tokens, mixer, capture) @ self.embed.weight.T


class ConstructedRecallWorkload(RecallWorkload):
    """MQAR for the constructed teacher: sequences draw their bindings log-uniformly from the lightest to
    the heaviest load (the arms distil on the mixture, as in Zoology), and recall is also scored per load."""

    def __init__(self, loads: Sequence[int], keys: int) -> None:
        super().__init__(max(loads), keys)
        self.loads = tuple(sorted(set(loads)))
        self.data_id = f"mqar-constructed-v1-{keys}-{self.loads[0]}-{self.loads[-1]}"

    def training_batch(self, batch: int, length: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        return recall_mixture_batch(self.layout, batch, length, (self.loads[0], self.loads[-1]), generator)

    def held_out_batch(self, batch: int, length: int, generator: torch.Generator) -> Tensor:
        return self.training_batch(batch, length, generator)[0]

    def teacher_data(self, batch: int, length: int):
        raise RuntimeError("the constructed teacher is set by hand: it has no training data")

    @torch.no_grad()
    def swapped_comparison(self, teacher, mixer: Mixer | None, context: int, documents: int, device: torch.device,
                           generator: torch.Generator, reference: SwapComparison | None = None) -> SwapComparison:
        """Fresh sequences of the mixture, the same for every arm of a seed."""
        tokens, answers = self.training_batch(documents, context, generator)
        return self.scored(teacher, mixer, tokens.to(device), answers.to(device), reference)

    @torch.no_grad()
    def load_comparisons(self, teacher, mixer: Mixer | None, context: int, documents: int, device: torch.device,
                         generator: torch.Generator) -> dict[int, SwapComparison]:
        """Per load: ``documents`` fresh sequences with that many bindings, the same for every arm."""
        comparisons = {}
        for load in self.loads:
            tokens, answers = recall_batch(self.layout, documents, context, load, generator)
            comparisons[load] = self.scored(teacher, mixer, tokens.to(device), answers.to(device))
        return comparisons


def load_metrics(workload: ConstructedRecallWorkload, teacher: ConstructedTeacher, mixer: Mixer | None, guess: bool,
                 context: int, documents: int, device: torch.device, generator: torch.Generator) -> dict[str, float]:
    """Recall per load (the arm's; the guess arm's is guessing), the teacher's, and how much of its
    recall the arm loses from the lightest load to the heaviest (relative)."""
    metrics: dict[str, float] = {}
    for load, comparison in workload.load_comparisons(teacher, mixer, context, documents, device, generator).items():
        summary = comparison.summary()
        metrics[f"load_recall@{load}"] = summary["guess_recall" if guess else "recall"]
        metrics[f"load_teacher_recall@{load}"] = summary["teacher_recall"]
        metrics[f"load_guess_recall@{load}"] = summary["guess_recall"]
    lightest, heaviest = metrics[f"load_recall@{workload.loads[0]}"], metrics[f"load_recall@{workload.loads[-1]}"]
    metrics["load_recall_min"] = min(metrics[f"load_recall@{load}"] for load in workload.loads)
    metrics["load_recall_drop"] = (lightest - heaviest) / lightest if lightest > 0 else 0.0
    return metrics
