"""The passkey workload: a key planted in pydoc text and asked again later (a non-local probe layer)."""
from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
import torch
from click.testing import CliRunner

from harness.cli import main
from harness.execution.executor import run_single
from harness.tasks.er2.data import (
    PASSKEY_CUE,
    PASSKEY_DIGITS,
    PASSKEY_SENTENCE,
    PASSKEY_SPAN,
    load_pydoc_corpus,
    plant_passkeys,
    sample_windows,
)
from harness.tasks.er2.task import ER2Task
from harness.tasks.er2.workloads import PasskeyWorkload

CUE_BYTE = PASSKEY_CUE[-1]
CUE_LENGTH = len(PASSKEY_CUE)


def _windows(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return sample_windows(load_pydoc_corpus().train, batch, length, torch.Generator().manual_seed(seed))


def _sentence_starts(row: torch.Tensor) -> list[int]:
    """Where each planted sentence starts, found by its cue byte (which the corpus never holds)."""
    return [i - CUE_LENGTH + 1 for i, byte in enumerate(row.tolist()) if byte == CUE_BYTE]


def test_cue_bytes_never_occur_in_the_corpus():
    corpus = load_pydoc_corpus()
    for stream in (corpus.train, *corpus.held_out.values()):
        assert not bool((stream == CUE_BYTE).any())


@pytest.mark.parametrize("asked_at_end", [True, False])
def test_key_planted_and_asked_after_it(asked_at_end: bool):
    windows = _windows(64, 80)
    tokens, answers = plant_passkeys(windows, torch.Generator().manual_seed(1), asked_at_end=asked_at_end)
    assert tokens.shape == answers.shape == windows.shape
    for row, window, mask in zip(tokens, windows, answers):
        starts = _sentence_starts(row)
        assert len(starts) == 2 and starts[1] - starts[0] >= PASSKEY_SENTENCE  # no overlap
        key, question = (row[s : s + PASSKEY_SENTENCE] for s in starts)
        assert bytes(key[:CUE_LENGTH].tolist()) == PASSKEY_CUE and torch.equal(question, key)
        assert all(ord("0") <= b <= ord("9") for b in key[CUE_LENGTH:-1].tolist()) and key[-1] == ord(".")
        if asked_at_end:
            assert starts[1] == row.numel() - PASSKEY_SENTENCE
        # the mask marks exactly the positions whose next token is an asked digit
        first_digit = starts[1] + CUE_LENGTH
        assert mask.nonzero().flatten().tolist() == list(range(first_digit - 1, first_digit - 1 + PASSKEY_DIGITS))
        planted = torch.zeros_like(mask)
        for s in starts:
            planted[s : s + PASSKEY_SENTENCE] = True
        assert torch.equal(row[~planted], window[~planted])  # the text around the keys is untouched


def test_key_spread_over_the_whole_window_when_asked_at_end():
    """Evaluation places the key anywhere before the question: the first and the last slots both occur."""
    tokens, _ = plant_passkeys(_windows(400, 64), torch.Generator().manual_seed(2))
    keys = {_sentence_starts(row)[0] for row in tokens}
    assert keys == set(range(64 - 2 * PASSKEY_SENTENCE + 1))


def test_deterministic_from_the_generator():
    windows = _windows(8, 96)
    first = plant_passkeys(windows, torch.Generator().manual_seed(3), asked_at_end=False)
    again = plant_passkeys(windows, torch.Generator().manual_seed(3), asked_at_end=False)
    other = plant_passkeys(windows, torch.Generator().manual_seed(4), asked_at_end=False)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("asked_at_end", [True, False])
def test_raises_on_windows_too_short(asked_at_end: bool):
    plant_passkeys(_windows(2, PASSKEY_SPAN), torch.Generator().manual_seed(0), asked_at_end=asked_at_end)  # fits exactly
    with pytest.raises(ValueError, match=f"at least {PASSKEY_SPAN} tokens, got {PASSKEY_SPAN - 1}"):
        plant_passkeys(_windows(2, PASSKEY_SPAN - 1), torch.Generator().manual_seed(0), asked_at_end=asked_at_end)


def test_teacher_weights_answers_and_alternates_short_windows():
    workload = PasskeyWorkload(answer_weight=7.0, short_context=64)
    tokens, weights = workload.training_batch(4, 128, torch.Generator().manual_seed(0))
    assert sorted(set(weights.flatten().tolist())) == [1.0, 7.0]
    for row, weight in zip(tokens, weights):
        asked = (weight == 7.0).nonzero().flatten()
        question = _sentence_starts(row)[1]
        assert asked.tolist() == list(range(question + CUE_LENGTH - 1, question + CUE_LENGTH - 1 + PASSKEY_DIGITS))
    batches, _ = workload.teacher_data(4, 256)
    generator = torch.Generator().manual_seed(0)
    shapes = [tuple(batches(generator)[0].shape) for _ in range(4)]
    assert shapes == [(16, 64), (4, 256), (16, 64), (4, 256)]  # the same tokens per step either way
    assert PasskeyWorkload(7.0, 64).data_id != PasskeyWorkload(7.0, 128).data_id != PasskeyWorkload(8.0, 128).data_id


def test_params_refuse_contexts_that_cannot_hold_the_keys():
    ER2Task.validate_params({"workload.kind": "passkey", "train_context": PASSKEY_SPAN,
                             "workload.short_context": PASSKEY_SPAN})
    for field in ("train_context", "workload.short_context", "teacher.context"):
        with pytest.raises(pydantic.ValidationError, match=f"need contexts of at least {PASSKEY_SPAN} tokens"):
            ER2Task.validate_params({"workload.kind": "passkey", field: PASSKEY_SPAN - 1})
    with pytest.raises(pydantic.ValidationError, match="Extra inputs"):  # the text workload has no pass key
        ER2Task.validate_params({"workload.kind": "text", "workload.short_context": 8})
    with pytest.raises(pydantic.ValidationError, match="greater than 0"):
        ER2Task.validate_params({"workload.kind": "passkey", "workload.weight": 0})


def test_bad_passkey_param_in_a_suite_file_is_one_line_with_file_and_line(tmp_path: Path):
    suite = tmp_path / "passkey.yaml"
    suite.write_text("suite: pk\ntask: er2\nseeds: [0]\nparams: {workload.kind: passkey}\narms:\n"
                     "  raw: {residual_mode: raw, workload.short_context: 20}\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--results", str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "passkey.yaml:6:" in lines[0] and f"need contexts of at least {PASSKEY_SPAN} tokens" in lines[0]


@pytest.mark.integration  # the real task end to end
def test_passkey_workload_end_to_end(tmp_path: Path):
    """Every arm reports recall on the asked digits beside NLL, per window; the teacher's recall is the
    arms' reference and zeroing the layer is scored on the same windows."""
    params = {
        "workload.kind": "passkey", "train_context": PASSKEY_SPAN, "eval_multiples": [1, 2], "steps": 3, "batch": 2,
        "train_pool": 4, "eval_batch": 2, "eval_documents": 5, "teacher.steps": 4, "teacher.model_dim": 16,
        "teacher.num_heads": 2, "teacher.num_kv_heads": 1, "feature_dim": 8, "residual_dim": 4, "code_rank": 2,
        "speed.measure": False, "workload.short_context": PASSKEY_SPAN,
    }
    raw = run_single(ER2Task, dict(params, residual_mode="raw"), seed=0, work_root=tmp_path)
    window = run_single(ER2Task, dict(params, layer="window"), seed=0, work_root=tmp_path)
    assert raw.status == window.status == "finished", (raw.error, window.error)
    assert window.details["cache"]["teacher"]["loaded"] is True
    for context in (PASSKEY_SPAN, 2 * PASSKEY_SPAN):
        per_doc = raw.details[f"per_document@{context}"]
        assert len(per_doc["layer_recall"]) == len(per_doc["teacher_nll"]) == 5
        assert raw.metrics[f"recall@{context}"] == pytest.approx(sum(per_doc["layer_recall"]) / 5)
        for metrics in (raw.metrics, window.metrics):
            assert 0.0 <= metrics[f"recall@{context}"] <= 1.0 and f"zero_layer_recall@{context}" in metrics
        assert raw.metrics[f"teacher_recall@{context}"] == window.metrics[f"teacher_recall@{context}"]
    assert raw.metrics["train_context_recall"] == raw.metrics[f"recall@{PASSKEY_SPAN}"]
