"""The er2 task end to end at toy size, through the spine's run_single."""
from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
import torch
from torch import Tensor

from harness.execution.executor import run_single
from harness.tasks import load_task
from harness.tasks.base import metric_family
from harness.tasks.er2.data import (
    RecallLayout,
    guess_from_context_recall,
    load_pydoc_corpus,
    recall_batch,
    recall_mixture_batch,
)
from harness.tasks.er2.teacher import TeacherConfig, TeacherLM, next_token_nll
from harness.tasks.er2.workloads import RecallWorkload
from harness.tasks.er2.task import ER2Task

TINY = {
    "train_context": 32, "eval_multiples": [1, 2], "steps": 3, "batch": 2, "train_pool": 4, "eval_batch": 2,
    "eval_documents": 3, "teacher.steps": 3, "teacher.model_dim": 16, "teacher.num_heads": 2,
    "teacher.num_kv_heads": 1, "feature_dim": 8, "residual_dim": 4, "code_rank": 2, "speed.measure": False,
}
QUALITY = ("nmse", "cosine", "hard_teacher_nmse", "nll", "nll_delta", "recall")


def _quality(record: dict) -> dict[str, float]:
    return {k: v for k, v in record.metrics.items() if metric_family(k) in QUALITY}


def test_registered_and_params_validated():
    assert load_task("er2") is ER2Task
    with pytest.raises(pydantic.ValidationError, match="'none', 'raw' or 'compressed'"):
        ER2Task.validate_params({"residual_mode": "lowrank"})
    with pytest.raises(pydantic.ValidationError, match="fp16"):
        ER2Task.validate_params({"state_dtype": "bf16"})
    with pytest.raises(pydantic.ValidationError):
        ER2Task.validate_params({"unknown_knob": 1})


@pytest.mark.integration  # the real task end to end
def test_text_workload_end_to_end_and_rerun_identical(tmp_path: Path):
    params = {**TINY, "residual_mode": "compressed", "speed.measure": True, "speed.min_time": 0.001, "speed.contexts": [32, 64]}
    first = run_single(ER2Task, params, seed=0, work_root=tmp_path)
    assert first.status == "finished", first.error
    metrics = first.metrics
    declared = ER2Task.metric_specs()
    assert all(metric_family(key) in declared for key in metrics)
    for family in ("nmse", "cosine", "nll", "nll_delta", "kv_cache_bytes", "prefill_tokens_per_s",
                   "sdpa_decode_latency_s", "decode_speedup", "state_to_kv_ratio", "zero_layer_nll_cost"):
        assert {f"{family}@32", f"{family}@64"} <= metrics.keys()
    assert {"decode_latency_s", "decode_crossover_context", "prefill_crossover_context"} <= metrics.keys()
    assert metrics["hard_teacher_nmse"] > 0 and metrics["train_tokens_per_s"] > 0
    # probe layer of the tiny teacher: Hkv=1, D=8; the state measured from tensors equals the formula
    from harness.tasks.er2.mechanism.er2 import ER2Layer

    layer = ER2Layer(2, 1, 8, feature_dim=8, residual_dim=4, code_rank=2)
    assert metrics["state_bytes"] == layer.recurrent_state_bytes(1)
    assert metrics["kv_cache_bytes@64"] == 2 * 64 * 1 * 8 * 2
    assert metrics["break_even_context"] * 32 >= metrics["state_bytes"] > (metrics["break_even_context"] - 1) * 32
    details = first.details
    assert details["cache"]["teacher"]["loaded"] is False and first.environment["device_name"]
    assert details["fit"]["distil"]["final"]["loss"] == metrics["final_train_loss"]
    assert len(first.curves["distil/loss"]) == TINY["steps"] and len(first.curves["teacher/loss"]) == 3
    per_doc = details["per_document@32"]
    assert len(per_doc["document"]) == len(per_doc["layer_nll"]) == len(per_doc["teacher_nll"]) > 0
    assert metrics["nll_delta@32"] == pytest.approx(
        sum(a - b for a, b in zip(per_doc["layer_nll"], per_doc["teacher_nll"])) / len(per_doc["document"])
    )

    second = run_single(ER2Task, params, seed=0, work_root=tmp_path)  # teacher now comes from the cache
    assert second.details["cache"]["teacher"] == dict(details["cache"]["teacher"], loaded=True)
    assert "teacher/loss" not in second.curves
    assert _quality(second) == _quality(first)


