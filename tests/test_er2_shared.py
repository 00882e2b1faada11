"""What the arms of an er2 seed share is built once and loaded after: the teacher, its capture of the
distillation pool, and the reference scores (the teacher's own and the zeroed layer's) at each evaluation
context. A loaded artifact gives the same values as building it in the trial, and another identity builds anew."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import torch

import harness.tasks.er2.shared as shared
import harness.tasks.er2.task as er2_task
from harness.execution.executor import run_single
from harness.tasks.er2.task import ER2Task
from harness.tasks.er2.teacher import TeacherConfig, TeacherLM, zero_layer
from harness.tasks.er2.workloads import PasskeyWorkload, RecallWorkload, TextWorkload

TINY = {
    "train_context": 32, "eval_multiples": [1, 2], "steps": 3, "batch": 2, "train_pool": 4, "eval_batch": 2,
    "eval_documents": 3, "teacher.steps": 3, "teacher.model_dim": 16, "teacher.num_heads": 2,
    "teacher.num_kv_heads": 1, "feature_dim": 8, "residual_dim": 4, "code_rank": 2, "speed.measure": False,
}
PASSKEY = {**TINY, "workload.kind": "passkey", "workload.short_context": 32}
SHARED = ("teacher", "pool-capture", "reference-32", "reference-64")


def _loaded(record) -> dict[str, bool]:
    return {kind: entry["loaded"] for kind, entry in record.details["cache"].items()}


def _refuse(*args, **kwargs):
    raise AssertionError("rebuilt what the cache holds")


@pytest.mark.integration  # the real task end to end
def test_a_second_arm_of_the_seed_loads_everything_shared_and_builds_nothing(tmp_path: Path, monkeypatch):
    first = run_single(ER2Task, {**PASSKEY, "residual_mode": "raw"}, seed=3, work_root=tmp_path)
    assert first.status == "finished", first.error
    assert _loaded(first) == dict.fromkeys(SHARED, False)
    # the builders themselves are out of reach now: a loaded artifact cannot have called them
    monkeypatch.setattr(er2_task, "train_teacher", _refuse)
    monkeypatch.setattr(shared, "capture", _refuse)
    monkeypatch.setattr(PasskeyWorkload, "swapped_comparison", _refuse)
    second = run_single(ER2Task, {**PASSKEY, "layer": "zero"}, seed=3, work_root=tmp_path)
    assert second.status == "finished", second.error
    assert _loaded(second) == {"teacher": True, "reference-32": True, "reference-64": True}  # a control: no pool
    assert all(second.details["cache"][kind]["sha256"] == first.details["cache"][kind]["sha256"] for kind in _loaded(second))


@pytest.mark.integration  # the real task end to end
def test_another_identity_builds_anew(tmp_path: Path):
    run_single(ER2Task, {**TINY, "residual_mode": "none"}, seed=4, work_root=tmp_path)
    more_documents = run_single(ER2Task, {**TINY, "residual_mode": "none", "eval_documents": 2}, seed=4,
                                work_root=tmp_path)
    assert _loaded(more_documents) == {"teacher": True, "pool-capture": True, "reference-32": False,
                                       "reference-64": False}
    longer_pool = run_single(ER2Task, {**TINY, "residual_mode": "none", "train_pool": 6}, seed=4, work_root=tmp_path)
    assert _loaded(longer_pool) == {"teacher": True, "pool-capture": False, "reference-32": True, "reference-64": True}
    # another teacher: nothing derived from the old one may be reused
    other_teacher = run_single(ER2Task, {**TINY, "residual_mode": "none", "teacher.steps": 4}, seed=4,
                               work_root=tmp_path)
    assert _loaded(other_teacher) == dict.fromkeys(SHARED, False)
    other_seed = run_single(ER2Task, {**TINY, "residual_mode": "none"}, seed=5, work_root=tmp_path)
    assert _loaded(other_seed) == dict.fromkeys(SHARED, False)


@pytest.mark.integration  # the real task end to end
@pytest.mark.parametrize("arm", [{"residual_mode": "compressed"}, {"layer": "teacher"}, {"layer": "window"},
                                 {"layer": "zero"}])
def test_an_arm_reading_the_cache_reports_what_it_reports_alone(tmp_path: Path, arm: dict):
    """Every metric and every per-document score of an arm whose shared work came from another arm's trial
    equals those of the same arm building all of it itself (a fresh cache)."""
    run_single(ER2Task, {**PASSKEY, "residual_mode": "raw"}, seed=6, work_root=tmp_path / "shared")
    cached = run_single(ER2Task, {**PASSKEY, **arm}, seed=6, work_root=tmp_path / "shared")
    alone = run_single(ER2Task, {**PASSKEY, **arm}, seed=6, work_root=tmp_path / "alone")
    assert cached.status == alone.status == "finished", (cached.error, alone.error)
    assert all(_loaded(cached).values()) and not any(_loaded(alone).values())
    assert cached.metrics == alone.metrics
    per_document = [key for key in alone.details if key.startswith("per_document@")]
    assert per_document and all(cached.details[key] == alone.details[key] for key in per_document)


def _tiny_teacher(vocab_size: int) -> TeacherLM:
    torch.manual_seed(0)
    return TeacherLM(TeacherConfig(vocab_size=vocab_size, model_dim=16, num_heads=2, num_kv_heads=1)).eval()


@pytest.mark.parametrize("make", [TextWorkload, lambda: PasskeyWorkload(20.0, 32), lambda: RecallWorkload(4, 16)])
def test_a_comparison_with_the_reference_equals_the_one_that_runs_the_teacher(make):
    """The teacher's scores from a reference on the same sequences are the ones it would compute again, and
    given the reference it is not run again."""
    workload = make()
    teacher = _tiny_teacher(workload.vocab_size)

    def compare(mixer, reference=None):
        return workload.swapped_comparison(teacher, mixer, 40, 3, torch.device("cpu"), torch.Generator().manual_seed(9),
                                           reference=reference)

    reference, halved = compare(zero_layer), (lambda q, k, v: 0.5 * q)
    passes, run = [], teacher.hidden
    teacher.hidden = lambda tokens, mixer=None, capture=None: passes.append(mixer) or run(tokens, mixer, capture)
    with_reference = compare(halved, reference)
    assert passes and None not in passes  # the layer ran, the unchanged teacher did not
    assert asdict(with_reference) == asdict(compare(halved))
    assert asdict(compare(None, reference)) == asdict(compare(None))


def test_digests_tell_teachers_and_tokens_apart():
    teacher = _tiny_teacher(256)
    assert shared.weights_digest(teacher) == shared.weights_digest(_tiny_teacher(256))
    with torch.no_grad():
        teacher.norm.weight[3] += 1e-6
    assert shared.weights_digest(teacher) != shared.weights_digest(_tiny_teacher(256))
    tokens = torch.arange(6).reshape(2, 3)
    assert shared.tensor_digest(tokens) != shared.tensor_digest(tokens.reshape(3, 2))  # shape counts
    assert shared.tensor_digest(tokens) != shared.tensor_digest(tokens.to(torch.int32))  # and dtype
    assert shared.tensor_digest(tokens.T) == shared.tensor_digest(tokens.T.contiguous())  # not the strides
