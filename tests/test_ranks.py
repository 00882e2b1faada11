"""Rank statistics against their textbook definitions."""
from __future__ import annotations

import numpy as np

from harness.measure.ranks import auroc, average_ranks, spearman


def test_average_ranks_share_ties():
    assert average_ranks(np.array([10.0, 20.0, 10.0, 5.0])).tolist() == [2.5, 4.0, 2.5, 1.0]


def test_spearman_matches_the_no_ties_formula_and_sign():
    rng = np.random.default_rng(0)
    a, b = rng.permutation(50).astype(float), rng.permutation(50).astype(float)
    d = average_ranks(a) - average_ranks(b)
    assert np.isclose(spearman(a, b), 1 - 6 * (d**2).sum() / (50 * (50**2 - 1)))
    assert spearman(a, -a) == -1.0 and spearman(a, 2 * a + 1) == 1.0
    assert np.isnan(spearman(a, np.ones(50)))


def test_auroc_counts_pairs_with_ties_as_half():
    scores = np.array([0.1, 0.4, 0.4, 0.9])
    truth = np.array([False, True, False, True])
    pairs = [(p, n) for p in scores[truth] for n in scores[~truth]]
    brute = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs])
    assert auroc(scores, truth) == brute
    assert np.isnan(auroc(scores, np.ones(4, dtype=bool)))
