"""Mean-pooled sentence vectors through the split vocabulary: a reference op and a fast op.

Sentences are a padded ``(batch, length)`` tensor of token ids with one language per sentence.
The reference gathers per-token vectors through ``SplitVocabulary.forward`` (the seed's
semantics) and averages them. The fast ops never materialise per-token vectors: a mean is a
weighted ``embedding_bag`` sum with weight ``1 / length`` (zero on padding), and the split op is
two such sums, over the shared table with ``(1 - g) / length`` and over the split rows with
``g / length`` (zero for tokens without a split row). They never sync with the host.

Padding is a zero weight rather than ``padding_idx`` because ``padding_idx`` sends CPU
``embedding_bag`` off its fbgemm kernel onto a loop several times slower.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.mechanisms.vocab.split_vocabulary import SplitVocabulary


def mean_weights(token_ids: torch.Tensor, padding_idx: int, dtype: torch.dtype) -> torch.Tensor:
    """Per-token weight ``1 / length`` of its sentence, zero on padding: a mean as a weighted sum."""
    real = (token_ids != padding_idx).to(dtype)
    return real / real.sum(1, keepdim=True).clamp(min=1.0)


def pooled_shared(table: torch.Tensor, token_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """The control: mean of shared rows over the non-padding tokens of each sentence."""
    return F.embedding_bag(token_ids, table, mode="sum",
                           per_sample_weights=mean_weights(token_ids, padding_idx, table.dtype))


def pooled_split_reference(split: SplitVocabulary, table: torch.Tensor, token_ids: torch.Tensor,
                           languages: torch.Tensor, padding_idx: int,
                           use_gate: bool = True) -> torch.Tensor:
    """Masked mean of ``split.forward`` per-token vectors (slow, literal)."""
    lang_per_token = languages.unsqueeze(1).expand_as(token_ids)
    vectors = split(token_ids, lang_per_token, table[token_ids], use_gate=use_gate)
    mask = (token_ids != padding_idx).unsqueeze(-1).to(vectors.dtype)
    return (vectors * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def pooled_split(split: SplitVocabulary, table: torch.Tensor, token_ids: torch.Tensor,
                 languages: torch.Tensor, padding_idx: int, use_gate: bool = True) -> torch.Tensor:
    """Same values and gradients as ``pooled_split_reference``, as two weighted bag sums.

    Assumes the padding token has no split row (``StaticEmbedder`` refuses such an index).
    """
    weight = mean_weights(token_ids, padding_idx, table.dtype)
    row = flat_gather(split.lookup.view(-1), torch.add(token_ids, languages.unsqueeze(1), alpha=split.vocab_size))
    safe_row = row.clamp(min=0)
    split_weight = weight * (row >= 0)
    if use_gate:
        split_weight = split_weight * flat_gather(split.gate(), safe_row)
    shared_weight = weight - split_weight
    shared_part = F.embedding_bag(token_ids, table, mode="sum", per_sample_weights=shared_weight)
    split_part = F.embedding_bag(safe_row, split.rows, mode="sum", per_sample_weights=split_weight)
    return shared_part.add_(split_part)


def flat_gather(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values[index]`` for a 1-d ``values``: ``index_select`` is several times cheaper than indexing."""
    return values.index_select(0, index.reshape(-1)).view(index.shape)
