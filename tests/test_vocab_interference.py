"""Interference scoring: a constructed conflict, and per-language gradients that add up."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from harness.tasks.vocab.mechanism.embedder import symmetric_info_nce
from harness.tasks.vocab.mechanism.interference import (candidate_pairs, conflict_scores, per_language_row_gradients,
                                                   top_pairs)


def test_opposed_languages_score_high_and_agreeing_ones_low() -> None:
    usage = np.zeros((3, 5), dtype=bool)
    usage[[0, 1], 1] = True  # token 1: a false friend between languages 0 and 1
    usage[:, 2] = True  # token 2: a cognate of all three languages
    usage[0, 3] = True  # token 3: one language only, never a candidate
    pairs = candidate_pairs(usage)
    assert set(zip(pairs.language.tolist(), pairs.token.tolist())) == {(0, 1), (1, 1), (0, 2), (1, 2), (2, 2)}
    grads = torch.zeros(3, 5, 4)
    grads[0, 1] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    grads[1, 1] = torch.tensor([-2.0, 0.0, 0.0, 0.0])
    grads[:, 2] = torch.tensor([0.0, 1.0, 1.0, 0.0])
    grads[2, 2, 3] = 0.1
    scores = conflict_scores(grads, pairs)
    by_pair = dict(zip(zip(pairs.language.tolist(), pairs.token.tolist()), scores.tolist()))
    assert np.isclose(by_pair[(0, 1)], 1.0) and np.isclose(by_pair[(1, 1)], 1.0)
    assert all(by_pair[(language, 2)] < -0.9 for language in range(3))
    chosen = top_pairs(pairs, scores, 2)
    assert chosen.token.tolist() == [1, 1]


def test_pair_without_gradient_scores_zero() -> None:
    usage = np.ones((2, 3), dtype=bool)
    grads = torch.zeros(2, 3, 2)
    grads[0, 1] = torch.tensor([1.0, 0.0])
    scores = conflict_scores(grads, candidate_pairs(usage))
    assert np.all(scores == 0.0)


def test_per_language_gradients_sum_to_the_table_gradient() -> None:
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(12, 5, dtype=torch.float64, generator=generator)
    source = torch.randint(1, 12, (8, 3), generator=generator)
    target = torch.randint(1, 12, (8, 3), generator=generator)
    source[:, 2] = 0
    source_lang = torch.randint(0, 3, (8,), generator=generator)
    target_lang = torch.randint(0, 3, (8,), generator=generator)
    grads = per_language_row_gradients(table, [(source, source_lang, target, target_lang)] * 2, 3, 0, 20.0)
    weights = table.clone().requires_grad_(True)
    loss = symmetric_info_nce(F.embedding_bag(source, weights, mode="mean", padding_idx=0),
                              F.embedding_bag(target, weights, mode="mean", padding_idx=0), 20.0)
    loss.backward()
    torch.testing.assert_close(grads.sum(0), 2 * weights.grad)
    used_by_language_zero = set(source[source_lang == 0].flatten().tolist()) | set(
        target[target_lang == 0].flatten().tolist())
    untouched = [t for t in range(1, 12) if t not in used_by_language_zero]
    assert torch.count_nonzero(grads[0, untouched]) == 0
