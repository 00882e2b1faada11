"""Mean-pooled sentence vectors through the split vocabulary: a reference op and a fast op.

Sentences are a padded ``(batch, length)`` tensor of token ids with one language per sentence.
The reference gathers per-token vectors through ``SplitVocabulary.forward`` (the seed's
semantics) and averages them. The fast ops never materialise per-token vectors: a mean is a
weighted ``embedding_bag`` sum with weight ``1 / length`` (zero on padding), and the split op is
two such sums sharing one set of bag offsets, over the shared table with ``(1 - g) / length``
and over the split rows with ``g / length`` (zero for tokens without a split row). Every
per-token quantity is one small elementwise or ``index_select`` kernel, and nothing syncs with
the host.

Padding is a zero weight rather than ``padding_idx``: ``padding_idx`` moves CPU
``embedding_bag`` off its fbgemm kernel onto a path several times slower.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.mechanisms.vocab.split_vocabulary import SplitVocabulary


def mean_weights(token_ids: torch.Tensor, padding_idx: int, dtype: torch.dtype) -> torch.Tensor:
    """Per-token weight ``1 / length`` of its sentence, zero on padding: a mean as a weighted sum."""
    real = (token_ids != padding_idx).to(dtype)
    return real / real.sum(1, keepdim=True).clamp_(min=1.0)


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
    """Same values and gradients as ``pooled_split_reference``, as two weighted bag sums."""
    batch, length = token_ids.shape
    offsets = torch.arange(batch, device=token_ids.device) * length
    weight = mean_weights(token_ids, padding_idx, table.dtype).view(-1)
    pair = torch.add(token_ids, languages.unsqueeze(1), alpha=split.vocab_size).view(-1)
    # index_select on flat views: several times cheaper than advanced indexing for these sizes.
    row = split.lookup.view(-1).index_select(0, pair)
    has_row = row >= 0
    safe_row = row.clamp(min=0)
    if use_gate:
        split_weight = torch.where(has_row, split.gate().index_select(0, safe_row), 0.0) * weight
    else:
        split_weight = has_row * weight
    shared_part = F.embedding_bag(token_ids.reshape(-1), table, offsets, mode="sum",
                                  per_sample_weights=weight - split_weight)
    split_part = F.embedding_bag(safe_row, split.rows, offsets, mode="sum", per_sample_weights=split_weight)
    return shared_part.add_(split_part)
