"""Rank statistics for judging a score against a truth (the gate vs the contested set)."""
from __future__ import annotations

import numpy as np
from scipy.stats import rankdata, spearmanr


def auroc(scores: np.ndarray, truth: np.ndarray) -> float:
    """Probability a random positive outscores a random negative (ties count half); NaN if one class."""
    positives, negatives = int(truth.sum()), int((~truth).sum())
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[truth].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def auprc(scores: np.ndarray, truth: np.ndarray) -> float:
    """Average precision: mean precision at the rank of each positive (ties broken pessimistically)."""
    positives = int(truth.sum())
    if positives == 0:
        return float("nan")
    order = np.lexsort((truth, -scores))  # among equal scores, negatives first
    hits = truth[order]
    precision = np.cumsum(hits) / np.arange(1, hits.size + 1)
    return float(precision[hits].sum() / positives)


def spearman(first: np.ndarray, second: np.ndarray) -> float:
    """Spearman rank correlation; NaN when either side is constant or too short."""
    if first.size < 3 or np.ptp(first) == 0 or np.ptp(second) == 0:
        return float("nan")
    return float(spearmanr(first, second).statistic)
