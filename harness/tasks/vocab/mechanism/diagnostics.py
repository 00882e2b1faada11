"""What a trained split vocabulary did: per-pair openness, vocabularies kept apart, drift.

Everything is read from the *effective* rows E'[w, l] (the vector language l actually uses for
token w), so the same definitions apply to the shared control, gated and fusion modes.
"""
from __future__ import annotations

import numpy as np
import torch

from harness.tasks.vocab.mechanism.embedder import StaticEmbedder
from harness.tasks.vocab.mechanism.interference import CandidatePairs


@torch.no_grad()
def effective_rows(model: StaticEmbedder, pairs: CandidatePairs) -> torch.Tensor:
    """E'[w, l] for each candidate pair, as ``(len(pairs), dim)``."""
    device = model.table.device
    token = torch.from_numpy(pairs.token).to(device)
    language = torch.from_numpy(pairs.language).to(device)
    shared = model.table[token]
    if model.split is None:
        return shared.clone()
    return model.split(token, language, shared, use_gate=model.use_gate)


@torch.no_grad()
def openness(model: StaticEmbedder, pairs: CandidatePairs) -> np.ndarray:
    """How far each pair left the shared row: its gate (gated mode, 0 when not indexed), or its
    relative distance from the token's consensus row across languages (fusion mode)."""
    if model.split is None:
        return np.zeros(len(pairs))
    if model.use_gate:
        device = model.split.lookup.device
        row = model.split.lookup[torch.from_numpy(pairs.language).to(device),
                                 torch.from_numpy(pairs.token).to(device)]
        gate = model.split.gate()[row.clamp(min=0)] * (row >= 0)
        return gate.cpu().numpy().astype(np.float64)
    rows = effective_rows(model, pairs)
    centroid = _token_centroids(rows, pairs.token)
    return ((rows - centroid).norm(dim=1) / centroid.norm(dim=1).clamp(min=1e-12)).cpu().numpy()


def _token_centroids(rows: torch.Tensor, tokens: np.ndarray) -> torch.Tensor:
    _, group = np.unique(tokens, return_inverse=True)
    group_t = torch.from_numpy(group).to(rows.device)
    n_groups = int(group.max()) + 1 if group.size else 0
    sums = rows.new_zeros(n_groups, rows.shape[1]).index_add(0, group_t, rows)
    counts = rows.new_zeros(n_groups).index_add(0, group_t, torch.ones(len(group), device=rows.device))
    return (sums / counts.unsqueeze(1))[group_t]


@torch.no_grad()
def effective_vocabularies(model: StaticEmbedder, pairs: CandidatePairs, tolerance: float) -> float:
    """Mean over shared tokens of how many distinct rows their languages use.

    Rows closer than ``tolerance`` times the consensus norm are one row (single linkage), so
    the figure runs from 1 (one shared vocabulary) to the number of languages (one each).
    """
    if len(pairs) == 0:
        return 1.0
    rows = effective_rows(model, pairs)
    centroid_norm = _token_centroids(rows, pairs.token).norm(dim=1)
    counts = []
    for token in np.unique(pairs.token):
        members = np.flatnonzero(pairs.token == token)
        block = rows[torch.from_numpy(members).to(rows.device)]
        threshold = tolerance * float(centroid_norm[members[0]])
        counts.append(_single_linkage_clusters(torch.cdist(block, block).cpu().numpy(), threshold))
    return float(np.mean(counts))


def _single_linkage_clusters(distances: np.ndarray, threshold: float) -> int:
    """Connected components of the graph joining rows closer than ``threshold``."""
    n = distances.shape[0]
    label = np.arange(n)
    for i in range(n):
        for j in range(i + 1, n):
            if distances[i, j] <= threshold and label[i] != label[j]:
                label[label == label[j]] = label[i]
    return int(np.unique(label).size)


@torch.no_grad()
def relative_drift(initial: torch.Tensor, final: torch.Tensor, used_tokens: np.ndarray) -> float:
    """||E_T - E_0|| / ||E_0|| over the shared rows the data uses (the seed's "85% rewritten")."""
    index = torch.from_numpy(used_tokens).to(final.device)
    start = initial[index]
    return float((final[index] - start).norm() / start.norm().clamp(min=1e-12))


@torch.no_grad()
def rows_in_use(model: StaticEmbedder, tolerance: float) -> int:
    """How many split rows change what their language reads by more than ``tolerance`` (relative).

    Gated: the effective row moved off the shared row, ``||g (R - E[w])|| > tolerance ||E[w]||``
    (a closed gate or a row still equal to its shared row is not in use). Fused: the row is off its
    token's consensus (mean of the token's indexed rows) by more than ``tolerance`` of its norm.
    """
    split = model.split
    if split is None or split.n_rows == 0:
        return 0
    if model.use_gate:
        shared = model.table[split.row_token]
        moved = (split.gate().unsqueeze(1) * (split.rows - shared)).norm(dim=1)
        return int((moved > tolerance * shared.norm(dim=1)).sum())
    centroid = _token_centroids(split.rows, split.row_token.cpu().numpy())
    return int(((split.rows - centroid).norm(dim=1) > tolerance * centroid.norm(dim=1)).sum())
