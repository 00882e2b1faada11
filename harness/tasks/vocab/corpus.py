"""The data every vocab workload produces: padded parallel sentences plus what is true about them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

PAD = 0


@dataclass(frozen=True)
class ParallelSet:
    """Aligned sentence pairs; ``group`` names the language pair (or retrieval pool) of each pair."""

    source: np.ndarray  # (pairs, length) token ids, PAD-padded
    source_language: np.ndarray  # (pairs,)
    target: np.ndarray
    target_language: np.ndarray
    group: np.ndarray  # (pairs,) retrieval pool id: candidates come from the same pool

    def __len__(self) -> int:
        return int(self.source_language.size)

    def rows(self, index: np.ndarray, group: np.ndarray) -> "ParallelSet":
        """The pairs at ``index`` (repeats allowed) regrouped into the pools ``group``."""
        return ParallelSet(self.source[index], self.source_language[index], self.target[index],
                           self.target_language[index], group)


@dataclass(frozen=True)
class MinimalPairs:
    """Contested retrieval pools (``pairs.group``); only the ``scored`` pairs are queries, the rest
    (training pairs) are candidates a query must tell its partner from."""

    pairs: ParallelSet
    scored: np.ndarray
    translation: np.ndarray  # each member's index among the workload's translations (fixed by the data)
    word: np.ndarray  # each member's pool word: (word, translation) names one contested item

    def __len__(self) -> int:
        return int(self.scored.sum())


@dataclass(frozen=True)
class Corpus:
    """A multilingual workload. ``contested`` is a (languages, vocab) truth mask, or None when unknown."""

    name: str
    languages: tuple[str, ...]
    vocab_size: int
    train: ParallelSet
    test: ParallelSet
    contested: np.ndarray | None
    token_names: tuple[str, ...] | None = None  # the word each token id stands for, when it has one
    minimal_pairs: MinimalPairs | None = None  # contested test pools of their own (multiway.minimal_pair_pools)

    @property
    def n_languages(self) -> int:
        return len(self.languages)

    def counts(self) -> np.ndarray:
        """(languages, vocab) occurrences of each token in each language's training sentences."""
        counts = np.zeros((self.n_languages, self.vocab_size), dtype=np.int64)
        for ids, languages in ((self.train.source, self.train.source_language),
                               (self.train.target, self.train.target_language)):
            rows = np.repeat(languages, ids.shape[1])
            np.add.at(counts, (rows, ids.reshape(-1)), 1)
        counts[:, PAD] = 0
        return counts

    def usage(self) -> np.ndarray:
        """(languages, vocab) mask of the tokens each language uses in the training data."""
        return self.counts() > 0

    def contested_pairs_mask(self, split: ParallelSet) -> np.ndarray | None:
        """Which pairs of ``split`` contain a contested (language, token) on either side."""
        if self.contested is None:
            return None
        source_hit = self.contested[split.source_language[:, None], split.source].any(1)
        target_hit = self.contested[split.target_language[:, None], split.target].any(1)
        return source_hit | target_hit


def pad_sentences(sentences: Sequence[Sequence[int]]) -> np.ndarray:
    """Stack token lists into a PAD-padded int64 matrix."""
    width = max((len(s) for s in sentences), default=1)
    out = np.full((len(sentences), max(width, 1)), PAD, dtype=np.int64)
    for i, sentence in enumerate(sentences):
        out[i, : len(sentence)] = sentence
    return out


def refuse_unknown(kind: str, asked: Sequence[str], valid: Sequence[str]) -> None:
    """ValueError naming what was not recognised and listing every valid choice."""
    unknown = [name for name in asked if name not in set(valid)]
    if unknown:
        raise ValueError(f"unknown {kind} {unknown}; valid {kind}: {', '.join(sorted(valid))}")
