"""The alignment index against a brute-force count, and the real-data contested minimal-pair pools."""
from __future__ import annotations

import numpy as np

from harness.tasks.vocab.mechanism.interference import candidate_pairs
from harness.tasks.vocab.alignment import misalignment
from harness.tasks.vocab.corpus import PAD, ParallelSet, pad_sentences
from harness.tasks.vocab.multiway import minimal_pair_pools, multiway_corpus


def _brute_force(train: ParallelSet, usage: np.ndarray, language: int, token: int) -> float:
    eligible = aligned = 0
    for i in range(len(train)):
        for own, own_language, other, other_language in (
                (train.source[i], train.source_language[i], train.target[i], train.target_language[i]),
                (train.target[i], train.target_language[i], train.source[i], train.source_language[i])):
            if own_language != language or not usage[other_language, token]:
                continue
            for word in own:
                if word == token:
                    eligible += 1
                    aligned += int(token in other)
    return 1.0 - aligned / eligible if eligible else 0.0


def test_misalignment_matches_a_brute_force_count() -> None:
    rng = np.random.default_rng(0)
    n, vocab, languages = 300, 12, 3
    source = pad_sentences([rng.integers(1, vocab, size=rng.integers(1, 5)).tolist() for _ in range(n)])
    target = pad_sentences([rng.integers(1, vocab, size=rng.integers(1, 5)).tolist() for _ in range(n)])
    source_language = rng.integers(0, languages, n)
    target_language = (source_language + rng.integers(1, languages, n)) % languages
    train = ParallelSet(source, source_language, target, target_language, np.zeros(n, dtype=np.int64))
    usage = np.zeros((languages, vocab), dtype=bool)
    for ids, langs in ((source, source_language), (target, target_language)):
        for row, language in zip(ids, langs):
            usage[language, row[row != PAD]] = True
    usage[2, 5] = False  # a language that never writes token 5 cannot show its alignment
    candidates = candidate_pairs(usage)
    got = misalignment(train, usage, candidates)
    want = [_brute_force(train, usage, int(l), int(t)) for l, t in zip(candidates.language, candidates.token)]
    assert np.allclose(got, want) and 0 < np.mean(got) < 1


def test_minimal_pair_pools_hold_each_contested_word_with_its_confusable_sentences() -> None:
    """Locale 0 writes "gift" (1) for a present, locale 1 for poison: contested in both. Pool (0, 1) gets
    every pair with "gift" on either side, training pairs as candidates only; pool (0, 2) has "gift"
    on one side only (nothing to confuse it with) and gets none."""
    gift = 1
    source = pad_sentences([[gift, 3], [4, 5], [7, 3], [gift, 9], [gift, 3]])
    target = pad_sentences([[2, 3], [gift, 6], [8, 3], [2, 10], [11]])
    pairs = ParallelSet(source, np.array([0, 0, 0, 0, 0]), target, np.array([1, 1, 1, 1, 2]),
                        np.array([0, 0, 0, 0, 1]))
    held_out = np.array([True, False, False, True, True])
    contested = np.zeros((3, 12), dtype=bool)
    contested[[0, 1], gift] = True
    pools = minimal_pair_pools(pairs, held_out, contested)
    assert pools.pairs.group.tolist() == [0, 0, 0]
    assert pools.pairs.source.tolist() == source[[0, 1, 3]].tolist()
    assert pools.pairs.target.tolist() == target[[0, 1, 3]].tolist()
    assert pools.scored.tolist() == [True, False, True] and len(pools) == 2
    assert len(minimal_pair_pools(pairs, np.zeros(5, dtype=bool), contested)) == 0, "no query, no pool"


def test_real_data_corpora_carry_their_minimal_pair_pools() -> None:
    texts = [["gift box", "geschenk box", "cadeau boite"], ["poison tea", "gift tee", "poison the"],
             ["red box", "rot box", "rouge boite"], ["red tea", "rot tee", "rouge the"],
             ["gift card", "geschenk karte", "cadeau carte"], ["poison box", "gift box", "poison boite"]]
    corpus = multiway_corpus("toy", ("a", "b", "c"), texts, "translations", 0.3, np.random.default_rng(0))
    pools = corpus.minimal_pairs
    assert pools is not None and len(pools) > 0
    gift = corpus.token_names.index("gift")
    assert corpus.contested[0, gift] and corpus.contested[1, gift]
    for side in (pools.pairs.source, pools.pairs.target):
        assert np.isin(side, np.flatnonzero(corpus.contested.any(0))).any()
    held_out = {(tuple(s), tuple(t)) for s, t in zip(corpus.test.source.tolist(), corpus.test.target.tolist())}
    queries = {(tuple(s), tuple(t)) for s, t, q in zip(pools.pairs.source.tolist(), pools.pairs.target.tolist(),
                                                       pools.scored) if q}
    assert queries <= held_out, "only held-out pairs are scored"
