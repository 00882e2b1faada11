"""A corpus as a cache payload (tensors, strings and numbers) and back, exactly.

Every arm of a seed trains on the same data, so a trial builds its corpora (generation, tokenising,
the held-out folds) once per seed through the task's cache and the other arms load them. The round
trip keeps each array's dtype and values, so a trial that loads gets the arrays the builder got.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from harness.tasks.vocab.corpus import Corpus, MinimalPairs, ParallelSet

_PARALLEL_FIELDS = ("source", "source_language", "target", "target_language", "group")


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.cpu().numpy()


def _parallel_payload(pairs: ParallelSet) -> dict[str, torch.Tensor]:
    return {name: _tensor(getattr(pairs, name)) for name in _PARALLEL_FIELDS}


def _parallel(payload: dict[str, torch.Tensor]) -> ParallelSet:
    return ParallelSet(*(_array(payload[name]) for name in _PARALLEL_FIELDS))


def corpus_payload(corpus: Corpus) -> dict[str, Any]:
    """What ``torch.load(weights_only=True)`` can read back into ``corpus`` (``corpus_from_payload``)."""
    pools = corpus.minimal_pairs
    return {
        "name": corpus.name,
        "languages": list(corpus.languages),
        "vocab_size": corpus.vocab_size,
        "train": _parallel_payload(corpus.train),
        "test": _parallel_payload(corpus.test),
        "contested": None if corpus.contested is None else _tensor(corpus.contested),
        "token_names": None if corpus.token_names is None else list(corpus.token_names),
        "minimal_pairs": None if pools is None else {
            "pairs": _parallel_payload(pools.pairs), "scored": _tensor(pools.scored),
            "translation": _tensor(pools.translation), "word": _tensor(pools.word)},
    }


def corpus_from_payload(payload: dict[str, Any]) -> Corpus:
    pools = payload["minimal_pairs"]
    return Corpus(
        name=payload["name"],
        languages=tuple(payload["languages"]),
        vocab_size=int(payload["vocab_size"]),
        train=_parallel(payload["train"]),
        test=_parallel(payload["test"]),
        contested=None if payload["contested"] is None else _array(payload["contested"]),
        token_names=None if payload["token_names"] is None else tuple(payload["token_names"]),
        minimal_pairs=None if pools is None else MinimalPairs(
            _parallel(pools["pairs"]), _array(pools["scored"]), _array(pools["translation"]), _array(pools["word"])),
    )
