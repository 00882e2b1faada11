"""The constructed MQAR teacher: exact recall at every shipped load, its temperature bound, where it puts
q/k/v, distillation on the answers alone, and the fair-arm facts of every distilled arm."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pydantic
import pytest
import torch

from harness.execution.executor import run_single
from harness.tasks.er2.mechanism.er2 import GAIN_LIMIT, ER2Layer
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError
from harness.tasks.er2.constructed import (
    ConstructedRecallWorkload,
    ConstructedTeacher,
    codebooks,
    exact_recall_temperature,
    largest_cross_similarity,
)
from harness.tasks.er2.data import RecallLayout, recall_batch
from harness.tasks.er2.distill import at_answers, budget_metrics, transfer_loss
from harness.tasks.er2.task import ER2Task
from harness.tasks.er2.workloads import answer_recall
from harness.tasks.param_paths import layered

SUITE = Path(__file__).resolve().parents[1] / "suites" / "er2_mqar.yaml"
PROFILES = ("default", "pilot", "ci", "smoke")
CONSTRUCTED = {"workload.kind": "recall", "teacher.kind": "constructed", "workload.keys": 1024, "teacher.code_dim": 32,
               "workload.loads": [8, 64], "train_context": 256}
CPU = torch.device("cpu")


def _constructed(keys: int = 64, loads=(2, 4, 8), dim: int = 16, temperature: float = 40.0):
    workload = ConstructedRecallWorkload(loads, keys)
    return workload, ConstructedTeacher(workload.layout, dim, temperature)


def test_the_teacher_recalls_every_query_at_every_load_of_the_shipped_profiles():
    arms = [ER2Task.validate_params(layered(suite.params, arm.params))
            for profile in PROFILES for suite in load_suites(SUITE, profile) for arm in suite.arms.values()]
    assert all(params.teacher.kind == "constructed" for params in arms)
    teachers = {(p.loads, p.workload.keys, p.teacher.code_dim, p.teacher.temperature, tuple(p.eval_contexts))
                for p in arms}
    for loads, keys, dim, temperature, contexts in teachers:
        workload = ConstructedRecallWorkload(loads, keys)
        teacher = ConstructedTeacher(workload.layout, dim, temperature)
        for context in contexts:
            comparisons = workload.load_comparisons(teacher, None, context, 16, CPU, torch.Generator().manual_seed(0))
            assert {load: c.summary()["teacher_recall"] for load, c in comparisons.items()} == {load: 1.0 for load in loads}


def test_below_its_bound_the_temperature_loses_recall_and_is_refused():
    workload, cold = _constructed(keys=1024, loads=(64,), dim=32, temperature=0.05)
    tokens, answers = recall_batch(workload.layout, 16, 256, 64, torch.Generator().manual_seed(1))
    assert sum(answer_recall(cold, tokens, answers, None)) / 16 < 0.5
    with pytest.raises(pydantic.ValidationError, match="too low for exact recall at 64 bindings: it must exceed"):
        ER2Task.validate_params({**CONSTRUCTED, "teacher.temperature": 20.0})
    ER2Task.validate_params({**CONSTRUCTED, "teacher.temperature": 25.0})


def test_the_bound_follows_the_codebooks_largest_cross_similarity():
    keys, values = codebooks(12, 12, 4)
    assert torch.allclose(keys.norm(dim=-1), torch.ones(12)) and torch.allclose(values.norm(dim=-1), torch.ones(12))
    brute = max(float(keys[a] @ keys[b]) for a, b in itertools.permutations(range(12), 2))
    assert largest_cross_similarity(keys) == pytest.approx(brute)
    assert codebooks(12, 12, 4)[0] is keys  # fixed: the same codes for every seed, checked before a run
    assert exact_recall_temperature(1, 0.9, 0.9) == 0.0
    assert exact_recall_temperature(5, 0.5, 0.0) == pytest.approx(2 * torch.log(torch.tensor(8.0)).item())


def test_just_above_its_bound_the_teacher_answers_with_a_margin_on_every_value_code():
    """The derivation's inequality itself: at the bound's temperature every query's output is nearer
    its value's code than any other value code, on codes crowded into 8 dims."""
    layout = RecallLayout(48, 48)
    keys, values = codebooks(48, 48, 8)
    temperature = exact_recall_temperature(16, largest_cross_similarity(keys), largest_cross_similarity(values)) + 1e-3
    teacher = ConstructedTeacher(layout, 8, temperature)
    tokens, answers = recall_batch(layout, 64, 64, 16, torch.Generator().manual_seed(2))
    captured = {}
    teacher(tokens, capture=captured)
    scores = captured["out"][:, 0] @ teacher.value_codes.T  # [B,T,values]
    asked = tokens[:, 1:][answers[:, :-1]] - layout.num_keys
    answered = scores[:, :-1][answers[:, :-1]]
    right = answered.gather(1, asked[:, None])
    others = answered.scatter(1, asked[:, None], -torch.inf).max(1, keepdim=True).values
    assert bool((right > others).all())


def test_the_probe_puts_keys_and_values_at_bindings_and_queries_at_repeated_keys():
    workload, teacher = _constructed(keys=64, loads=(4,), dim=16)
    tokens, answers = recall_batch(workload.layout, 3, 32, 4, torch.Generator().manual_seed(3))
    probe = teacher.probe(tokens)
    assert torch.equal(probe["answers"], answers)  # queries are what the workload asks
    q, k, v = probe["q"][:, 0], probe["k"][:, 0], probe["v"][:, 0]
    for row in range(3):
        for t in range(32):
            token = int(tokens[row, t])
            if t % 2 == 1 and t < 8:  # the value of binding (t - 1) / 2
                assert torch.equal(k[row, t], teacher.key_codes[int(tokens[row, t - 1])])
                assert torch.equal(v[row, t], teacher.value_codes[token - 64])
            else:
                assert not k[row, t].any() and not v[row, t].any()
            if answers[row, t]:
                assert torch.allclose(q[row, t], 40.0 * 4.0 * teacher.key_codes[token])
            else:
                assert not q[row, t].any()


