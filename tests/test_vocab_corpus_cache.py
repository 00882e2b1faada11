"""The vocab task builds its data once per seed (the cache service) and times its forwards in turn."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.execution.executor import run_single
from harness.services.seeding import numpy_stream
from harness.tasks.vocab import throughput
from harness.tasks.vocab.corpus import Corpus
from harness.tasks.vocab.corpus_payload import corpus_from_payload, corpus_payload
from harness.tasks.vocab.gettext import gettext_folds
from harness.tasks.vocab.synthetic import SyntheticSpec, synthetic_corpus
from harness.tasks.vocab.task import VocabTask

TINY = {"workload.n_concepts": 40, "workload.train_pairs": 300, "workload.test_pairs": 20, "steps": 6,
        "batch_size": 32, "dim": 8, "interference_steps": 2, "interference_batches": 3, "throughput.measure": False}


def _saved_and_loaded(corpus: Corpus) -> Corpus:
    """Through the bytes the cache writes and reads (torch.save, torch.load with weights_only)."""
    buffer = io.BytesIO()
    torch.save(corpus_payload(corpus), buffer)
    buffer.seek(0)
    return corpus_from_payload(torch.load(buffer, weights_only=True))


def _assert_same(a: object, b: object, where: str = "corpus") -> None:
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            _assert_same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), where
    else:
        assert a == b and type(a) is type(b), where


def test_a_synthetic_corpus_comes_back_exactly() -> None:
    spec = SyntheticSpec(3, 40, 0.2, 0.15, 1.0, 1.0, 2, 4, 300, 20, 0.5, 0.2, 1.0, 0.2)
    corpus = synthetic_corpus(spec, lambda *purpose: numpy_stream(3, *purpose))
    assert corpus.contested is not None and corpus.minimal_pairs is None
    _assert_same(corpus, _saved_and_loaded(corpus))


def test_real_data_folds_come_back_exactly() -> None:
    folds = gettext_folds(("en", "de", "fr"), 0.2, 2, np.random.default_rng(0))
    assert len(folds) >= 2
    for corpus in folds:
        assert corpus.minimal_pairs is not None and corpus.token_names is not None
        _assert_same(corpus, _saved_and_loaded(corpus))


def test_a_changed_corpus_is_told_apart() -> None:
    """The comparison above can fail: one token moved is a different corpus."""
    corpus = gettext_folds(("en", "de", "fr"), 0.2, 2, np.random.default_rng(0))[0]
    moved = corpus.train.source.copy()
    moved[0, 0] += 1
    with pytest.raises(AssertionError, match="corpus.train.source"):
        _assert_same(corpus, dataclasses.replace(corpus, train=dataclasses.replace(corpus.train, source=moved)))


@pytest.mark.integration  # the real task end to end
def test_the_second_arm_of_a_seed_loads_the_data_and_scores_as_if_it_built_it(tmp_path: Path) -> None:
    oracle = {**TINY, "index": "oracle"}
    alone = run_single(VocabTask, oracle, seed=4, work_root=tmp_path / "alone")
    run_single(VocabTask, TINY, seed=4, work_root=tmp_path / "both")  # the control builds the seed's data
    after = run_single(VocabTask, oracle, seed=4, work_root=tmp_path / "both")
    assert alone.status == after.status == "finished", (alone.error, after.error)
    assert alone.details["cache"]["corpus"]["loaded"] is False
    assert after.details["cache"]["corpus"]["loaded"] is True
    assert len(list((tmp_path / "both" / "cache").glob("vocab-corpus-*.pt"))) == 1
    assert alone.metrics == after.metrics


def test_forwards_are_timed_in_turn_and_each_keeps_its_fastest_call(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []
    calls = {"arm": iter([3.0, 1.0, 2.0]), "bag": iter([1.5, 2.5, 0.5])}

    def fake_seconds(fn, device):  # noqa: ANN001, ANN202 - stands in for the clock
        taken.append(fn())
        return next(calls[taken[-1]])

    monkeypatch.setattr(throughput, "_call_seconds", fake_seconds)
    best = throughput.fastest_in_turn({"arm": lambda: "arm", "bag": lambda: "bag"}, 0.0, torch.device("cpu"))
    assert taken == ["arm", "bag"] * throughput.MIN_ROUNDS
    assert best == {"arm": 1.0, "bag": 0.5}
