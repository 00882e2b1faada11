"""Workloads: synthetic ground truth, CLDR names and their proxy truth, refusals, rank statistics."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from pydantic import ValidationError

from harness.services.seeding import numpy_stream

from harness.tasks.vocab.cldr import cldr_corpus, display_names
from harness.tasks.vocab.corpus import PAD
from harness.measure.ranks import auprc, auroc
from harness.tasks.vocab.synthetic import SyntheticSpec, build_lexicon, synthetic_corpus
from harness.tasks.vocab.task import VocabTask

SPEC = SyntheticSpec(n_languages=4, n_concepts=120, cognate_rate=0.25, false_friend_rate=0.2,
                     false_friend_boost=2.0, min_length=2, max_length=4, train_pairs=400,
                     test_pairs_per_language_pair=40, twin_fraction=0.5)


def test_false_friends_are_contested_and_cognates_are_not() -> None:
    forms, contested, vocab_size = build_lexicon(SPEC, np.random.default_rng(0))
    assert contested.shape == (4, vocab_size) and contested.any()
    for token in np.flatnonzero(contested.any(0)):
        users = [(language, int(np.flatnonzero(forms[language] == token)[0]))
                 for language in range(4) if (forms[language] == token).any()]
        assert len(users) == 2, "a false friend is one form in exactly two languages"
        assert users[0][1] != users[1][1], "with two different meanings"
        assert all(contested[language, token] for language, _ in users)
    cognates = [c for c in range(forms.shape[1]) if len(set(forms[:, c])) == 1]
    assert cognates and not contested[:, forms[0, cognates]].any()
    measured_cognate_share = len(cognates) / forms.shape[1]
    assert abs(measured_cognate_share - SPEC.cognate_rate) < 0.15


def test_synthetic_corpus_is_seeded_and_holds_out_test_pairs() -> None:
    corpus = synthetic_corpus(SPEC, partial(numpy_stream, 3))
    again = synthetic_corpus(SPEC, partial(numpy_stream, 3))
    assert np.array_equal(corpus.test.source, again.test.source)
    assert not np.array_equal(corpus.train.source, synthetic_corpus(SPEC, partial(numpy_stream, 4)).train.source)
    assert len(corpus.test) == 6 * SPEC.test_pairs_per_language_pair
    hit = corpus.contested_pairs_mask(corpus.test)
    assert 0 < hit.mean() < 1
    train_rows = {tuple(row) for row in np.sort(corpus.train.source, 1).tolist()}
    test_rows = [tuple(row) for row in np.sort(corpus.test.source, 1).tolist()]
    assert np.mean([row in train_rows for row in test_rows]) < 0.5
    assert (corpus.usage()[:, PAD] == 0).all()


def test_cldr_names_are_parallel_and_island_is_a_false_friend() -> None:
    names = display_names(["en", "de"], ["territories"])
    assert {"en": "Iceland", "de": "Island"} in names
    corpus = cldr_corpus(["en", "de"], ["territories"], test_fraction=0.2, rng=numpy_stream(0, "cldr-split"))
    assert len(corpus.train) + len(corpus.test) == len(names)
    island = corpus.token_names.index("island")
    assert corpus.contested[1, island], "German 'Island' (Iceland) vs English 'island' is contested"
    assert corpus.contested[0, island]
    kenya = corpus.token_names.index("kenya")
    assert not corpus.contested[:, kenya].any(), "a cognate naming the same entity is not"


def test_unknown_locale_and_category_are_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown locales \['xx_YY'\].*\ben\b"):
        display_names(["en", "xx_YY"], ["territories"])
    with pytest.raises(ValueError, match="currencies"):
        display_names(["en"], ["planets"])
    with pytest.raises(ValidationError, match="xx_YY"):
        VocabTask.validate_params({"workload": "cldr", "locales": ["en", "xx_YY"]})


def test_auroc_and_auprc_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(60), 1)
    truth = rng.random(60) < 0.3
    pairs = [(p, n) for p in scores[truth] for n in scores[~truth]]
    brute = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs])
    assert np.isclose(auroc(scores, truth), brute)
    perfect = truth.astype(float)
    assert auprc(perfect, truth) == 1.0 and auroc(perfect, truth) == 1.0
    assert auprc(np.zeros(60), truth) <= truth.mean() + 1e-12
