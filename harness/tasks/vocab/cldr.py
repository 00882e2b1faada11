"""Real multi-way parallel phrases: CLDR display names shipped with ``babel``.

Every entity (a territory, language, script or currency code) has a name in each locale, so
names are translations of each other. Tokens are casefolded words, and one token id serves every
locale that writes the same word, as a multilingual tokenizer would: German "Island" (Iceland)
and English "island" share a row. Contested truth is a proxy read off the entity codes: a
locale's token is contested when none of the entities it names is named with that token in any
other locale (same form, disjoint meanings).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from babel import Locale
from babel.localedata import locale_identifiers

from harness.tasks.vocab.corpus import Corpus, refuse_unknown
from harness.tasks.vocab.multiway import multiway_corpus, multiway_folds

CATEGORIES = ("territories", "languages", "scripts", "currencies")
MIN_LOCALES = 3


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
    texts = [[entity[code] for code in locales] for entity in entities]
    return multiway_corpus("cldr", locales, texts, "translations", test_fraction, rng)


def cldr_folds(locales: Sequence[str], categories: Sequence[str], test_fraction: float, folds: int,
               rng: np.random.Generator) -> list[Corpus]:
    """As ``cldr_corpus``, in ``folds`` (or more) corpora that hold out every contested translation once."""
    entities = display_names(locales, categories)
    texts = [[entity[code] for code in locales] for entity in entities]
    return multiway_folds("cldr", locales, texts, "translations", test_fraction, folds, rng)
