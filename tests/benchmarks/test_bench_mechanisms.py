"""Microbenchmarks: each mechanism's forward against its control, on the same inputs.

Skipped in the default run (``--benchmark-skip`` in pyproject). Run and save, then compare two
saved runs (e.g. before and after a change)::

    pytest tests/benchmarks --benchmark-only --benchmark-autosave        # or: tox -e bench
    pytest tests/benchmarks --benchmark-only --benchmark-compare         # against the latest save
    pytest-benchmark compare 0001 0002 --group-by=group                  # two saved runs

Results are saved under ``.benchmarks/<machine>/`` as JSON. Benchmarks within one group
(routing, vocab-token, vocab-pooled, er2) are the comparison that matters: ratios measured in
the same process, as for every speed figure of the harness. Set ``HARNESS_BENCH_DEVICE=cuda``
to time on a GPU (each call synchronises the device).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from harness.core.devices import resolve_device
from harness.measure.memory import read_bandwidth
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.routing.mechanism.model import PrecisionHead
from harness.tasks.routing.mechanism.msa import RouterProjector
from harness.tasks.routing.mechanism.precision_router import PrecisionGuidedRouter
from harness.tasks.vocab.mechanism.embedder import StaticEmbedder
from harness.tasks.vocab.mechanism.index import save_index
from harness.tasks.vocab.mechanism.pooling import pooled_shared, pooled_split
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary
from harness.tasks.routing.scoring import RoutingIndex

DEVICE = resolve_device(os.environ.get("HARNESS_BENCH_DEVICE", "auto"))


def timed(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """No autograd, and a device sync so that asynchronous CUDA kernels are inside the timing."""

    def call() -> torch.Tensor:
        with torch.no_grad():
            out = fn()
        if DEVICE.type == "cuda":
            torch.cuda.synchronize(DEVICE)
        return out

    return call


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


# --- routing: scoring a bank of routing keys ------------------------------------------------
D_MODEL, ROUTER_DIM, ROUTER_HEADS, DIFFUSION_STEPS = 128, 64, 4, 8
QUERIES, QUERY_TOKENS, CHUNKS = 8, 64, 16_384


@pytest.fixture(scope="module")
def routing_inputs():
    torch.manual_seed(0)
    control = RouterProjector(D_MODEL, ROUTER_DIM, ROUTER_HEADS).to(DEVICE)
    mechanism = PrecisionGuidedRouter(PrecisionHead(D_MODEL, DIFFUSION_STEPS), D_MODEL, ROUTER_DIM, ROUTER_HEADS).to(DEVICE)
    h_query = randn(QUERIES, QUERY_TOKENS, D_MODEL, seed=1)
    keys = randn(CHUNKS, ROUTER_DIM, seed=2)
    t = torch.full((QUERIES,), DIFFUSION_STEPS // 2, device=DEVICE, dtype=torch.long)
    return control, mechanism, h_query, keys, t


@pytest.mark.benchmark(group="routing")
def test_router_projector_scoring(benchmark, routing_inputs):
    control, _, h_query, keys, _ = routing_inputs
    scores = benchmark(timed(lambda: control.compute_routing_scores(h_query, keys)))
    assert scores.shape == (QUERIES, CHUNKS)


@pytest.mark.benchmark(group="routing")
def test_precision_guided_router_scoring(benchmark, routing_inputs):
    _, mechanism, h_query, keys, t = routing_inputs
    scores = benchmark(timed(lambda: mechanism.compute_routing_scores(h_query, keys, t=t)))
    assert scores.shape == (QUERIES, CHUNKS)


# --- routing: the suite's fast index, per-token (RouterProjector) vs one pooled query, at 10^6 chunks
INDEX_CHUNKS, CHUNKS_PER_DOC, EVAL_QUERY_TOKENS = 1_000_000, 5, 10


@pytest.fixture(scope="module")
def routing_index_inputs():
    keys = randn(INDEX_CHUNKS, ROUTER_DIM, seed=4)
    bandwidth = read_bandwidth(DEVICE, keys.numel() * keys.element_size())
    return keys, bandwidth


@pytest.mark.benchmark(group="routing-index")
@pytest.mark.parametrize("arm", ["router_projector", "pooled"])
def test_routing_index_top_documents(benchmark, routing_index_inputs, arm):
    """extra_info: key bytes read per second as a fraction of the streaming read rate of a bank-sized
    tensor (the bank lives in DRAM here; medians on both sides), as the suite's score_bw_frac@N."""
    keys, bandwidth = routing_index_inputs
    per_token = arm == "router_projector"
    index = RoutingIndex(keys, ROUTER_HEADS if per_token else 1, CHUNKS_PER_DOC)
    queries = randn(1, EVAL_QUERY_TOKENS if per_token else 1, ROUTER_DIM, seed=5)
    scores, docs = benchmark(timed(lambda: index.top_documents(queries, 4)))
    benchmark.extra_info["read_bandwidth_gb_s"] = bandwidth / 1e9
    benchmark.extra_info["bandwidth_fraction"] = keys.numel() * keys.element_size() / benchmark.stats.stats.median / bandwidth
    assert docs.shape == (1, 4)


