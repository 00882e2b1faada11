"""Same-budget baselines and the size-matched oracle, summed penalties, rows in use."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from harness.tasks.vocab.mechanism.diagnostics import rows_in_use
from harness.tasks.vocab.mechanism.embedder import StaticEmbedder, symmetric_info_nce
from harness.tasks.vocab.mechanism.index import save_index
from harness.tasks.vocab.mechanism.interference import CandidatePairs, candidate_pairs
from harness.tasks.vocab.mechanism.pooling import pooled_split, pooled_split_reference
from harness.tasks.vocab.mechanism.split_vocabulary import SplitVocabulary
from harness.tasks.vocab.cldr import cldr_corpus
from harness.tasks.vocab.task import VocabParams, choose_index, index_size, most_candidates, ranked_with_ties_by

# 12 candidates; k = 0.25 * 12 = 3.
CANDIDATES = CandidatePairs(np.repeat(np.arange(3), 4), np.tile(np.arange(1, 5), 3))
COUNTS = np.array([5, 40, 7, 9, 1, 30, 2, 8, 50, 3, 6, 4])
SHARING = np.array([2, 2, 3, 2, 4, 2, 3, 2, 2, 4, 3, 4])  # languages using each candidate's token
SCORES = np.linspace(-1.0, 1.0, 12)
UNALIGNED = np.array([0.0, 0.1, 1.0, 0.5, 0.0, 0.9, 1.0, 0.2, 0.0, 0.3, 0.9, 1.0])  # 1 - alignment rate


def chosen(index: str, truth: np.ndarray | None = None, fraction: float = 0.25) -> list[tuple[int, int]]:
    params = VocabParams(index=index, index_fraction=fraction)
    pairs = choose_index(params, CANDIDATES, SCORES, truth, COUNTS, SHARING, UNALIGNED, np.random.default_rng(0))
    return list(zip(pairs.language.tolist(), pairs.token.tolist()))


def pairs_at(*positions: int) -> list[tuple[int, int]]:
    return [(int(CANDIDATES.language[p]), int(CANDIDATES.token[p])) for p in sorted(positions)]


def test_every_sized_index_spends_the_same_budget() -> None:
    truth = np.zeros(12, dtype=bool)
    truth[[0, 6]] = True
    assert index_size(VocabParams(index_fraction=0.25), CANDIDATES) == 3
    for index in ("interference", "random", "frequency", "language_count", "alignment", "oracle"):
        assert len(chosen(index, truth)) == 3, index
    assert len(chosen("all")) == 12 and chosen("none") == []


def test_frequency_k_picks_the_most_frequent_pairs() -> None:
    assert chosen("frequency") == pairs_at(8, 1, 5)  # counts 50, 40, 30


def test_language_count_k_picks_the_most_shared_tokens_ties_by_frequency() -> None:
    # four languages at positions 4, 9, 11 (counts 1, 3, 4): all three, though each is rare
    assert chosen("language_count") == pairs_at(4, 9, 11)
    # k = 4: the fourth is the most frequent of the three-language pairs (2, 6, 10: counts 7, 2, 6)
    assert chosen("language_count", fraction=4 / 12) == pairs_at(2, 4, 9, 11)


def test_alignment_k_picks_the_least_aligned_pairs_ties_by_frequency() -> None:
    # misalignment 1.0 at positions 2, 6, 11 (counts 7, 2, 4): all three
    assert chosen("alignment") == pairs_at(2, 6, 11)
    # k = 5: then the two at 0.9 (5 and 10, counts 30 and 6), before any lower misalignment
    assert chosen("alignment", fraction=5 / 12) == pairs_at(2, 5, 6, 10, 11)
    # a tie at 0.0 (0, 4, 8: counts 5, 1, 50) is broken by frequency, not position
    order = np.argsort(-ranked_with_ties_by(UNALIGNED, COUNTS), kind="stable")
    assert order[-3:].tolist() == [8, 0, 4]


def test_index_size_sets_k_and_is_refused_beyond_the_candidates() -> None:
    assert index_size(VocabParams(index_size=5), CANDIDATES) == 5
    with pytest.raises(ValueError, match="index_size 13 exceeds this seed's 12 candidate pairs"):
        index_size(VocabParams(index_size=13), CANDIDATES)


def test_index_size_beyond_what_the_workload_can_hold_is_refused_at_validation() -> None:
    most = most_candidates(VocabParams().workload)  # 4 languages x round(0.55 x 300) shared forms
    assert most == 4 * 165
    with pytest.raises(ValidationError, match=f"index_size {most + 1} exceeds the candidate set .* at most {most}"):
        VocabParams(index_size=most + 1)
    cldr = {"workload": {"kind": "cldr", "locales": ("en", "de", "fr"), "categories": ("scripts",)}}
    exact = most_candidates(VocabParams(**cldr).workload)
    corpus = cldr_corpus(["en", "de", "fr"], ["scripts"], 0.2, np.random.default_rng(0))
    assert exact == len(candidate_pairs(corpus.usage())), "real data: the split's candidate set exactly"
    assert VocabParams(**cldr, index_size=exact).index_size == exact
    with pytest.raises(ValidationError, match="exceeds the candidate set of the cldr workload"):
        VocabParams(**cldr, index_size=exact + 1)


def test_size_matched_oracle_takes_the_most_frequent_contested_pairs() -> None:
    truth = np.zeros(12, dtype=bool)
    truth[[0, 2, 4, 6, 10]] = True  # counts 5, 7, 1, 2, 6: more contested pairs than k
    assert chosen("oracle", truth) == pairs_at(2, 10, 0)


def test_size_matched_oracle_is_topped_up_by_frequency_when_few_pairs_are_contested() -> None:
    truth = np.zeros(12, dtype=bool)
    truth[4] = True  # one contested pair (count 1), k = 3
    assert chosen("oracle", truth) == pairs_at(4, 8, 1)


def test_oracle_needs_a_truth() -> None:
    with pytest.raises(ValueError, match="known contested set"):
        chosen("oracle", None)


def test_interference_index_is_the_top_scores() -> None:
    assert chosen("interference") == pairs_at(9, 10, 11)


# --- penalties and rows in use ------------------------------------------------------------------

VOCAB, DIM, LANGS = 30, 8, 3


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    path = tmp_path / "index.npz"
    save_index(path, np.array([0, 1, 2, 0, 1, 2]), np.array([1, 1, 1, 2, 2, 2]))
    return path


def test_penalties_are_the_seeds_means_over_rows(index_path: Path) -> None:
    split = SplitVocabulary(index_path, VOCAB, DIM, LANGS).double()
    with torch.no_grad():
        split.gate_logit.copy_(torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]))
        split.rows.copy_(torch.randn(split.rows.shape, dtype=torch.float64,
                                     generator=torch.Generator().manual_seed(0)))
    expected_l1 = sum(1.0 / (1.0 + np.exp(-x)) for x in (-2.0, -1.0, 0.0, 1.0, 2.0, 3.0)) / 6
    assert split.penalty().item() == pytest.approx(expected_l1, rel=1e-12)
    rows = split.rows.detach().numpy()
    distances = []
    for token in (1, 2):  # each token's three rows (one per language) against their own centroid
        members = rows[split.row_token.numpy() == token]
        distances.extend(np.linalg.norm(members - members.mean(0), axis=1))
    assert split.fusion_penalty().item() == pytest.approx(np.mean(distances), rel=1e-12)


def test_rows_in_use_reads_gates_and_distance(index_path: Path) -> None:
    table = torch.randn(VOCAB, DIM, generator=torch.Generator().manual_seed(1))
    gated = StaticEmbedder(table, 0, SplitVocabulary(index_path, VOCAB, DIM, LANGS))
    assert rows_in_use(gated, 0.1) == 0  # seeded rows equal their shared rows, whatever the gate
    with torch.no_grad():
        gated.split.rows.add_(table[gated.split.row_token])  # each row moves by its shared row's norm
        gated.split.gate_logit.copy_(torch.tensor([9.0, 9.0, -9.0, -9.0, 9.0, -9.0]))
    assert rows_in_use(gated, 0.1) == 3  # the three open gates
    fused = StaticEmbedder(table, 0, SplitVocabulary(index_path, VOCAB, DIM, LANGS), use_gate=False)
    assert rows_in_use(fused, 0.1) == 0  # every language's row is the token's consensus
    with torch.no_grad():
        fused.split.rows[0].mul_(-1.0)
    assert rows_in_use(fused, 0.1) == 3  # token 1's three rows all leave the moved consensus


def _trained_rows_in_use(index_path: Path, l1_weight: float) -> int:
    generator = torch.Generator().manual_seed(2)
    table = torch.randn(VOCAB, DIM, generator=generator) / DIM ** 0.5
    model = StaticEmbedder(table, 0, SplitVocabulary(index_path, VOCAB, DIM, LANGS))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        source = torch.randint(1, 3, (16, 3), generator=generator)  # tokens 1 and 2 only: all indexed
        target = torch.randint(1, VOCAB, (16, 3), generator=generator)
        languages = torch.randint(0, LANGS, (16,), generator=generator)
        loss = symmetric_info_nce(model(source, languages), model(target, (languages + 1) % LANGS), 20.0)
        optimizer.zero_grad()
        (loss + model.regulariser(l1_weight, 0.0)).backward()
        optimizer.step()
    return rows_in_use(model, 0.1)


@pytest.mark.integration  # trains at several L1 prices
def test_rows_in_use_moves_with_the_l1_price(index_path: Path) -> None:
    free, priced = _trained_rows_in_use(index_path, 0.0), _trained_rows_in_use(index_path, 10.0)
    assert free >= 4 and priced == 0


def test_fast_pooling_without_indexed_tokens_is_the_shared_mean(index_path: Path) -> None:
    split = SplitVocabulary(index_path, VOCAB, DIM, LANGS).double()
    table = torch.randn(VOCAB, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    tokens = torch.tensor([[3, 4, 0], [5, 6, 7]])
    languages = torch.tensor([0, 2])
    expected = torch.stack([table[[3, 4]].mean(0), table[[5, 6, 7]].mean(0)])
    torch.testing.assert_close(pooled_split(split, table, tokens, languages, 0), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pooled_split_reference(split, table, tokens, languages, 0), expected,
                               rtol=1e-12, atol=1e-12)
