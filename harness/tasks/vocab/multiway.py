"""A multi-way parallel set (every entity written in every locale) as a vocab ``Corpus``.

Shared by the real-data workloads (CLDR names, gettext catalogs): words become token ids with
one id for every locale that writes the same word, as a multilingual tokenizer would; every
locale pair of an entity is a translation pair; contested truth is a proxy read off the entities
(same form, disjoint meanings). Two held-out rules, because what a test can ask depends on it:

- ``translations``: a share of (entity, locale pair) translations, each only while both of its
  names stay in another training pair of their entity (new pairings of known names);
- ``entities``: a share of whole entities, each only while every one of its (locale, token)s stays
  in a training entity (unseen sentences made of seen words: translation retrieval proper).

Either way every held-out token is seen in its locale; an unseen token's row stays random in every
arm, out of any index's reach.

Contested retrieval is scored on minimal-pair pools, as the synthetic workload's twins are: for a
locale pair (a, b) and a word contested in a or b that both write, every pair of that locale pair
(held out or not) with the word on a's side or on b's side joins one pool, kept where the word is
on each side somewhere in it. The held-out pairs are the queries; the training pairs are
candidates only. Each query meets as distractors exactly the sentences its shared word would
confuse it with; in the locale pair's whole held-out pool those few are lost among hundreds of
unrelated candidates, or absent when training holds them.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from harness.tasks.vocab.corpus import PAD, Corpus, MinimalPairs, ParallelSet, pad_sentences

HeldOut = Literal["translations", "entities"]
_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def candidate_count(texts: Sequence[Sequence[str]]) -> int:
    """How many (locale, word) pairs of ``texts[entity][locale]`` write a word two or more locales
    write: the candidate set of every split (each held-out word stays in training in its locale)."""
    locales_of: dict[str, set[int]] = {}
    for entity in texts:
        for locale, text in enumerate(entity):
            for word in tokenize(text):
                locales_of.setdefault(word, set()).add(locale)
    return sum(len(locales) for locales in locales_of.values() if len(locales) >= 2)


def multiway_corpus(name: str, locales: Sequence[str], texts: Sequence[Sequence[str]], held_out: HeldOut,
                    test_fraction: float, rng: np.random.Generator) -> Corpus:
    """``texts[entity][locale]`` as a corpus: every locale pair of every entity, split by ``held_out``."""
    vocabulary: dict[str, int] = {}
    tokenized = [[[vocabulary.setdefault(word, len(vocabulary) + 1) for word in tokenize(text)] for text in entity]
                 for entity in texts]
    width = max(len(words) for entity in tokenized for words in entity)
    n_lang = len(locales)
    language_pairs = [(a, b) for a in range(n_lang) for b in range(a + 1, n_lang)]
    translations = [(entity, pool) for entity in range(len(texts)) for pool in range(len(language_pairs))]
    vocab_size = len(vocabulary) + 1
    if held_out == "translations":
        is_test = _held_out_translations(translations, language_pairs, len(texts), n_lang, test_fraction, rng)
    else:
        held = _held_out_entities(tokenized, vocab_size, test_fraction, rng)
        is_test = np.array([held[entity] for entity, _ in translations], dtype=bool)

    def pairs(selected: np.ndarray) -> ParallelSet:
        chosen = [translations[i] for i in np.flatnonzero(selected)]
        source = [tokenized[entity][language_pairs[pool][0]] for entity, pool in chosen]
        target = [tokenized[entity][language_pairs[pool][1]] for entity, pool in chosen]
        return ParallelSet(_widened(source, width), np.array([language_pairs[p][0] for _, p in chosen]),
                           _widened(target, width), np.array([language_pairs[p][1] for _, p in chosen]),
                           np.array([pool for _, pool in chosen]))

    contested = disjoint_meaning_tokens(tokenized, n_lang, vocab_size)
    names = ("<pad>", *vocabulary)
    pools = minimal_pair_pools(pairs(np.ones_like(is_test)), is_test, contested)
    return Corpus(name, tuple(locales), vocab_size, pairs(~is_test), pairs(is_test), contested, names, pools)


def minimal_pair_pools(pairs: ParallelSet, held_out: np.ndarray, contested: np.ndarray) -> MinimalPairs:
    """For each locale pool of ``pairs`` and each word contested in either of its locales, the pairs
    with the word on one side or the other as one retrieval pool, kept where the word is on each side
    somewhere in it and some pair is held out; the held-out ones are scored."""
    index: list[np.ndarray] = []
    for pool in np.unique(pairs.group):
        members = np.flatnonzero(pairs.group == pool)
        a, b = int(pairs.source_language[members[0]]), int(pairs.target_language[members[0]])
        for token in np.flatnonzero(contested[a] | contested[b]):
            on_a = (pairs.source[members] == token).any(1)
            on_b = (pairs.target[members] == token).any(1)
            chosen = members[on_a | on_b]
            if on_a.any() and on_b.any() and held_out[chosen].any():
                index.append(chosen)
    rows = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    group = np.repeat(np.arange(len(index)), [len(chosen) for chosen in index])
    return MinimalPairs(pairs.rows(rows, group), held_out[rows])


def _held_out_translations(translations: list[tuple[int, int]], language_pairs: list[tuple[int, int]],
                           n_entities: int, n_lang: int, test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Which (entity, language pair) translations to hold out: in ``rng``'s order, up to the fraction,
    each only if both of its names remain in another training pair of their entity."""
    in_training = np.full((n_entities, n_lang), n_lang - 1)
    is_test = np.zeros(len(translations), dtype=bool)
    wanted, held = round(test_fraction * len(translations)), 0
    for position in rng.permutation(len(translations)):
        if held == wanted:
            break
        entity, pool = translations[position]
        languages = list(language_pairs[pool])
        if (in_training[entity, languages] > 1).all():
            in_training[entity, languages] -= 1
            is_test[position] = True
            held += 1
    return is_test


