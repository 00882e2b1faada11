"""Interference scores per seed, measured on the control before any split model trains (the task
caches them: every arm of a seed shares one measurement)."""
from __future__ import annotations

import numpy as np

from harness.tasks.vocab.mechanism.embedder import StaticEmbedder
from harness.tasks.vocab.mechanism.interference import (CandidatePairs, conflict_scores,
                                                   per_language_row_gradients)
from harness.tasks.base import TrialContext
from harness.tasks.vocab.corpus import PAD, Corpus
from harness.tasks.vocab.training import TrainConfig, batches, initial_table, train


def measure_interference(corpus: Corpus, candidates: CandidatePairs, dim: int, config: TrainConfig,
                         measure_batches: int, ctx: TrialContext, log_every: int) -> np.ndarray:
    """Train the control for ``config.steps`` on the arms' batches, then score candidates by
    per-language gradient conflict on the batches that follow."""
    control = StaticEmbedder(initial_table(corpus.vocab_size, dim, ctx.stream("initial-table"), ctx.device), PAD)
    stream = batches(corpus.train, config.batch_size, ctx.numpy_stream("batches"), ctx.device)
    train(control, stream, config, ctx, name="interference", log_every=log_every)
    grads = per_language_row_gradients(control.table, (next(stream) for _ in range(measure_batches)),
                                       corpus.n_languages, PAD, config.scale)
    return conflict_scores(grads, candidates)

