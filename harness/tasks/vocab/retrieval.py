"""Bitext retrieval on held-out pairs: top-1 cosine nearest neighbour within each pool."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def _ranks(similarity: torch.Tensor) -> torch.Tensor:
    """1-based rank of the true partner (the diagonal) in each row; ties count against it."""
    correct = similarity.diagonal().unsqueeze(1)
    return (similarity >= correct).sum(1)


def retrieval_ranks(source: torch.Tensor, target: torch.Tensor,
                    group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks of the partner for every pair, source->target and target->source, pool by pool."""
    forward = np.zeros(len(group), dtype=np.int64)
    backward = np.zeros(len(group), dtype=np.int64)
    source, target = F.normalize(source, dim=1), F.normalize(target, dim=1)
    for pool in np.unique(group):
        members = np.flatnonzero(group == pool)
        index = torch.from_numpy(members).to(source.device)
        similarity = source[index] @ target[index].T
        forward[members] = _ranks(similarity).cpu().numpy()
        backward[members] = _ranks(similarity.T).cpu().numpy()
    return forward, backward


def retrieval_metrics(forward: np.ndarray, backward: np.ndarray, selected: np.ndarray,
                      prefix: str) -> dict[str, float]:
    """acc@1 each way and both, and MRR, over the queries in ``selected``."""
    if not selected.any():
        return {}
    fwd, bwd = forward[selected], backward[selected]
    acc_fwd, acc_bwd = float(np.mean(fwd == 1)), float(np.mean(bwd == 1))
    return {
        f"{prefix}acc1@fwd": acc_fwd,
        f"{prefix}acc1@bwd": acc_bwd,
        f"{prefix}acc1@both": 0.5 * (acc_fwd + acc_bwd),
        f"{prefix}mrr": float(0.5 * (np.mean(1.0 / fwd) + np.mean(1.0 / bwd))),
    }