@pytest.mark.integration  # the real task end to end
def test_arms_share_teacher_and_differ(tmp_path: Path):
    none = run_single(ER2Task, dict(TINY, residual_mode="none"), seed=1, work_root=tmp_path)
    raw = run_single(ER2Task, dict(TINY, residual_mode="raw"), seed=1, work_root=tmp_path)
    assert none.status == raw.status == "finished", (none.error, raw.error)
    assert raw.details["cache"]["teacher"] == dict(none.details["cache"]["teacher"], loaded=True)
    assert none.metrics["teacher_nll@32"] == raw.metrics["teacher_nll@32"]
    assert raw.metrics["state_bytes"] > none.metrics["state_bytes"]
    assert none.metrics["gate_mean"] == 0.0 and raw.metrics["gate_mean"] == 1.0


@pytest.mark.integration  # the real task end to end
def test_every_distilled_arm_trains_the_fixed_budget_and_reports_its_gate_and_clamp(tmp_path: Path):
    """The fixed schedule gives each arm the same steps; a learned gate reports how well it finds the hard
    positions, a fixed one does not; the gain never ends past the clamp; the ablations decode exactly."""
    recipe = dict(TINY, schedule="fixed", steps=8, decay_steps=2, gain_lr_scale=30.0, gain_limit=0.05)
    arms = {"none": {"residual_mode": "none"}, "raw": {"residual_mode": "raw"},
            "compressed": {"residual_mode": "compressed"},
            "compressed_gate1": {"residual_mode": "compressed", "residual_gate": "one"},
            "raw_gated": {"residual_mode": "raw", "residual_gate": "learned"}}
    records = {name: run_single(ER2Task, dict(recipe, **arm), seed=2, work_root=tmp_path) for name, arm in arms.items()}
    assert all(r.status == "finished" for r in records.values()), [r.error for r in records.values()]
    metrics = {name: r.metrics for name, r in records.items()}
    assert {m["budget/steps"] for m in metrics.values()} == {8.0}
    assert {name for name, m in metrics.items() if "gate_auroc" in m} == {"compressed", "raw_gated"}
    assert all(0.0 <= metrics[name]["gate_auroc"] <= 1.0 for name in ("compressed", "raw_gated"))
    assert metrics["compressed_gate1"]["gate_mean"] == 1.0 and metrics["raw_gated"]["gate_mean"] < 1.0
    for name in ("raw", "compressed", "compressed_gate1", "raw_gated"):  # a 30x lr drives the gains to a 0.05 clamp
        assert metrics[name]["residual_gain_abs_mean"] <= 0.05 + 1e-7 and metrics[name]["at_bound/gain"] > 0
        assert metrics[name]["decode_agrees"] == 1.0
    assert metrics["raw"]["effective_gain_abs_mean"] == pytest.approx(metrics["raw"]["residual_gain_abs_mean"])
    assert metrics["none"]["at_bound/gain"] == 0.0 and "effective_gain_abs_mean" not in metrics["none"]


@pytest.mark.integration  # the real task end to end
def test_converged_recipe_and_unrotated_positions_end_to_end(tmp_path: Path):
    """The converged schedule stops by its rule (or its cap), logs the gain's curve, and the layer fed
    un-rotated q/k still decodes token by token exactly as its chunked forward; rotated input is a
    different workload for the layer (same teacher, other scores)."""
    recipe = dict(TINY, residual_mode="raw", schedule="converged", steps=60, stop_window=5, decay_steps=5,
                  gain_lr_scale=10.0)
    fed = {mode: run_single(ER2Task, dict(recipe, qk_positions=mode), seed=3, work_root=tmp_path)
           for mode in ("unrotated", "rotated")}
    assert all(r.status == "finished" for r in fed.values()), [r.error for r in fed.values()]
    record, metrics = fed["unrotated"], fed["unrotated"].metrics
    steps = int(metrics["distil_steps"])
    assert steps <= 60 and len(record.curves["distil/gain"]) == steps
    convergence = record.details["convergence"]
    assert (convergence["converged_at"] is not None) == (metrics["distil_converged"] == 1.0)
    assert steps == min(60, convergence["decay_start"] + 5)
    assert metrics["residual_gain_abs_mean"] == pytest.approx(record.curves["distil/gain"][-1][1], abs=1e-6)
    assert metrics["decode_agrees"] == 1.0
    assert fed["rotated"].metrics["teacher_nll@64"] == metrics["teacher_nll@64"]
    assert fed["rotated"].metrics["nmse@64"] != metrics["nmse@64"]