def test_the_readout_answers_only_values():
    workload, teacher = _constructed(keys=64, loads=(4,), dim=16)
    tokens, _ = recall_batch(workload.layout, 2, 32, 4, torch.Generator().manual_seed(4))
    predicted = teacher(tokens, mixer=lambda q, k, v: torch.randn_like(q)).argmax(-1)
    assert bool(((predicted >= 64) & (predicted < 128)).all())


def test_distillation_on_answers_ignores_every_other_position():
    workload, teacher = _constructed(keys=64, loads=(4, 8), dim=16)
    tokens, _ = workload.training_batch(4, 48, torch.Generator().manual_seed(5))
    captured = {}
    teacher(tokens, capture=captured)
    answers = captured["answers"]
    selected = at_answers(captured["out"], answers)
    assert selected.shape == (1, 1, int(answers.sum()), 16)
    assert torch.equal(selected[0, 0], captured["out"][:, 0][answers])
    torch.manual_seed(0)
    layer = ER2Layer(1, 1, 16, feature_dim=8, residual_dim=4, code_rank=2, residual_mode="compressed")
    changed = dict(captured, out=torch.where(answers[:, None, :, None], captured["out"], torch.randn_like(captured["out"])))
    assert transfer_loss(layer, captured)[0].item() == pytest.approx(transfer_loss(layer, changed)[0].item())
    moved = dict(captured, out=captured["out"] + answers[:, None, :, None])
    assert transfer_loss(layer, moved)[0].item() != pytest.approx(transfer_loss(layer, captured)[0].item())


def test_budget_metrics_count_steps_sequences_and_gains_at_the_clamp():
    layer = ER2Layer(4, 2, 8, feature_dim=8, residual_dim=4, code_rank=2, residual_mode="raw")
    with torch.no_grad():
        layer.residual_gain.copy_(torch.tensor([0.0, GAIN_LIMIT, -2.0, 0.3]))
    assert budget_metrics(layer, 50, 8) == {"budget/steps": 50.0, "budget/examples": 400.0, "at_bound/gain": 0.5}
    none = ER2Layer(4, 2, 8, feature_dim=8, residual_mode="none")
    assert budget_metrics(none, 50, 8)["at_bound/gain"] == 0.0


@pytest.mark.parametrize("change, message", [
    ({"workload.loads": [8, 2048]}, "workload.loads reaches 2048 bindings, above workload.keys (1024)"),
    ({"train_context": 100}, "need a train_context of at least 130 tokens"),
    ({"workload.kind": "text"}, "exists for the recall workload only"),
    ({"qk_positions": "unrotated"}, "qk_positions must stay 'rotated'"),
    ({"teacher.kind": "trained"}, "workload.loads applies to the constructed teacher only"),
])
def test_constructed_params_that_cannot_hold_are_refused(change, message):
    with pytest.raises(pydantic.ValidationError, match=re.escape(message)):
        ER2Task.validate_params(layered(CONSTRUCTED, change))


def test_every_distilled_arm_gets_the_same_budget_and_the_teacher_is_exact(tmp_path: Path):
    base = {"workload.kind": "recall", "teacher.kind": "constructed", "workload.keys": 64, "teacher.code_dim": 16,
            "workload.loads": [2, 8], "train_context": 32, "eval_multiples": [1], "feature_dim": 8, "residual_dim": 4,
            "code_rank": 2, "steps": 3, "batch": 2, "train_pool": 4, "eval_batch": 2, "eval_documents": 4,
            "speed.measure": False}
    records = {mode: run_single(ER2Task, dict(base, residual_mode=mode), seed=0, work_root=tmp_path / mode)
               for mode in ("none", "raw", "compressed")}
    records["teacher"] = run_single(ER2Task, dict(base, layer="teacher"), seed=0, work_root=tmp_path / "teacher")
    assert all(r.status == "finished" for r in records.values()), {k: r.error for k, r in records.items()}
    for mode in ("none", "raw", "compressed"):
        metrics = records[mode].metrics
        assert metrics["budget/steps"] == 3.0 and metrics["budget/examples"] == 6.0
        assert {"load_recall@2", "load_recall@8", "load_recall_drop", "at_bound/gain"} <= metrics.keys()
    teacher = records["teacher"].metrics
    assert teacher["load_recall_min"] == 1.0 and teacher["load_recall_drop"] == 0.0
    assert teacher["load_teacher_recall@8"] == 1.0 and teacher["recall@32"] == 1.0


@pytest.mark.parametrize("old, new, message", [
    ("teacher.temperature: 40.0", "teacher.temperature: 20.0", "too low for exact recall at 64 bindings"),
    ("workload.keys: 1024", "workload.keys: 32", "workload.loads reaches 64 bindings, above workload.keys (32)"),
    ("train_context: 256", "train_context: 100", "need a train_context of at least 130 tokens"),
])
def test_the_shipped_suite_with_a_load_it_cannot_hold_is_refused_in_one_line(tmp_path: Path, old, new, message):
    text = SUITE.read_text()
    assert old in text
    bad = tmp_path / "er2_mqar.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(SuiteError) as refused:
        load_suites(bad)
    assert str(refused.value).startswith(f"{bad}:") and message in str(refused.value)
    assert "\n" not in str(refused.value)
