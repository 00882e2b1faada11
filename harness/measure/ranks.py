"""Rank statistics shared by the tasks: does a score order items the way the truth does?"""
from __future__ import annotations

import numpy as np


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    _, inverse, counts = np.unique(np.asarray(values).ravel(), return_inverse=True, return_counts=True)
    ends = np.cumsum(counts).astype(np.float64)
    return ((ends - counts + 1 + ends) / 2)[inverse]


def auroc(scores: np.ndarray, truth: np.ndarray) -> float:
    """Probability a random positive outscores a random negative (ties count half); NaN if one class."""
    truth = np.asarray(truth, dtype=bool).ravel()
    positives, negatives = int(truth.sum()), int((~truth).sum())
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = average_ranks(np.asarray(scores, dtype=np.float64))
    return float((ranks[truth].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def auprc(scores: np.ndarray, truth: np.ndarray) -> float:
    """Average precision: mean precision at the rank of each positive (ties broken pessimistically)."""
    truth = np.asarray(truth, dtype=bool).ravel()
    positives = int(truth.sum())
    if positives == 0:
        return float("nan")
    order = np.lexsort((truth, -np.asarray(scores, dtype=np.float64).ravel()))  # equal scores: negatives first
    hits = truth[order]
    precision = np.cumsum(hits) / np.arange(1, hits.size + 1)
    return float(precision[hits].sum() / positives)


def spearman(first: np.ndarray, second: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties; NaN when either side is constant or too short."""
    first, second = np.asarray(first, dtype=np.float64).ravel(), np.asarray(second, dtype=np.float64).ravel()
    if first.size < 3 or np.ptp(first) == 0 or np.ptp(second) == 0:
        return float("nan")
    a, b = average_ranks(first), average_ranks(second)
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))
