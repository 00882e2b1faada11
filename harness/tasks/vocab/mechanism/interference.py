"""Interference measured on the shared-table control, before any split model trains.

Each shared row receives gradient from every language that uses its token. Splitting the
gradient by language shows whether the languages pull the row the same way (a cognate) or
against each other (a false friend). A (language, token) pair scores ``-cos(g_l, mean of the
other languages' g)``: +1 for a language pulling straight against the rest, -1 for agreement.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch
import torch.nn.functional as F

from harness.tasks.vocab.mechanism.embedder import symmetric_info_nce


@dataclass(frozen=True)
class CandidatePairs:
    """(language, token) pairs whose token more than one language uses: the only ones a split can help."""

    language: np.ndarray
    token: np.ndarray

    def __len__(self) -> int:
        return int(self.language.size)


def candidate_pairs(usage: np.ndarray) -> CandidatePairs:
    """From a (languages, vocab) boolean usage matrix, the pairs of tokens shared by 2+ languages."""
    shared_tokens = usage.sum(0) >= 2
    language, token = np.nonzero(usage & shared_tokens[None, :])
    return CandidatePairs(language.astype(np.int64), token.astype(np.int64))


def per_language_row_gradients(table: torch.Tensor, batches: Iterable[tuple[torch.Tensor, ...]],
                               n_languages: int, padding_idx: int, scale: float) -> torch.Tensor:
    """Sum over batches of d(loss)/d(shared row), split by the language of the reading token.

    Each batch is ``(source_ids, source_lang, target_ids, target_lang)``; the loss is the same
    symmetric InfoNCE the models train on. Returns ``(n_languages, vocab, dim)``.
    """
    vocab_size, dim = table.shape
    weights = table.detach()
    grads = torch.zeros(n_languages * vocab_size, dim, dtype=weights.dtype, device=weights.device)
    for source_ids, source_lang, target_ids, target_lang in batches:
        ids = torch.cat([source_ids, target_ids])
        languages = torch.cat([source_lang, target_lang])
        token_vectors = F.embedding(ids, weights).requires_grad_(True)
        mask = (ids != padding_idx).unsqueeze(-1).to(weights.dtype)
        pooled = (token_vectors * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        half = source_ids.shape[0]
        loss = symmetric_info_nce(pooled[:half], pooled[half:], scale)
        (token_grad,) = torch.autograd.grad(loss, token_vectors)
        slot = languages.unsqueeze(1) * vocab_size + ids
        grads.index_add_(0, slot.reshape(-1), token_grad.reshape(-1, dim))
    return grads.view(n_languages, vocab_size, dim)


def conflict_scores(grads: torch.Tensor, pairs: CandidatePairs) -> np.ndarray:
    """``-cos(g[l, w], mean of g[l', w] over the other languages that touched w)`` per pair.

    A pair whose language, or all of whose partner languages, left no gradient scores 0
    (no evidence either way).
    """
    language = torch.from_numpy(pairs.language).to(grads.device)
    token = torch.from_numpy(pairs.token).to(grads.device)
    touched = grads.abs().sum(-1) > 0  # (languages, vocab)
    own = grads[language, token]
    column_sum = grads[:, token].sum(0)
    others = touched[:, token].sum(0) - touched[language, token].to(torch.long)
    other_mean = (column_sum - own) / others.clamp(min=1).unsqueeze(1).to(grads.dtype)
    score = -F.cosine_similarity(own, other_mean, dim=1, eps=1e-12)
    valid = touched[language, token] & (others > 0)
    return torch.where(valid, score, torch.zeros_like(score)).cpu().numpy().astype(np.float64)


def top_pairs(pairs: CandidatePairs, scores: np.ndarray, size: int) -> CandidatePairs:
    """The ``size`` highest-scoring pairs (ties broken by position, so the choice is reproducible)."""
    order = np.argsort(-scores, kind="stable")[:size]
    order.sort()
    return CandidatePairs(pairs.language[order], pairs.token[order])
