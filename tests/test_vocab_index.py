"""Bad split indexes are refused with the key or the pair at fault."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary


def write(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def test_missing_key_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "i.npz", language_index=np.array([0, 1]))
    with pytest.raises(ValueError, match="token_index"):
        SplitVocabulary(path, vocab_size=10, dim=4, n_languages=2)


@pytest.mark.parametrize("languages, tokens, key", [
    ([0, 2], [1, 2], "language_index"),
    ([0, 1], [1, 10], "token_index"),
    ([0, -1], [1, 2], "language_index"),
])
def test_out_of_range_is_named(tmp_path: Path, languages: list[int], tokens: list[int], key: str) -> None:
    path = write(tmp_path / "i.npz", language_index=np.array(languages), token_index=np.array(tokens))
    with pytest.raises(ValueError, match=key):
        SplitVocabulary(path, vocab_size=10, dim=4, n_languages=2)


def test_duplicate_pair_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "i.npz", language_index=np.array([0, 1, 1]), token_index=np.array([3, 7, 7]))
    with pytest.raises(ValueError, match=r"\(1, 7\)"):
        SplitVocabulary(path, vocab_size=10, dim=4, n_languages=2)


def test_mismatched_lengths_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "i.npz", language_index=np.array([0, 1]), token_index=np.array([3]))
    with pytest.raises(ValueError, match="differ in length"):
        SplitVocabulary(path, vocab_size=10, dim=4, n_languages=2)