@pytest.mark.integration  # the real task end to end
def test_control_arms_share_the_teacher_and_bracket_the_range(tmp_path: Path):
    """teacher: the unchanged LM; zero: the layer removed (its cost is what every arm reports); window:
    a sliding window whose KV cache fits in the ER2 state's bytes."""
    records = {arm: run_single(ER2Task, dict(TINY, layer=arm), seed=2, work_root=tmp_path)
               for arm in ("teacher", "zero", "window")}
    er2 = run_single(ER2Task, dict(TINY, residual_mode="raw"), seed=2, work_root=tmp_path)
    assert all(r.status == "finished" for r in [*records.values(), er2]), [r.error for r in records.values()]
    teacher, zero, window = (records[arm].metrics for arm in ("teacher", "zero", "window"))
    assert teacher["nll_delta@32"] == 0.0 and teacher["nmse@32"] == 0.0
    assert zero["nll_delta@32"] == zero["zero_layer_nll_cost@32"] == er2.metrics["zero_layer_nll_cost@32"]
    assert zero["nmse@64"] == 1.0
    per_token = 2 * 1 * 8 * 2  # K and V, 1 KV head of dim 8, fp16
    assert window["state_bytes"] == window["window_tokens"] * per_token
    assert er2.metrics["state_bytes"] - per_token < window["state_bytes"] <= er2.metrics["state_bytes"]
    guess_on_text = run_single(ER2Task, dict(TINY, layer="guess"), seed=2, work_root=tmp_path)
    assert guess_on_text.status == "failed" and "recall workload" in guess_on_text.error


@pytest.mark.integration  # the real task end to end
def test_recall_workload_end_to_end(tmp_path: Path):
    record = run_single(ER2Task, {**TINY, "workload.kind": "recall", "workload.pairs": 4, "residual_mode": "raw"}, seed=0,
                        work_root=tmp_path)
    assert record.status == "finished", record.error
    for context in (32, 64):
        assert 0.0 <= record.metrics[f"recall@{context}"] <= 1.0
        assert 0.0 <= record.metrics[f"teacher_recall@{context}"] <= 1.0
        assert 0.0 <= record.metrics[f"zero_layer_recall@{context}"] <= 1.0
        assert 1 / 4 <= record.metrics[f"guess_recall@{context}"] <= 1.0  # 4 bindings: at most 4 values
    guess = run_single(ER2Task, {**TINY, "workload.kind": "recall", "workload.pairs": 4, "layer": "guess"}, seed=0, work_root=tmp_path)
    assert guess.status == "finished", guess.error
    assert guess.metrics["recall@64"] == record.metrics["guess_recall@64"]  # same sequences in every arm
    assert "nll@64" not in guess.metrics


@pytest.mark.integration  # the real task end to end
def test_a_teacher_mixture_is_trained_once_for_every_bindings_point(tmp_path: Path):
    mixture = {**TINY, "workload.kind": "recall", "workload.keys": 16, "workload.teacher_pairs": [2, 8], "layer": "teacher"}
    light, heavy = (run_single(ER2Task, {**mixture, "workload.pairs": pairs}, seed=0, work_root=tmp_path) for pairs in (2, 8))
    assert light.status == heavy.status == "finished", (light.error, heavy.error)
    assert heavy.details["cache"]["teacher"] == dict(light.details["cache"]["teacher"], loaded=True)
    alone = run_single(ER2Task, {**mixture, "workload.pairs": 8, "workload.teacher_pairs": None}, seed=0, work_root=tmp_path)
    assert alone.details["cache"]["teacher"]["key"] != light.details["cache"]["teacher"]["key"]
    assert alone.details["cache"]["teacher"]["loaded"] is False
    assert light.metrics["guess_recall@32"] > heavy.metrics["guess_recall@32"]  # the points differ in load


