"""Workloads: synthetic ground truth (graded: partial false friends, synonyms, loose translations), CLDR
names and their proxy truth, refusals, rank statistics."""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import pytest
from pydantic import ValidationError

from harness.tasks.vocab.mechanism.interference import candidate_pairs
from harness.services.seeding import numpy_stream

from harness.tasks.vocab.cldr import cldr_corpus, display_names
from harness.tasks.vocab.corpus import PAD
from harness.measure.ranks import auprc, auroc
from harness.tasks.vocab.alignment import misalignment
from harness.tasks.vocab.synthetic import SyntheticSpec, build_lexicon, synthetic_corpus
from harness.tasks.vocab.task import VocabTask

SPEC = SyntheticSpec(n_languages=4, n_concepts=120, cognate_rate=0.25, false_friend_rate=0.2,
                     false_friend_boost=1.0, frequency_spread=1.0, min_length=2, max_length=4, train_pairs=400,
                     test_pairs_per_language_pair=40, twin_fraction=0.5)


def _users(forms: np.ndarray, token: int) -> list[tuple[int, int]]:
    """(language, concept) of every language that writes ``token``."""
    return [(language, int(np.flatnonzero(forms[language] == token)[0]))
            for language in range(forms.shape[0]) if (forms[language] == token).any()]


def test_false_friends_are_contested_and_cognates_are_not() -> None:
    lexicon = build_lexicon(SPEC, np.random.default_rng(0))
    forms, contested, vocab_size = lexicon.forms, lexicon.contested, lexicon.vocab_size
    assert contested.shape == (4, vocab_size) and contested.any()
    for token in np.flatnonzero(contested.any(0)):
        users = _users(forms, token)
        assert len(users) >= 2 and all(contested[language, token] for language, _ in users)
        assert len({concept for _, concept in users}) == len(users), "a different meaning in each language"
    shared = [t for t in range(1, vocab_size) if len(_users(forms, t)) >= 2 and not contested[:, t].any()]
    assert shared and all(len({c for _, c in _users(forms, t)}) == 1 for t in shared), "cognates: one meaning"
    assert abs(len(shared) / forms.shape[1] - SPEC.cognate_rate) < 0.02


