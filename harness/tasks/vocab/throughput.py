"""Embedding throughput of an arm's pooled forward against a plain ``nn.EmbeddingBag`` mean.

Two forwards per arm: the serving one (``StaticEmbedder.merged``: gates folded into the rows, one
lookup and one bag), which is what an embedding's throughput means, and the training one (the
differentiable two-bag op), reported beside it so the price of training with gates stays visible.
All run on the same batch in the same process, at a production-like vocabulary (50k) and
batch (4,096 tokens), with a split index as dense (share of all (language, token) pairs) as
the arm's own. The batch holds no padding, so the bag needs no ``padding_idx``; leaving it out
keeps the bag on its fast CPU kernel, the strictest yardstick for the arm's op.

On a shared machine another process takes the core for milliseconds at a time, and a timing that
covers many calls (a median of blocks) follows the load: on 2 cores at load 6, a bag's block median
swung 5x between blocks. So each forward is timed call by call, the forwards in turn (arm, training
forward, bag, arm, ...) for ``min_time`` seconds, and each keeps its fastest call: load only ever adds
time, a call of a fraction of a millisecond often runs untouched, and each forward had the same chances
at a quiet moment.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from harness.measure.quiet import alone
from harness.tasks.vocab.mechanism.embedder import StaticEmbedder
from harness.tasks.vocab.mechanism.index import save_index
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary
from harness.tasks.vocab.corpus import PAD

MIN_ROUNDS = 3  # every forward is timed at least this often, however short min_time


def _call_seconds(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one call (CUDA work included: synchronised on both sides)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def fastest_in_turn(calls: dict[str, Callable[[], object]], min_time: float, device: torch.device) -> dict[str, float]:
    """Seconds of each call's fastest run: the calls run one after the other, round after round, for
    at least ``min_time`` seconds and ``MIN_ROUNDS`` rounds, alone when the run has a quiet room."""
    for fn in calls.values():
        fn()  # warm-up outside the measurement: first calls allocate
    best = {name: float("inf") for name in calls}
    with alone():
        start, rounds = time.perf_counter(), 0
        while rounds < MIN_ROUNDS or time.perf_counter() - start < min_time:
            for name, fn in calls.items():
                best[name] = min(best[name], _call_seconds(fn, device))
            rounds += 1
    return best


def embedding_throughput(split_density: float | None, use_gate: bool, n_languages: int, vocab_size: int,
                         dim: int, tokens: int, sentence_length: int, rng: np.random.Generator,
                         device: torch.device, min_time: float) -> dict[str, float]:
    """tokens/s of the arm's forward (``split_density`` None: the shared control) and of the bag, each
    its fastest call of those taken in turn for ``min_time``; the batch, table and index are drawn from ``rng``."""
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
    served = model.merged()
    with torch.no_grad():
        seconds = fastest_in_turn({"arm": lambda: served(ids, languages), "training": lambda: model(ids, languages),
                                   "bag": lambda: bag(ids)}, min_time, device)
    counted = float(ids.numel())
    return {"embed_throughput": counted / seconds["arm"], "bag_throughput": counted / seconds["bag"],
            "embed_cost_ratio": seconds["arm"] / seconds["bag"],
            "train_forward_throughput": counted / seconds["training"],
            "train_forward_cost_ratio": seconds["training"] / seconds["bag"]}
