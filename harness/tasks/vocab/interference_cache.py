"""Interference scores per seed, measured once on the control and shared by every arm."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from harness.mechanisms.vocab.embedder import StaticEmbedder
from harness.mechanisms.vocab.interference import (CandidatePairs, conflict_scores,
                                                   per_language_row_gradients)
from harness.tasks.vocab.corpus import PAD, Corpus
from harness.tasks.vocab.training import TrainConfig, batches, initial_table, train


def cache_path(cache_dir: Path, identity: Mapping[str, Any]) -> Path:
    """File name keyed by everything that determines the scores."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"vocab-interference-{digest}.npz"


def measure_interference(corpus: Corpus, candidates: CandidatePairs, dim: int, config: TrainConfig,
                         measure_batches: int, seed: int, device: torch.device) -> np.ndarray:
    """Train the control for ``config.steps``, then score candidates by per-language gradient conflict."""
    control = StaticEmbedder(initial_table(corpus.vocab_size, dim, seed, device), PAD)
    stream = batches(corpus.train, config.batch_size, seed, device)
    train(control, stream, config)
    grads = per_language_row_gradients(control.table, (next(stream) for _ in range(measure_batches)),
                                       corpus.n_languages, PAD, config.scale)
    return conflict_scores(grads, candidates)


def cached_interference(cache_dir: Path, identity: Mapping[str, Any], corpus: Corpus,
                        candidates: CandidatePairs, dim: int, config: TrainConfig, measure_batches: int,
                        seed: int, device: torch.device) -> np.ndarray:
    """Scores from the cache when present (same identity), else measured and written atomically."""
    path = cache_path(cache_dir, identity)
    if path.exists():
        with np.load(path) as data:
            if (np.array_equal(data["language"], candidates.language)
                    and np.array_equal(data["token"], candidates.token)):
                return data["score"]
    scores = measure_interference(corpus, candidates, dim, config, measure_batches, seed, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
    np.savez(tmp, language=candidates.language, token=candidates.token, score=scores)
    tmp.replace(path)
    return scores
