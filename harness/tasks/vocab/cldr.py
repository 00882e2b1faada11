"""Real multi-way parallel phrases: CLDR display names shipped with ``babel``.

Every entity (a territory, language, script or currency code) has a name in each locale, so
names are translations of each other. Tokens are casefolded words, and one token id serves every
locale that writes the same word, as a multilingual tokenizer would: German "Island" (Iceland)
and English "island" share a row. Contested truth is a proxy read off the entity codes: a
locale's token is contested when none of the entities it names is named with that token in any
other locale (same form, disjoint meanings).
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
from babel import Locale
from babel.localedata import locale_identifiers

from harness.tasks.vocab.corpus import PAD, Corpus, ParallelSet, pad_sentences, refuse_unknown

CATEGORIES = ("territories", "languages", "scripts", "currencies")
MIN_LOCALES = 3
_WORD = re.compile(r"\w+")


def display_names(locales: Sequence[str], categories: Sequence[str]) -> list[dict[str, str]]:
    """One ``{locale: name}`` dict per entity that every locale names, in a stable order."""
    refuse_unknown("locales", locales, locale_identifiers())
    refuse_unknown("categories", categories, CATEGORIES)
    loaded = [Locale.parse(code) for code in locales]
    entities = []
    for category in categories:
        tables = [getattr(locale, category) for locale in loaded]
        codes = sorted(set.intersection(*(set(table) for table in tables)))
        for code in codes:
            entities.append({name: str(table[code]) for name, table in zip(locales, tables)})
    return entities


def tokenize(name: str) -> list[str]:
    return _WORD.findall(name.casefold())


def cldr_corpus(locales: Sequence[str], categories: Sequence[str], test_fraction: float,
                rng: np.random.Generator) -> Corpus:
    """Every locale pair of every entity; a ``test_fraction`` of those translation pairs is held out.

    A pair is held out only while both of its names stay in a training pair of the same entity, so
    every held-out token was seen in training in its locale (with whole entities held out, most were
    not, and an unseen token's row stays random in every arm). The held-out pairs are new pairings of
    names that training aligned with other locales: bitext mining over a known lexicon.
    """
    if len(locales) < MIN_LOCALES:
        raise ValueError(f"the cldr workload needs at least {MIN_LOCALES} locales (a held-out pair's names must "
                         f"also train with a third), got {list(locales)}")
    entities = display_names(locales, categories)
    vocabulary: dict[str, int] = {}
    tokenized = [[[vocabulary.setdefault(word, len(vocabulary) + 1) for word in tokenize(entity[code])]
                  for code in locales] for entity in entities]
    width = max(len(words) for entity in tokenized for words in entity)
    n_lang = len(locales)
    language_pairs = [(a, b) for a in range(n_lang) for b in range(a + 1, n_lang)]
    translations = [(entity, pool) for entity in range(len(entities)) for pool in range(len(language_pairs))]
    is_test = _held_out(translations, language_pairs, len(entities), n_lang, test_fraction, rng)

    def pairs(selected: np.ndarray) -> ParallelSet:
        chosen = [translations[i] for i in np.flatnonzero(selected)]
        source = [tokenized[entity][language_pairs[pool][0]] for entity, pool in chosen]
        target = [tokenized[entity][language_pairs[pool][1]] for entity, pool in chosen]
        return ParallelSet(_widened(source, width), np.array([language_pairs[p][0] for _, p in chosen]),
                           _widened(target, width), np.array([language_pairs[p][1] for _, p in chosen]),
                           np.array([pool for _, pool in chosen]))

    vocab_size = len(vocabulary) + 1
    contested = _disjoint_meaning_tokens(tokenized, n_lang, vocab_size)
    names = ("<pad>", *vocabulary)
    return Corpus("cldr", tuple(locales), vocab_size, pairs(~is_test), pairs(is_test), contested, names)


def _held_out(translations: list[tuple[int, int]], language_pairs: list[tuple[int, int]], n_entities: int,
              n_lang: int, test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Which (entity, language pair) translations to hold out: in ``rng``'s order, up to the fraction,
    each only if both of its names remain in another training pair of their entity."""
    in_training = np.full((n_entities, n_lang), n_lang - 1)
    is_test = np.zeros(len(translations), dtype=bool)
    wanted, held = int(round(test_fraction * len(translations))), 0
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


def _widened(sentences: list[list[int]], width: int) -> np.ndarray:
    padded = pad_sentences(sentences)
    out = np.full((padded.shape[0], width), PAD, dtype=np.int64)
    out[:, : padded.shape[1]] = padded
    return out


def _disjoint_meaning_tokens(tokenized: list[list[list[int]]], n_lang: int, vocab_size: int) -> np.ndarray:
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
