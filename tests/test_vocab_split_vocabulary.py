"""SplitVocabulary: agreement with the seed, step-zero equivalence, fast vs reference pooling."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from seed_files import seed_module

from harness.tasks.vocab.mechanism.embedder import StaticEmbedder, symmetric_info_nce
from harness.tasks.vocab.mechanism.index import save_index
from harness.tasks.vocab.mechanism.pooling import pooled_shared, pooled_split, pooled_split_reference
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary

VOCAB, DIM, LANGS = 40, 6, 3


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    flat = rng.choice(np.arange(LANGS * (VOCAB - 1)), size=25, replace=False)
    path = tmp_path / "index.npz"
    save_index(path, flat // (VOCAB - 1), flat % (VOCAB - 1) + 1)  # token 0 stays the padding token
    return path


def randomised(module: SplitVocabulary, seed: int) -> SplitVocabulary:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        module.rows.copy_(torch.randn(module.rows.shape, generator=generator))
        module.gate_logit.copy_(torch.randn(module.gate_logit.shape, generator=generator))
    return module


def test_matches_the_seed_on_outputs_gradients_and_penalties(index_path: Path) -> None:
    with seed_module("split_vocabulary.py") as module:
        theirs = module.SplitVocabulary(str(index_path), VOCAB, DIM, LANGS, gate_init=0.3)
    ours = randomised(SplitVocabulary(index_path, VOCAB, DIM, LANGS, gate_init=0.3), seed=1)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    assert dict(ours.named_buffers()).keys() == dict(theirs.named_buffers()).keys()
    theirs.load_state_dict(ours.state_dict())
    for name in ("lookup", "row_language", "row_token"):
        assert torch.equal(getattr(ours, name), getattr(theirs, name))
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, VOCAB, (300,), generator=generator)
    languages = torch.randint(0, LANGS, (300,), generator=generator)
    table = torch.randn(VOCAB, DIM, generator=generator)
    upstream = torch.randn(300, DIM, generator=generator)
    for use_gate in (True, False):
        results = []
        for model in (ours, theirs):
            model.zero_grad()
            shared = table[tokens].clone().requires_grad_(True)
            out = model(tokens, languages, shared, use_gate=use_gate)
            total = (out * upstream).sum() + model.penalty() + model.fusion_penalty()
            total.backward()
            results.append((out.detach(), shared.grad, model.rows.grad.clone(), model.gate_logit.grad.clone(),
                            model.penalty().detach(), model.fusion_penalty().detach()))
        for mine, seed_value in zip(*results):
            assert torch.equal(mine, seed_value)


def test_fast_pooling_matches_the_reference_in_values_and_gradients(index_path: Path) -> None:
    split = randomised(SplitVocabulary(index_path, VOCAB, DIM, LANGS), seed=3).double()
    generator = torch.Generator().manual_seed(4)
    tokens = torch.randint(1, VOCAB, (32, 5), generator=generator)
    tokens[:, 3:] = 0  # padding
    tokens[:5, 0] = split.row_token[:5]
    languages = torch.randint(0, LANGS, (32,), generator=generator)
    languages[:5] = split.row_language[:5]
    tokens[5, :3] = split.row_token[0]  # one split row hit three times in one sentence
    languages[5] = split.row_language[0]
    table = torch.randn(VOCAB, DIM, dtype=torch.float64, generator=generator, requires_grad=True)
    upstream = torch.randn(32, DIM, dtype=torch.float64, generator=generator)
    for use_gate in (True, False):
        grads = []
        for pool in (pooled_split, pooled_split_reference):
            split.zero_grad()
            table.grad = None
            out = pool(split, table, tokens, languages, padding_idx=0, use_gate=use_gate)
            (out * upstream).sum().backward()
            grads.append((out.detach(), table.grad.clone(), split.rows.grad.clone(),
                          split.gate_logit.grad.clone() if use_gate else torch.zeros(())))
        for fast, reference in zip(*grads):
            torch.testing.assert_close(fast, reference, rtol=1e-12, atol=1e-12)
    assert (grads[0][2].abs().sum(1) > 0).any(), "the batch must exercise some split rows"


def test_merged_embedder_serves_the_reference_vectors_and_is_a_snapshot(index_path: Path) -> None:
    generator = torch.Generator().manual_seed(11)
    table = torch.randn(VOCAB, DIM, dtype=torch.float64, generator=generator)
    tokens = torch.randint(1, VOCAB, (24, 5), generator=generator)
    tokens[:, 4:] = 0  # padding
    tokens[3] = 0  # an all-padding sentence
    languages = torch.randint(0, LANGS, (24,), generator=generator)
    for use_gate in (True, False):
        split = randomised(SplitVocabulary(index_path, VOCAB, DIM, LANGS), seed=12).double()
        model = StaticEmbedder(table, padding_idx=0, split=split, use_gate=use_gate)
        randomised(split, seed=13)  # trained rows, no longer copies of their shared rows
        tokens[:6, 0], languages[:6] = split.row_token[:6], split.row_language[:6]
        tokens[6, :4], languages[6] = split.row_token[0], split.row_language[0]  # one row hit four times
        served = model.merged()
        expected = pooled_split_reference(split, model.table, tokens, languages, 0, use_gate=use_gate)
        torch.testing.assert_close(served(tokens, languages), expected.detach(), rtol=1e-12, atol=1e-12)
        assert not torch.allclose(expected, pooled_shared(model.table, tokens, 0))  # split rows do matter here
        with torch.no_grad():
            split.rows.add_(1.0)
        torch.testing.assert_close(served(tokens, languages), expected.detach(), rtol=1e-12, atol=1e-12)
    control = StaticEmbedder(table, padding_idx=0)
    torch.testing.assert_close(control.merged()(tokens, languages), control(tokens, languages).detach())


def test_fast_pooling_ignores_split_rows_of_the_padding_token(tmp_path: Path) -> None:
    path = tmp_path / "padded_index.npz"
    save_index(path, np.array([0, 1, 2, 1]), np.array([0, 0, 3, 7]))  # token 0 is padding
    split = randomised(SplitVocabulary(path, VOCAB, DIM, LANGS), seed=7).double()
    table = torch.randn(VOCAB, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    tokens = torch.tensor([[3, 0, 0], [7, 3, 0], [0, 0, 0], [5, 7, 3]])
    languages = torch.tensor([2, 1, 0, 1])
    for use_gate in (True, False):
        torch.testing.assert_close(pooled_split(split, table, tokens, languages, 0, use_gate=use_gate),
                                   pooled_split_reference(split, table, tokens, languages, 0, use_gate=use_gate),
                                   rtol=1e-12, atol=1e-12)


def test_fast_shared_pooling_is_the_padded_embedding_bag_mean() -> None:
    generator = torch.Generator().manual_seed(9)
    table = torch.randn(VOCAB, DIM, dtype=torch.float64, generator=generator, requires_grad=True)
    tokens = torch.randint(1, VOCAB, (12, 5), generator=generator)
    tokens[:4, 2:] = 0
    tokens[5] = 0  # an all-padding sentence pools to zeros
    upstream = torch.randn(12, DIM, dtype=torch.float64, generator=generator)
    results = []
    for pool in (lambda: pooled_shared(table, tokens, 0),
                 lambda: torch.nn.functional.embedding_bag(tokens, table, mode="mean", padding_idx=0)):
        table.grad = None
        out = pool()
        (out * upstream).sum().backward()
        results.append((out.detach(), table.grad.clone()))
    for fast, reference in zip(*results):
        torch.testing.assert_close(fast, reference, rtol=1e-12, atol=1e-12)
    assert torch.count_nonzero(results[0][1][0]) == 0  # the padding row gets no gradient


def test_seeded_split_model_equals_the_control_and_the_gate_gets_zero_gradient(index_path: Path) -> None:
    generator = torch.Generator().manual_seed(5)
    table = torch.randn(VOCAB, DIM, generator=generator)
    control = StaticEmbedder(table, padding_idx=0)
    split = SplitVocabulary(index_path, VOCAB, DIM, LANGS, gate_init=1.5)
    model = StaticEmbedder(table, padding_idx=0, split=split)
    tokens = torch.randint(1, VOCAB, (16, 4), generator=generator)
    tokens[:, 0] = split.row_token[:16]
    languages = split.row_language[:16].clone()
    partner = torch.randint(1, VOCAB, (16, 4), generator=generator)
    for embedder in (control, model):
        loss = symmetric_info_nce(embedder(tokens, languages), embedder(partner, languages), scale=20.0)
        loss.backward()
    # Same function at step zero; the fast op sums (1 - g)/n and g/n weights, so only rounding differs.
    torch.testing.assert_close(model(tokens, languages), control(tokens, languages), rtol=1e-6, atol=1e-6)
    # The gradient the control puts on a shared row is shared between that row and its split rows.
    combined = model.table.grad.clone().index_add_(0, split.row_token, split.rows.grad)
    torch.testing.assert_close(combined, control.table.grad, rtol=1e-5, atol=1e-6)
    assert split.rows.grad.abs().sum() > 0
    # The fast op takes the gate's two dot products in two bag kernels, which may sum them in a
    # different order (row alignment differs when dim is not a multiple of the vector width).
    assert split.gate_logit.grad.abs().max() < 1e-7
    split.zero_grad()
    reference = pooled_split_reference(split, model.table, tokens, languages, padding_idx=0)
    partner_reference = pooled_split_reference(split, model.table, partner, languages, padding_idx=0)
    symmetric_info_nce(reference, partner_reference, scale=20.0).backward()
    assert split.rows.grad.abs().sum() > 0
    assert torch.count_nonzero(split.gate_logit.grad) == 0  # the seed's semantics: exactly zero


def test_fusion_penalty_matches_a_direct_loop(index_path: Path) -> None:
    split = randomised(SplitVocabulary(index_path, VOCAB, DIM, LANGS), seed=6).double()
    deviations = []
    for i in range(split.n_rows):
        same = [j for j in range(split.n_rows) if split.row_token[j] == split.row_token[i]]
        centroid = sum(split.rows[j] for j in same) / len(same)
        deviations.append(torch.linalg.vector_norm(split.rows[i] - centroid))
    assert any(int((split.row_token == t).sum()) > 1 for t in split.row_token.tolist())
    torch.testing.assert_close(split.fusion_penalty(), torch.stack(deviations).mean(), rtol=1e-12, atol=1e-12)
