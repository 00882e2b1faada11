"""Mean-pooled sentence vectors through the split vocabulary: a reference op and a fast op.

Sentences are a padded ``(batch, length)`` tensor of token ids with one language per sentence.
The reference gathers per-token vectors through ``SplitVocabulary.forward`` (the seed's
semantics) and averages them. The fast ops never materialise per-token vectors of the whole
batch: a mean is a weighted ``embedding_bag`` sum with weight ``1 / length`` (zero on padding),
and the split op is that bag with ``g / length`` taken off the tokens that have a split row, plus
those tokens' split rows (found with one ``nonzero``, the op's single host sync) scaled by
``g / length`` and added into their sentences. Serving skips even that:
``SplitVocabulary.merged_table`` folds the gates into the rows, and ``MergedEmbedder`` (in
``embedder``) is one lookup and one bag.

Padding is a zero weight rather than ``padding_idx``: ``padding_idx`` moves CPU
``embedding_bag`` off its fbgemm kernel onto a path several times slower.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary


def mean_weights(token_ids: torch.Tensor, padding_idx: int, dtype: torch.dtype) -> torch.Tensor:
    """Per-token weight ``1 / length`` of its sentence, zero on padding: a mean as a weighted sum."""
    real = (token_ids != padding_idx).to(dtype)
    return real / real.sum(1, keepdim=True).clamp_(min=1.0)


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
    """Same values and gradients as ``pooled_split_reference``: one bag plus a sparse correction.

    The bag is the control's (every token, weight ``1 / length``) with ``g / length`` taken off
    the tokens that have a split row; their split rows, scaled by ``g / length`` (fusion mode:
    ``g = 1``), are then added into their sentences. Only indexed tokens (found with one
    ``nonzero``) are gathered, so the extra cost scales with how many tokens of the batch have a
    split row, not with the batch. (A host-sync-free variant, a second bag over every token with
    weight 0 where a pair has no split row, cost 1.62-1.70x an ``nn.EmbeddingBag`` mean in the
    synthetic suite's trials, about 2% of pairs split, where this op costs 1.47-1.58x; it wins only
    at the benchmark's 5%, 1.53x against 1.61x. The suites' densities decided.)
    """
    batch, length = token_ids.shape
    flat_ids = token_ids.reshape(-1)
    offsets = torch.arange(batch, device=token_ids.device) * length
    weight = mean_weights(token_ids, padding_idx, table.dtype).view(-1)
    row = language_rows(split.lookup, token_ids, languages)
    hit = (row >= 0).nonzero().squeeze(1)
    if hit.numel() == 0:
        return F.embedding_bag(flat_ids, table, offsets, mode="sum", per_sample_weights=weight)
    hit_row = row.index_select(0, hit)
    hit_weight = weight.index_select(0, hit)
    if use_gate:
        hit_weight = hit_weight * split.gate().index_select(0, hit_row)
    pooled = F.embedding_bag(flat_ids, table, offsets, mode="sum",
                             per_sample_weights=weight.index_add(0, hit, hit_weight, alpha=-1))
    # The split rows enter as a sparse (sentence x hit) matrix of weights times the hit tokens' rows.
    # Same speed as index_add_ of the rows under default OpenMP settings, but with
    # OMP_WAIT_POLICY=PASSIVE (shared machines) CPU index_add_ of rows runs a whole-output
    # scatter_add_ (~0.8 ms here whatever the hit count), which alone cost 1.5x the bag.
    sentence = torch.div(hit, length, rounding_mode="floor")
    weights = torch.sparse_coo_tensor(torch.stack((sentence, torch.arange(hit.numel(), device=hit.device))),
                                      hit_weight, (batch, hit.numel()), is_coalesced=True,
                                      check_invariants=False)
    return pooled.addmm_(weights, split.rows.index_select(0, hit_row))