def test_guess_from_context_recall_counts_distinct_values_before_each_query():
    layout = RecallLayout(num_keys=4, num_values=4)  # keys 0-3, values 4-7, filler 8
    tokens = torch.tensor([[0, 4, 1, 4, 2, 5, 8, 1, 4, 2, 5]])  # values 4, 4, 5: two distinct
    answers = torch.zeros_like(tokens, dtype=torch.bool)
    answers[0, [7, 9]] = True  # the query keys 1 and 2
    assert guess_from_context_recall(layout, tokens, answers).tolist() == [0.5]
    tokens[0, 3] = 6  # now 4, 6, 5: three distinct values before the first query
    assert guess_from_context_recall(layout, tokens, answers).tolist() == [pytest.approx(1 / 3)]


def test_recall_batches_bind_keys_to_values():
    layout = RecallLayout(num_keys=10, num_values=10)
    tokens, answers = recall_batch(layout, 3, 40, 5, torch.Generator().manual_seed(0))
    for row in range(3):
        bindings = {int(tokens[row, 2 * i]): int(tokens[row, 2 * i + 1]) for i in range(5)}
        positions = answers[row].nonzero().flatten().tolist()
        assert len(positions) == 5 and all(p >= 10 for p in positions)
        for p in positions:
            assert bindings[int(tokens[row, p])] == int(tokens[row, p + 1])
    with pytest.raises(ValueError, match="do not fit"):
        recall_batch(layout, 1, 10, 5, torch.Generator())


def test_recall_answers_are_determined_by_the_prompt():
    """Each answer is the value bound to the query key, and exactly one binding names that key."""
    layout = RecallLayout(num_keys=6, num_values=6)
    pairs = 4
    tokens, answers = recall_batch(layout, 8, 24, pairs, torch.Generator().manual_seed(3))
    for row in range(8):
        prompt_keys = tokens[row, 0 : 2 * pairs : 2].tolist()
        prompt_values = tokens[row, 1 : 2 * pairs : 2].tolist()
        assert len(set(prompt_keys)) == pairs and all(k < layout.num_keys for k in prompt_keys)
        assert all(layout.num_keys <= v < layout.filler for v in prompt_values)
        asked = answers[row].nonzero().flatten().tolist()
        assert len(asked) == pairs and all(p >= 2 * pairs for p in asked)
        for position in asked:
            matches = [i for i, key in enumerate(prompt_keys) if key == int(tokens[row, position])]
            assert len(matches) == 1
            assert int(tokens[row, position + 1]) == prompt_values[matches[0]]
        query_region = tokens[row, 2 * pairs :].clone()
        query_region[[p - 2 * pairs for p in asked]] = layout.filler
        query_region[[p + 1 - 2 * pairs for p in asked]] = layout.filler
        assert bool((query_region == layout.filler).all())  # nothing else is shown: no other hint


def _bindings(tokens: Tensor, layout: RecallLayout) -> int:
    """Bindings of one sequence: the leading run of key, value pairs up to the first repeated key (a query)."""
    keys: set[int] = set()
    while 2 * len(keys) + 1 < tokens.numel():
        key, value = int(tokens[2 * len(keys)]), int(tokens[2 * len(keys) + 1])
        if key in keys or key >= layout.num_keys or not layout.num_keys <= value < layout.filler:
            break
        keys.add(key)
    return len(keys)


