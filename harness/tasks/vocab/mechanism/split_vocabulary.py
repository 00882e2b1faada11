"""A private row for each contested (language, token) pair, gated against the shared row.

    E'[w, l] = (1 - g) * E_shared[w] + g * E_split[idx(l, w)]

Split rows are free capacity rather than a correction the shared table could absorb. They start
as copies of their shared row (``seed_from``), so at step zero the model equals the shared-table
control whatever the gate, and the gate's gradient is exactly zero there. ``penalty`` (mean gate,
an L1) makes a row earn its keep; in fusion mode (``use_gate=False``) the private row replaces
the shared one and ``fusion_penalty`` merges rows that need not differ.

``forward`` is the reference semantics (per-token vectors); ``pooled_split`` in
``harness.tasks.vocab.mechanism.pooling`` is the fast path used for training and throughput.
"""
from __future__ import annotations

import os

import torch
from torch import nn

from harness.tasks.vocab.mechanism.index import load_index


class SplitVocabulary(nn.Module):
    """Gated private rows for the (language, token) pairs named by an index file."""

    def __init__(self, index_path: str | os.PathLike[str], vocab_size: int, dim: int,
                 n_languages: int, gate_init: float = 0.0) -> None:
        super().__init__()
        language_index, token_index = load_index(index_path, vocab_size, n_languages)
        self.vocab_size = vocab_size
        self.n_rows = int(language_index.size)
        languages = torch.from_numpy(language_index)
        tokens = torch.from_numpy(token_index)
        # -1 marks "shared row only", the vast majority of (language, token) pairs.
        lookup = torch.full((n_languages, vocab_size), -1, dtype=torch.long)
        lookup[languages, tokens] = torch.arange(self.n_rows)
        self.register_buffer("lookup", lookup, persistent=False)
        self.register_buffer("row_language", languages, persistent=False)
        self.register_buffer("row_token", tokens, persistent=False)
        self.rows = nn.Parameter(torch.zeros(self.n_rows, dim))
        self.gate_logit = nn.Parameter(torch.full((self.n_rows,), float(gate_init)))

    @torch.no_grad()
    def seed_from(self, table: torch.Tensor) -> None:
        """Start every split row as its shared row, so the model equals the control at step zero."""
        self.rows.copy_(table[self.row_token])

    def gate(self) -> torch.Tensor:
        return torch.sigmoid(self.gate_logit)

    def penalty(self) -> torch.Tensor:
        """Mean gate opening: an L1 whose per-row strength falls as the index grows (the seed's)."""
        return self.gate().mean()

    def fusion_penalty(self) -> torch.Tensor:
        """Group lasso of each row toward its token's mean row across the indexed languages.

        The per-token centroid is the O(L) stand-in for the all-pairs fused lasso: a row stays
        off the centroid only while the contrastive loss pays for the difference.
        """
        unique_tokens, group = torch.unique(self.row_token, return_inverse=True)
        n_groups = unique_tokens.numel()
        sums = self.rows.new_zeros(n_groups, self.rows.shape[1]).index_add(0, group, self.rows)
        counts = self.rows.new_zeros(n_groups).index_add(0, group, torch.ones_like(self.gate_logit))
        centroid = sums / counts.clamp(min=1.0).unsqueeze(1)
        return (self.rows - centroid[group]).norm(dim=1).mean()

    def forward(self, token_ids: torch.Tensor, lang_per_token: torch.Tensor,
                shared: torch.Tensor, use_gate: bool = True) -> torch.Tensor:
        """Per-token vectors: ``shared`` (the shared rows of ``token_ids``) with split rows mixed in."""
        row = self.lookup[lang_per_token, token_ids]
        has_row = row >= 0
        if not bool(has_row.any()):
            return shared
        private = self.rows[row.clamp(min=0)]
        if not use_gate:
            return torch.where(has_row.unsqueeze(-1), private, shared)
        gate = (self.gate()[row.clamp(min=0)] * has_row).unsqueeze(-1)
        return shared * (1.0 - gate) + private * gate

    @torch.no_grad()
    def merged_table(self, shared: torch.Tensor, use_gate: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """The serving form: ``shared`` followed by every split row as ``forward`` mixes it, and the
        ``(language, token)`` map to a row of that table (the token's own row where none is split).

        The gate is a training parametrisation, like a norm folded into the layer before it: once
        trained, ``E'[w, l]`` is one row, and an embedder serves it with one lookup and one bag.
        """
        private = self.rows
        if use_gate:
            gate = self.gate().unsqueeze(-1)
            private = shared[self.row_token] * (1.0 - gate) + private * gate
        own_row = torch.arange(self.vocab_size, device=self.lookup.device).expand_as(self.lookup)
        remap = torch.where(self.lookup >= 0, self.lookup + shared.shape[0], own_row)
        return torch.cat((shared, private)), remap

    def extra_repr(self) -> str:
        return f"rows={self.n_rows}"