def _held_out_entities(tokenized: list[list[list[int]]], vocab_size: int, test_fraction: float,
                       rng: np.random.Generator) -> np.ndarray:
    """Which entities to hold out: in ``rng``'s order, up to the fraction, each only if every
    (locale, token) it uses stays in another training entity (so fewer than the fraction may qualify)."""
    n_lang = len(tokenized[0])
    entities_using = np.zeros((n_lang, vocab_size), dtype=np.int64)
    for entity in tokenized:
        for language, words in enumerate(entity):
            entities_using[language, sorted(set(words))] += 1
    held = np.zeros(len(tokenized), dtype=bool)
    wanted = round(test_fraction * len(tokenized))
    for entity in rng.permutation(len(tokenized)):
        if held.sum() == wanted:
            break
        uses = [(language, sorted(set(words))) for language, words in enumerate(tokenized[entity])]
        if all((entities_using[language, words] > 1).all() for language, words in uses):
            for language, words in uses:
                entities_using[language, words] -= 1
            held[entity] = True
    return held


def _widened(sentences: list[list[int]], width: int) -> np.ndarray:
    padded = pad_sentences(sentences)
    out = np.full((padded.shape[0], width), PAD, dtype=np.int64)
    out[:, : padded.shape[1]] = padded
    return out


def disjoint_meaning_tokens(tokenized: list[list[list[int]]], n_lang: int, vocab_size: int) -> np.ndarray:
    """(language, token) is contested when its entities and the other languages' are disjoint."""
    meanings: dict[tuple[int, int], set[int]] = {}
    for entity, names in enumerate(tokenized):
        for language, words in enumerate(names):
            for token in words:
                meanings.setdefault((language, token), set()).add(entity)
    contested = np.zeros((n_lang, vocab_size), dtype=bool)
    for (language, token), entities in meanings.items():
        others = [meanings.get((other, token)) for other in range(n_lang) if other != language]
        others = [entities_other for entities_other in others if entities_other]
        if others and all(entities.isdisjoint(entities_other) for entities_other in others):
            contested[language, token] = True
    return contested