def test_mixture_draws_bindings_within_range_and_answers_each_query():
    layout = RecallLayout(num_keys=64, num_values=64)
    tokens, answers = recall_mixture_batch(layout, 200, 80, (3, 30), torch.Generator().manual_seed(0))
    counts = [_bindings(row, layout) for row in tokens]
    assert min(counts) >= 3 and max(counts) <= 30
    assert len(set(counts)) > 10  # the load varies between sequences
    assert sum(c < 10 for c in counts) > sum(c >= 20 for c in counts)  # log-uniform: each doubling as frequent
    for row, count in zip(range(200), counts):
        bound = {int(tokens[row, 2 * i]): int(tokens[row, 2 * i + 1]) for i in range(count)}
        asked = answers[row].nonzero().flatten().tolist()
        assert len(asked) == min(count, (80 - 2 * count) // 2) and all(p >= 2 * count for p in asked)
        assert all(bound[int(tokens[row, p])] == int(tokens[row, p + 1]) for p in asked)


def test_mixture_is_determined_by_the_generator():
    layout = RecallLayout(num_keys=32, num_values=32)
    first = recall_mixture_batch(layout, 16, 40, (2, 12), torch.Generator().manual_seed(5))
    again = recall_mixture_batch(layout, 16, 40, (2, 12), torch.Generator().manual_seed(5))
    other = recall_mixture_batch(layout, 16, 40, (2, 12), torch.Generator().manual_seed(6))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])
    fixed, _ = recall_mixture_batch(layout, 16, 40, (7, 7), torch.Generator().manual_seed(5))
    assert all(_bindings(row, layout) == 7 for row in fixed)
    with pytest.raises(ValueError, match="low <= high"):
        recall_mixture_batch(layout, 1, 40, (5, 4), torch.Generator())


def test_teacher_cache_identity_names_the_mixture_not_the_point():
    mixed = [RecallWorkload(pairs, 64, (4, 16)).teacher_data(2, 64)[1] for pairs in (4, 8, 16)]
    assert len(set(mixed)) == 1 and "4-16" in mixed[0]
    alone = [RecallWorkload(pairs, 64).teacher_data(2, 64)[1] for pairs in (4, 8)]
    assert alone[0] != alone[1] and mixed[0] not in alone  # without a mixture: one teacher per point, as before
    with pytest.raises(pydantic.ValidationError, match=r"above workload\.keys"):
        ER2Task.validate_params({"workload.kind": "recall", "workload.keys": 16, "workload.teacher_pairs": [4, 32],
                                 "train_context": 128})
    with pytest.raises(pydantic.ValidationError, match="teacher context of at least 66"):
        ER2Task.validate_params({"workload.kind": "recall", "workload.keys": 64, "workload.teacher_pairs": [4, 32],
                                 "train_context": 32, "eval_multiples": [1]})
    with pytest.raises(pydantic.ValidationError, match=r"workload\.text\.teacher_pairs\n.*Extra inputs"):
        ER2Task.validate_params({"workload.teacher_pairs": [4, 8]})  # the text workload has no teacher mixture
    with pytest.raises(pydantic.ValidationError, match="low exceeds high"):
        ER2Task.validate_params({"workload.kind": "recall", "workload.teacher_pairs": [8, 4], "train_context": 64})


def test_masked_nll_scores_only_the_answers():
    """The answer-only projection equals the NLL of the full logits weighted by the mask."""
    layout = RecallLayout(num_keys=20, num_values=20)
    tokens, answers = recall_mixture_batch(layout, 5, 48, (2, 10), torch.Generator().manual_seed(2))
    model = TeacherLM(TeacherConfig(vocab_size=layout.vocab_size, model_dim=16, num_heads=2, num_kv_heads=1))
    logits = model(tokens[:, :-1])
    full = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
    weights = answers[:, :-1].float()
    expected = (full * weights).sum(1) / weights.sum(1)
    assert torch.allclose(next_token_nll(model, tokens, mask=answers), expected, atol=1e-5)
    assert torch.equal(next_token_nll(model, tokens), (full * torch.ones_like(full)).sum(1) / full.shape[1])
    assert not torch.allclose(expected, full.mean(1))  # the mask matters
    # a float mask weights every position (the passkey teacher: 1 on text, 20 on the asked digits)
    graded = 1.0 + 19.0 * answers.float()
    weighted = (full * graded[:, :-1]).sum(1) / graded[:, :-1].sum(1)
    assert torch.allclose(next_token_nll(model, tokens, mask=graded), weighted, atol=1e-5)
    assert not torch.allclose(weighted, expected) and not torch.allclose(weighted, full.mean(1))


def test_corpus_split_is_disjoint_and_stable():
    corpus = load_pydoc_corpus()
    assert len(corpus.held_out) > 10 and corpus.train.numel() > 200_000
    assert corpus.checksum == load_pydoc_corpus().checksum
    sample = bytes(next(iter(corpus.held_out.values()))[:200].tolist())
    assert sample not in bytes(corpus.train.tolist())
