"""Mean-pooled sentence vectors through the split vocabulary: a reference op and a fast op.

Sentences are a padded ``(batch, length)`` tensor of token ids with one language per sentence.
The reference gathers per-token vectors through ``SplitVocabulary.forward`` (the seed's
semantics) and averages them. The fast ops never materialise per-token vectors of the whole
batch: a mean is a weighted ``embedding_bag`` sum with weight ``1 / length`` (zero on padding),
and the split op is two bags: the control's over the shared rows with ``g / length`` taken
off the tokens that have a split row, and one over the split rows with weight ``g / length``.
Serving skips even that: ``SplitVocabulary.merged_table`` folds the gates into the rows, and
``MergedEmbedder`` (in ``embedder``) is one lookup and one bag.

Padding is a zero weight rather than ``padding_idx``: ``padding_idx`` moves CPU
``embedding_bag`` off its fbgemm kernel onto a path several times slower.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.mechanisms.vocab.split_vocabulary import SplitVocabulary


def mean_weights(token_ids: torch.Tensor, padding_idx: int, dtype: torch.dtype) -> torch.Tensor:
    """Per-token weight ``1 / length`` of its sentence, zero on padding: a mean as a weighted sum."""
    real = token_ids.ne(padding_idx)
    return real.to(dtype).div_(real.sum(1, keepdim=True).clamp_(min=1))


def language_rows(lookup: torch.Tensor, token_ids: torch.Tensor, languages: torch.Tensor) -> torch.Tensor:
    """``lookup[language, token]`` per token, flat: one ``index_select`` on flat views, several times
    cheaper than advanced indexing at these sizes."""
    pair = torch.add(token_ids, languages.unsqueeze(1), alpha=lookup.shape[1])
    return lookup.view(-1).index_select(0, pair.view(-1))


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
    """Same values and gradients as ``pooled_split_reference``: two bags and no host sync.

    Per token, ``g`` is its split row's gate (fusion mode: 1) or 0 where the pair has no split
    row. The first bag is the control's over the shared rows with weight ``(1 - g) / length``;
    the second runs over the split rows with weight ``g / length``, every token without a split
    row pointing at row 0 with weight 0. That second bag reads a few distinct rows, almost all
    cache-hot, so it costs a sixth of the first; it is cheaper than compacting the hits with
    ``nonzero`` (a host sync plus a handful of small ops, each 3-8 µs against a ~150 µs bag),
    which this op did until task v6. A weight of exactly 0 adds exactly 0 to values and gradients.
    """
    batch, length = token_ids.shape
    offsets = torch.arange(0, batch * length, length, device=token_ids.device)
    weight = mean_weights(token_ids, padding_idx, table.dtype).view(-1)
    row = language_rows(split.lookup, token_ids, languages)
    has_row = row.ge(0)
    row = row.clamp_(min=0)
    if use_gate:
        gate = torch.sigmoid(split.gate_logit.index_select(0, row)) * has_row
    else:
        gate = has_row.to(table.dtype)
    split_weight = weight * gate
    pooled = F.embedding_bag(token_ids.view(-1), table, offsets, mode="sum",
                             per_sample_weights=weight - split_weight)
    return pooled.add_(F.embedding_bag(row, split.rows, offsets, mode="sum",
                                       per_sample_weights=split_weight))
