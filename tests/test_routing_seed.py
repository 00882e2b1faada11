"""Acceptance: the routing seed runs on our modules (only its two imports rewritten), and our
own PrecisionGuidedRouter matches the seed's numerically on identical weights."""
from __future__ import annotations

import types
from typing import Iterator

import pytest
import torch
from seed_files import seed_module

from harness.tasks.routing.mechanism import precision_router as ours
from harness.tasks.routing.mechanism.model import PCSHOConfig, PCSHODLM
from harness.tasks.routing.mechanism.msa import MemoryBank, MSAConfig, create_msa_layers

IMPORT_REWRITES = {
    "from model import ": "from harness.tasks.routing.mechanism.model import ",
    "from msa import (": "from harness.tasks.routing.mechanism.msa import (",
}


@pytest.fixture(scope="module")
def seed() -> Iterator[types.ModuleType]:
    with seed_module("precision_router.py", IMPORT_REWRITES) as module:
        yield module


def test_seed_own_test_passes_on_our_modules(seed: types.ModuleType) -> None:
    seed.test_precision_router()


def _setup(seed_module: types.ModuleType):
    torch.manual_seed(0)
    config = PCSHOConfig(vocab_size=50, max_seq_len=32, d_model=32, n_heads=4, n_layers=4, d_ff=64,
                         n_diffusion_steps=20, n_settling_steps=2)
    msa_config = MSAConfig(chunk_size=4, top_k=3, router_dim=16, n_router_heads=4, apply_from_layer=2)
    model = PCSHODLM(config)
    with torch.no_grad():  # a non-trivial precision head, so the weighting matters
        for p in model.precision_up.parameters():
            p.add_(0.5 * torch.randn_like(p))
    theirs_layers = create_msa_layers(config, msa_config)
    ours_layers = create_msa_layers(config, msa_config)
    ours_layers.load_state_dict(theirs_layers.state_dict())
    standard = create_msa_layers(config, msa_config)
    standard.load_state_dict(theirs_layers.state_dict())
    theirs = seed_module.equip_model_with_precision_routing(model, theirs_layers, msa_config)
    mine = ours.equip_model_with_precision_routing(model, ours_layers, msa_config)
    for a, b in zip(theirs, mine):
        b.load_state_dict(a.state_dict())
    bank = MemoryBank(chunk_size=4)
    gen = torch.Generator().manual_seed(1)
    for doc in range(5):
        bank.add_document(f"doc_{doc}", {
            layer: {"K": torch.randn(3, 32, generator=gen), "V": torch.randn(3, 32, generator=gen),
                    "KR": torch.randn(3, 16, generator=gen)}
            for layer in (2, 3)
        })
    h = torch.randn(3, 7, 32, generator=gen, dtype=torch.float64).float()
    t = torch.tensor([1, 7, 20])
    return model, standard, theirs_layers, ours_layers, theirs[0], mine[0], bank, h, t


def test_our_router_matches_the_seed(seed: types.ModuleType) -> None:
    model, standard, theirs_layers, ours_layers, theirs, mine, bank, h, t = _setup(seed)
    keys, _ = bank.get_routing_keys(2)
    torch.testing.assert_close(mine.compute_precision_weights(h, t), theirs.compute_precision_weights(h, t))
    torch.testing.assert_close(mine.compute_routing_scores(h, keys, t=t), theirs.compute_routing_scores(h, keys, t=t))
    torch.testing.assert_close(mine.compute_routing_scores(h, keys), theirs.compute_routing_scores(h, keys))
    gains_mine, ids_mine = mine.estimate_precision_gain(h, t, bank, layer_idx=2, top_k=4)
    gains_theirs, ids_theirs = theirs.estimate_precision_gain(h, t, bank, layer_idx=2, top_k=4)
    torch.testing.assert_close(gains_mine, gains_theirs)
    assert ids_mine == ids_theirs
    mine_cmp = ours.compare_routing_strategies(model, standard, ours_layers, bank, h, t, layer_idx=2)
    theirs_cmp = seed.compare_routing_strategies(model, standard, theirs_layers, bank, h, t, layer_idx=2)
    for key in ("scores_standard", "scores_precision", "rank_correlation", "precision_weights",
                "total_uncertainty", "top_k_overlap"):
        torch.testing.assert_close(mine_cmp[key], theirs_cmp[key], msg=key)