# --- vocab: split vocabulary vs the shared table (vocab 50k, 4,096-token batches) --------------
VOCAB, DIM, LANGUAGES, SENTENCES, LENGTH, SPLIT_DENSITY, PAD = 50_000, 256, 4, 512, 8, 0.05, 0


@pytest.fixture(scope="module")
def vocab_inputs():
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(1, VOCAB, size=(SENTENCES, LENGTH))).to(DEVICE)
    languages = torch.from_numpy(rng.integers(0, LANGUAGES, size=SENTENCES)).to(DEVICE)
    table = randn(VOCAB, DIM, seed=3)
    flat = rng.choice(LANGUAGES * (VOCAB - 1), size=int(SPLIT_DENSITY * LANGUAGES * VOCAB), replace=False)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index.npz"
        save_index(path, flat // (VOCAB - 1), flat % (VOCAB - 1) + 1)
        split = SplitVocabulary(path, VOCAB, DIM, LANGUAGES).to(DEVICE)
    return split, table, ids, languages


@pytest.mark.benchmark(group="vocab-token")
def test_shared_lookup_per_token(benchmark, vocab_inputs):
    _, table, ids, _ = vocab_inputs
    vectors = benchmark(timed(lambda: F.embedding(ids, table)))
    assert vectors.shape == (SENTENCES, LENGTH, DIM)


@pytest.mark.benchmark(group="vocab-token")
def test_split_vocabulary_forward_per_token(benchmark, vocab_inputs):
    split, table, ids, languages = vocab_inputs
    lang_per_token = languages.unsqueeze(1).expand_as(ids)
    vectors = benchmark(timed(lambda: split(ids, lang_per_token, F.embedding(ids, table))))
    assert vectors.shape == (SENTENCES, LENGTH, DIM)


# The yardstick is ``test_vocab_nn_embedding_bag_mean``: the split forward's target is at most 1.5x it.
@pytest.mark.benchmark(group="vocab-pooled")
def test_vocab_nn_embedding_bag_mean(benchmark, vocab_inputs):
    _, table, ids, _ = vocab_inputs
    bag = torch.nn.EmbeddingBag.from_pretrained(table, mode="mean")
    pooled = benchmark(timed(lambda: bag(ids)))
    assert pooled.shape == (SENTENCES, DIM)


@pytest.mark.benchmark(group="vocab-pooled")
def test_vocab_shared_pooled(benchmark, vocab_inputs):
    _, table, ids, _ = vocab_inputs
    pooled = benchmark(timed(lambda: pooled_shared(table, ids, PAD)))
    assert pooled.shape == (SENTENCES, DIM)


@pytest.mark.benchmark(group="vocab-pooled")
@pytest.mark.parametrize("use_gate", [True, False], ids=["gated", "fused"])
def test_split_vocabulary_pooled(benchmark, vocab_inputs, use_gate):
    """The training forward (differentiable, gates live), timed without autograd."""
    split, table, ids, languages = vocab_inputs
    pooled = benchmark(timed(lambda: pooled_split(split, table, ids, languages, PAD, use_gate=use_gate)))
    assert pooled.shape == (SENTENCES, DIM)


@pytest.mark.benchmark(group="vocab-pooled")
@pytest.mark.parametrize("use_gate", [True, False], ids=["gated", "fused"])
def test_split_vocabulary_pooled_served(benchmark, vocab_inputs, use_gate):
    """The serving forward (gates folded into the rows): the one the 1.5x target is about."""
    split, table, ids, languages = vocab_inputs
    served = StaticEmbedder(table, PAD, split=split, use_gate=use_gate).merged()
    pooled = benchmark(timed(lambda: served(ids, languages)))
    assert pooled.shape == (SENTENCES, DIM)


# --- er2: compressed vs raw residual memory, same state budget ---------------------------------
HEADS, KV_HEADS, HEAD_DIM, CONTEXT = 4, 2, 32, 512


def er2_layer(mode: str) -> ER2Layer:
    torch.manual_seed(0)
    return ER2Layer(
        HEADS, KV_HEADS, HEAD_DIM, feature_dim=32, residual_dim=8, code_rank=4, residual_mode=mode
    ).to(DEVICE)


@pytest.fixture(scope="module")
def er2_inputs():
    return randn(1, HEADS, CONTEXT, HEAD_DIM, seed=4), randn(1, KV_HEADS, CONTEXT, HEAD_DIM, seed=5), randn(
        1, KV_HEADS, CONTEXT, HEAD_DIM, seed=6
    )


@pytest.mark.benchmark(group="er2")
@pytest.mark.parametrize("mode", ["raw", "compressed"])
def test_er2_layer_forward(benchmark, er2_inputs, mode):
    layer = er2_layer(mode)
    q, k, v = er2_inputs
    out = benchmark(timed(lambda: layer(q, k, v)))
    assert out.shape == q.shape