def _candidate_sharing(forms: np.ndarray, contested: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every (language, token) of a form two or more languages write: its language count and truth."""
    usage = np.zeros_like(contested)
    for language in range(forms.shape[0]):
        usage[language, forms[language]] = True
    sharing = usage.sum(0)
    language, token = np.nonzero(usage & (sharing >= 2)[None, :])
    return sharing[token], contested[language, token]


def test_how_many_languages_share_a_form_is_independent_of_contestedness() -> None:
    """Measured on generated lexicons: every language count 2..4 occurs for both kinds of form,
    the contested share is the same at each count, and the count ranks contested pairs at chance."""
    spec = replace(SPEC, n_concepts=3000)
    sharing, truth = (np.concatenate(parts) for parts in zip(
        *(_candidate_sharing(lexicon.forms, lexicon.contested)
          for lexicon in (build_lexicon(spec, np.random.default_rng(seed)) for seed in range(3)))))
    overall = truth.mean()
    for count in (2, 3, 4):
        at_count = truth[sharing == count]
        assert at_count.size > 500 and abs(at_count.mean() - overall) < 0.04, (count, at_count.mean(), overall)
    assert abs(auroc(sharing, truth) - 0.5) < 0.03


def _frequency_cue(boost: float, seed: int) -> float:
    spec = replace(SPEC, n_concepts=600, train_pairs=6000, false_friend_boost=boost)
    corpus = synthetic_corpus(spec, partial(numpy_stream, seed))
    candidates = candidate_pairs(corpus.usage())
    counts = corpus.counts()[candidates.language, candidates.token]
    return auroc(counts, corpus.contested[candidates.language, candidates.token])


def test_how_often_a_concept_is_drawn_is_independent_of_contestedness_unless_planted() -> None:
    neutral = [_frequency_cue(1.0, seed) for seed in range(3)]
    assert abs(np.mean(neutral) - 0.5) < 0.05, neutral
    assert min(_frequency_cue(10.0, seed) for seed in range(3)) > 0.8, "a planted cue is visible"


def test_token_ids_do_not_reveal_the_kind_of_form() -> None:
    """Ids are permuted, so an index that breaks ties by position learns nothing from them."""
    spec = replace(SPEC, n_concepts=3000)
    lexicon = build_lexicon(spec, np.random.default_rng(1))
    contested, vocab_size = lexicon.contested, lexicon.vocab_size
    contested_tokens = np.flatnonzero(contested.any(0))
    assert abs(auroc(np.arange(vocab_size), contested.any(0)) - 0.5) < 0.05
    assert contested_tokens.min() < vocab_size / 10 and contested_tokens.max() > 0.9 * vocab_size


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
    corpus = cldr_corpus(["en", "de", "fr"], ["territories"], test_fraction=0.2, rng=numpy_stream(0, "cldr-split"))
    assert len(corpus.train) + len(corpus.test) == 3 * len(names)
    island = corpus.token_names.index("island")
    assert corpus.contested[1, island], "German 'Island' (Iceland) vs English 'island' is contested"
    assert corpus.contested[0, island]
    kenya = corpus.token_names.index("kenya")
    assert not corpus.contested[:, kenya].any(), "a cognate naming the same entity is not"


def test_cldr_holds_out_pairs_whose_every_token_training_shows_in_its_locale() -> None:
    """The positive control needs trained rows: an unseen (locale, token) keeps its random row in every arm."""
    corpus = cldr_corpus(["en", "de", "fr", "es"], ["territories", "languages"], test_fraction=0.2,
                         rng=numpy_stream(1, "cldr-split"))
    seen = corpus.usage()
    test = corpus.test
    total = len(corpus.train) + len(test)
    assert abs(len(test) - 0.2 * total) <= 1, "the fraction is met: qualifying pairs are plentiful here"
    for ids, languages in ((test.source, test.source_language), (test.target, test.target_language)):
        tokens = ids[ids != PAD]
        assert seen[np.repeat(languages, ids.shape[1])[ids.reshape(-1) != PAD], tokens].all()


def test_cldr_refuses_two_locales_at_validation() -> None:
    with pytest.raises(ValidationError, match="at least 3 locales"):
        VocabTask.validate_params({"workload.kind": "cldr", "workload.locales": ["en", "de"]})


def test_unknown_locale_and_category_are_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown locales \['xx_YY'\].*\ben\b"):
        display_names(["en", "xx_YY"], ["territories"])
    with pytest.raises(ValueError, match="currencies"):
        display_names(["en"], ["planets"])
    with pytest.raises(ValidationError, match="xx_YY"):
        VocabTask.validate_params({"workload.kind": "cldr", "workload.locales": ["en", "xx_YY"]})


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


GRADED = replace(SPEC, partial_false_friend_rate=0.2, synonym_rate=1.0, alignment_noise=0.2)


def test_partial_false_friends_are_contested_only_where_the_extra_sense_is() -> None:
    lexicon = build_lexicon(replace(GRADED, n_concepts=600), np.random.default_rng(2))
    forms, contested = lexicon.forms, lexicon.contested
    polysemous = [(language, token) for language in range(forms.shape[0])
                  for token in np.unique(forms[language]) if lexicon.senses(language, token).size == 2]
    assert len(polysemous) > 20
    for language, token in polysemous:
        assert contested[language, token], "a form with an extra sense is contested in that language"
        shared_sense = [set(lexicon.senses(other, token).tolist()) for other in range(forms.shape[0])
                        if other != language and (forms[other] == token).any()]
        assert shared_sense and all(set(lexicon.senses(language, token).tolist()) & senses
                                    for senses in shared_sense), "it keeps the sense the others use"
    single_sense_users = [(language, token) for language, token in zip(*np.nonzero(contested))
                          if lexicon.senses(language, token).size == 1]
    assert single_sense_users, "full false friends remain"
    cognate_like = [(language, token) for language in range(forms.shape[0]) for token in np.unique(forms[language])
                    if not contested[language, token] and contested[:, token].any()]
    assert cognate_like, "a partial false friend's other languages use it in the shared sense only: not contested"


def test_shared_forms_have_synonyms_written_in_a_share_of_uses() -> None:
    lexicon = build_lexicon(GRADED, np.random.default_rng(3))
    has = lexicon.synonym != PAD
    assert has.any() and (lexicon.synonym_share[has] >= 0).all() and (lexicon.synonym_share[has] <= 1).all()
    assert (lexicon.synonym_share[~has] == 0).all()
    assert not np.isin(lexicon.synonym[has], lexicon.forms).any(), "a synonym is a form of its own"
    corpus = synthetic_corpus(GRADED, partial(numpy_stream, 3))
    written = np.unique(corpus.train.source)
    assert np.isin(lexicon.synonym[has], written).mean() > 0.5, "synonyms appear in training"


def _cue_aurocs(spec: SyntheticSpec, seed: int) -> dict[str, float]:
    corpus = synthetic_corpus(spec, partial(numpy_stream, seed))
    candidates = candidate_pairs(corpus.usage())
    truth = corpus.contested[candidates.language, candidates.token]
    return {"alignment": auroc(misalignment(corpus.train, corpus.usage(), candidates), truth),
            "frequency": auroc(corpus.counts()[candidates.language, candidates.token], truth)}


def test_the_alignment_count_separates_clean_false_friends_but_not_graded_ones() -> None:
    """Known truth from the review: with every cognate translated by itself and no noise, counting
    how often a token is on both sides of a pair ranks the contested set perfectly; graded
    contestedness (partial senses, synonyms, loose translations) leaves it informative but imperfect."""
    spec = replace(SPEC, n_concepts=300, train_pairs=6000)
    assert min(_cue_aurocs(spec, seed)["alignment"] for seed in range(2)) > 0.98  # a bag may hold both senses
    graded = [_cue_aurocs(replace(GRADED, n_concepts=300, train_pairs=6000), seed) for seed in range(2)]
    assert all(0.65 < cue["alignment"] < 0.93 for cue in graded), graded
    assert all(cue["frequency"] < 0.8 for cue in graded), graded


def test_training_translations_are_loose_and_test_translations_exact() -> None:
    noisy = synthetic_corpus(replace(SPEC, alignment_noise=0.5), partial(numpy_stream, 5))
    clean = synthetic_corpus(SPEC, partial(numpy_stream, 5))
    assert np.array_equal(noisy.train.source, clean.train.source), "the source side is the same bag"
    assert not np.array_equal(noisy.train.target, clean.train.target)
    for corpus in (noisy, clean):  # no synonyms here: every test pair renders one bag in two languages
        assert len(corpus.test) == 6 * SPEC.test_pairs_per_language_pair
    assert np.array_equal(noisy.test.source, clean.test.source) and np.array_equal(noisy.test.target,
                                                                                  clean.test.target)
