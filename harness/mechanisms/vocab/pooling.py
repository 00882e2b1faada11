"""Mean-pooled sentence vectors through the split vocabulary: a reference op and a fast op.

Sentences are a padded ``(batch, length)`` tensor of token ids with one language per sentence.
The reference gathers per-token vectors through ``SplitVocabulary.forward`` (the seed's
semantics) and averages them. The fast op never materialises per-token vectors: it is two
weighted ``embedding_bag`` sums, one over the shared table with weight ``(1 - g) / length``
and one over the split rows with weight ``g / length`` (zero for tokens without a split row),
so its cost stays close to a plain ``nn.EmbeddingBag`` mean and it never syncs with the host.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.mechanisms.vocab.split_vocabulary import SplitVocabulary


def pooled_shared(table: torch.Tensor, token_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """The control: mean of shared rows over the non-padding tokens of each sentence."""
    return F.embedding_bag(token_ids, table, mode="mean", padding_idx=padding_idx)


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
    flat = languages.unsqueeze(1) * split.vocab_size + token_ids
    row = split.lookup.view(-1)[flat]
    has_row = (row >= 0).to(table.dtype)
    safe_row = row.clamp(min=0)
    inv_length = 1.0 / (token_ids != padding_idx).sum(1, keepdim=True).clamp(min=1).to(table.dtype)
    mix = has_row * inv_length
    if use_gate:
        mix = split.gate()[safe_row] * mix
    shared_weight = inv_length.expand_as(mix) - mix
    shared_part = F.embedding_bag(token_ids, table, mode="sum", per_sample_weights=shared_weight,
                                  padding_idx=padding_idx)
    split_part = F.embedding_bag(safe_row, split.rows, mode="sum", per_sample_weights=mix)
    return shared_part + split_part
