"""Guessing a value from the context: the expected recall counts the distinct values shown before each
query, checked against a direct count on sequences where values repeat."""
from __future__ import annotations

import pytest
import torch

from harness.tasks.er2.data import RecallLayout, guess_from_context_recall, recall_batch, recall_mixture_batch


def _counted(layout: RecallLayout, tokens: torch.Tensor, answers: torch.Tensor) -> list[float]:
    """Per sequence, the mean over its queries of 1 / (distinct values up to and including the query)."""
    out = []
    for row, asked in zip(tokens.tolist(), answers.tolist()):
        shares = []
        for t, is_query in enumerate(asked):
            if is_query:
                seen = {token for token in row[: t + 1] if layout.num_keys <= token < layout.filler}
                shares.append(1.0 / max(len(seen), 1))
        out.append(sum(shares) / max(len(shares), 1))
    return out


@pytest.mark.parametrize("keys, pairs, length", [(4, 3, 16), (16, 8, 64), (64, 20, 96)])
def test_guess_recall_equals_a_direct_count(keys: int, pairs: int, length: int):
    layout = RecallLayout(num_keys=keys, num_values=keys)  # few values: they repeat within a sequence
    generator = torch.Generator().manual_seed(keys)
    for tokens, answers in (recall_batch(layout, 6, length, pairs, generator),
                            recall_mixture_batch(layout, 6, length, (1, pairs), generator)):
        assert guess_from_context_recall(layout, tokens, answers).tolist() == pytest.approx(
            _counted(layout, tokens, answers), rel=1e-6)


def test_a_sequence_without_queries_guesses_nothing():
    layout = RecallLayout(num_keys=4, num_values=4)
    tokens = torch.full((1, 6), layout.filler)
    assert guess_from_context_recall(layout, tokens, torch.zeros(1, 6, dtype=torch.bool)).tolist() == [0.0]
