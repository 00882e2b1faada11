"""The alignment count: a trivial index read off the bitext alone, with no model.

A cognate is usually translated by itself, so its token appears on both sides of a parallel pair
whenever both languages use it; a false friend almost never is. For a candidate (language l,
token t), over the training pairs with t on l's side whose other side's language also uses t,
the share that has t on the other side too is its alignment rate; one minus that rate is how
contested counting alone says the pair is. The real-data suites' contested proxy (disjoint
meanings) is this count at zero, so there an index built on it is close to the proxy's oracle.
"""
from __future__ import annotations

import numpy as np

from harness.tasks.vocab.mechanism.interference import CandidatePairs
from harness.tasks.vocab.corpus import PAD, ParallelSet


def misalignment(train: ParallelSet, usage: np.ndarray, candidates: CandidatePairs) -> np.ndarray:
    """Per candidate, 1 - its alignment rate in ``train`` (0 where no pair could show it: no evidence)."""
    eligible = np.zeros(usage.shape, dtype=np.int64)
    aligned = np.zeros(usage.shape, dtype=np.int64)
    for own, own_language, other, other_language in ((train.source, train.source_language, train.target,
                                                      train.target_language),
                                                     (train.target, train.target_language, train.source,
                                                      train.source_language)):
        on_both = (own[:, :, None] == other[:, None, :]).any(2)
        counted = (own != PAD) & usage[other_language[:, None], own]
        languages = np.broadcast_to(own_language[:, None], own.shape)
        np.add.at(eligible, (languages[counted], own[counted]), 1)
        np.add.at(aligned, (languages[counted & on_both], own[counted & on_both]), 1)
    seen = eligible[candidates.language, candidates.token]
    rate = aligned[candidates.language, candidates.token] / np.maximum(seen, 1)
    return np.where(seen > 0, 1.0 - rate, 0.0)
