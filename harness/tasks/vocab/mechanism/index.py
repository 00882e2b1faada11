"""The split index: which (language, token) pairs get a private row.

The index is a file (``.npz`` with ``language_index`` and ``token_index``) so that it is chosen,
stored and inspected before the split model trains. Loading validates it, because a bad index
fails silently otherwise: an out-of-range id wraps or crashes deep in a gather, and a duplicate
pair leaves one of its two rows unreachable while still costing parameters.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

INDEX_KEYS = ("language_index", "token_index")


def validate_index(language_index: np.ndarray, token_index: np.ndarray, vocab_size: int,
                   n_languages: int) -> None:
    """Raise ValueError naming the key or the (language, token) pair that makes the index unusable."""
    for key, values, bound in (("language_index", language_index, n_languages),
                               ("token_index", token_index, vocab_size)):
        if values.ndim != 1:
            raise ValueError(f"{key} must be one-dimensional, got shape {values.shape}")
        if values.size and not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"{key} must hold integers, got dtype {values.dtype}")
        outside = (values < 0) | (values >= bound)
        if outside.any():
            raise ValueError(f"{key} has values outside [0, {bound}): {values[outside][:5].tolist()}")
    if language_index.shape != token_index.shape:
        raise ValueError(f"language_index and token_index differ in length: "
                         f"{language_index.size} vs {token_index.size}")
    flat = language_index.astype(np.int64) * vocab_size + token_index.astype(np.int64)
    unique, counts = np.unique(flat, return_counts=True)
    if (counts > 1).any():
        first = int(unique[counts > 1][0])
        pair = (first // vocab_size, first % vocab_size)
        raise ValueError(f"duplicate (language, token) pair {pair} in the split index")


def load_index(path: str | os.PathLike[str], vocab_size: int,
               n_languages: int) -> tuple[np.ndarray, np.ndarray]:
    """Read and validate an index file; returns (language_index, token_index) as int64."""
    with np.load(path) as data:
        missing = [key for key in INDEX_KEYS if key not in data.files]
        if missing:
            raise ValueError(f"split index {path} lacks key(s) {missing}; it has {sorted(data.files)}")
        language_index = np.asarray(data["language_index"])
        token_index = np.asarray(data["token_index"])
    validate_index(language_index, token_index, vocab_size, n_languages)
    return language_index.astype(np.int64), token_index.astype(np.int64)


def save_index(path: Path, language_index: np.ndarray, token_index: np.ndarray,
               **extra: np.ndarray) -> None:
    """Write an index atomically (tmp file + rename): concurrent trials may share the cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
    np.savez(tmp, language_index=np.asarray(language_index, dtype=np.int64),
             token_index=np.asarray(token_index, dtype=np.int64), **extra)
    os.replace(tmp, path)
