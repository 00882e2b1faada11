"""Embedding throughput of an arm's pooled forward against a plain ``nn.EmbeddingBag`` mean.

Two forwards per arm: the serving one (``StaticEmbedder.merged``: gates folded into the rows, one
lookup and one bag), which is what an embedding's throughput means, and the training one (the
differentiable two-bag op), reported beside it so the price of training with gates stays visible.
All run on the same batch in the same process, at a production-like vocabulary (50k) and
batch (4,096 tokens), with a split index as dense (share of all (language, token) pairs) as
the arm's own. The batch holds no padding, so the bag needs no ``padding_idx``; leaving it out
keeps the bag on its fast CPU kernel, the strictest yardstick for the arm's op.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from harness.measure.timing import throughput
from harness.tasks.vocab.mechanism.embedder import StaticEmbedder
from harness.tasks.vocab.mechanism.index import save_index
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary
from harness.tasks.vocab.corpus import PAD


def embedding_throughput(split_density: float | None, use_gate: bool, n_languages: int, vocab_size: int,
                         dim: int, tokens: int, sentence_length: int, rng: np.random.Generator,
                         device: torch.device, min_run_time: float) -> dict[str, float]:
    """tokens/s of the arm's forward (``split_density`` None: the shared control) and of the bag;
    the batch, table and index are drawn from ``rng``."""
    sentences = max(tokens // sentence_length, 1)
    ids = torch.from_numpy(rng.integers(PAD + 1, vocab_size, size=(sentences, sentence_length))).to(device)
    languages = torch.from_numpy(rng.integers(0, n_languages, size=sentences)).to(device)
    table = torch.from_numpy(rng.standard_normal((vocab_size, dim), dtype=np.float32)).to(device)
    bag = nn.EmbeddingBag(vocab_size, dim, mode="mean").to(device)
    with torch.no_grad():
        bag.weight.copy_(table)
    split = None
    if split_density is not None:
        n_rows = max(int(round(split_density * n_languages * vocab_size)), 1)
        flat = rng.choice(np.arange(n_languages * (vocab_size - 1)), size=n_rows, replace=False)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "index.npz"
            save_index(path, flat // (vocab_size - 1), flat % (vocab_size - 1) + 1)
            split = SplitVocabulary(path, vocab_size, dim, n_languages).to(device)
    model = StaticEmbedder(table, PAD, split=split, use_gate=use_gate).to(device)
    counted = float(ids.numel())
    served = model.merged()
    with torch.no_grad():
        arm = throughput(lambda: served(ids, languages), counted, min_run_time)
        training = throughput(lambda: model(ids, languages), counted, min_run_time)
        plain = throughput(lambda: bag(ids), counted, min_run_time)
    return {"embed_throughput": arm, "bag_throughput": plain, "embed_cost_ratio": plain / arm,
            "train_forward_throughput": training, "train_forward_cost_ratio": plain / training}
