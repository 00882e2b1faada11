"""A multilingual static sentence embedder: token table, mean pooling, language known.

The split vocabulary plugs in as an optional module; without it this is the shared-table
control. Training uses the symmetric in-batch contrastive loss on translation pairs.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.tasks.vocab.mechanism.pooling import language_rows, pooled_shared, pooled_split
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary


class StaticEmbedder(nn.Module):
    """Sentence vector = mean of (possibly language-specific) token rows."""

    def __init__(self, table: torch.Tensor, padding_idx: int,
                 split: SplitVocabulary | None = None, use_gate: bool = True) -> None:
        super().__init__()
        self.table = nn.Parameter(table.clone())
        self.padding_idx = padding_idx
        self.split = split
        self.use_gate = use_gate
        if split is not None:
            if bool((split.row_token == padding_idx).any()):
                raise ValueError(f"the split index names the padding token {padding_idx}")
            split.seed_from(self.table.detach())

    def forward(self, token_ids: torch.Tensor, languages: torch.Tensor) -> torch.Tensor:
        if self.split is None:
            return pooled_shared(self.table, token_ids, self.padding_idx)
        return pooled_split(self.split, self.table, token_ids, languages, self.padding_idx,
                            use_gate=self.use_gate)

    def merged(self) -> "MergedEmbedder":
        """A frozen copy for serving (``SplitVocabulary.merged_table``); later training does not reach it."""
        return MergedEmbedder(self)

    def regulariser(self, l1_weight: float, fusion_weight: float) -> torch.Tensor:
        """The split vocabulary's penalty for this mode: gate L1 (gated) or fusion (ungated).

        Both are the seed's means over split rows: arms compared at one weight must hold indexes of
        one size (the suites' same-budget arms all hold k rows), or the per-row price differs.
        """
        if self.split is None:
            return self.table.new_zeros(())
        if self.use_gate:
            return l1_weight * self.split.penalty()
        return fusion_weight * self.split.fusion_penalty()


class MergedEmbedder(nn.Module):
    """A trained ``StaticEmbedder`` as it is served: one table, one (language, token) lookup, one bag.

    Same vectors as the model it was made from (tested against the per-token reference); the split
    arm's serving cost over the control is the lookup alone.
    """

    def __init__(self, model: StaticEmbedder) -> None:
        super().__init__()
        self.padding_idx = model.padding_idx
        table = model.table.detach()
        weight, remap = (table.clone(), None) if model.split is None else model.split.merged_table(table, model.use_gate)
        self.register_buffer("weight", weight)
        self.register_buffer("remap", remap)

    def forward(self, token_ids: torch.Tensor, languages: torch.Tensor) -> torch.Tensor:
        # The padding token maps to itself (StaticEmbedder refuses an index that names it), so the
        # control's pooled bag over the remapped ids is the split model's mean.
        if self.remap is not None:
            token_ids = language_rows(self.remap, token_ids, languages).view_as(token_ids)
        return pooled_shared(self.weight, token_ids, self.padding_idx)


def symmetric_info_nce(source: torch.Tensor, target: torch.Tensor, scale: float) -> torch.Tensor:
    """In-batch InfoNCE in both directions on cosine similarities times ``scale``."""
    logits = scale * F.normalize(source, dim=-1) @ F.normalize(target, dim=-1).T
    labels = torch.arange(logits.shape[0], device=logits.device)
    return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))
