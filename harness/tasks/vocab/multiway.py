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
    data = _Multiway(locales, texts, held_out)
    order = rng.permutation(data.units)
    held = _hold_in_order(data.rule(), order, round(test_fraction * data.units), np.zeros(data.units, dtype=bool))
    return data.corpus(name, held)


def multiway_folds(name: str, locales: Sequence[str], texts: Sequence[Sequence[str]], held_out: HeldOut,
                   test_fraction: float, folds: int, rng: np.random.Generator) -> list[Corpus]:
    """``folds`` corpora of ``texts`` that together score every contested item once.

    A contested item is a unit of the held-out rule (a translation, or an entity) with a pair in some
    minimal-pair pool. In ``rng``'s order each goes to the next fold that can hold it out under the
    rule (every held-out token stays seen in its locale), opening a fold of its own where the others'
    items block it; an item the rule never lets go (a word of it is nowhere else in its locale) stays
    in training everywhere, as in any single split. Each fold is then filled with other units, in the same order,
    up to ``test_fraction`` of all units, so every fold trains on about as much as one held-out
    share does; fold items of other folds train.
    """
    data = _Multiway(locales, texts, held_out)
    items = data.contested_units()
    order = rng.permutation(data.units)
    rules = [data.rule() for _ in range(folds)]
    held = [np.zeros(data.units, dtype=bool) for _ in range(folds)]
    alone = data.rule()
    for position, unit in enumerate(order[items[order]]):
        if not alone.allows(unit):
            continue  # no split can hold it out: one of its words is nowhere else in its locale
        fold = next((fold for fold in ((position + shift) % len(rules) for shift in range(len(rules)))
                     if rules[fold].allows(unit)), None)
        if fold is None:
            fold = _make_room(rules, held, unit)
        if fold is None:  # every fold's other items block it, and none can move: it opens a fold of its own
            fold = len(rules)
            rules.append(data.rule())
            held.append(np.zeros(data.units, dtype=bool))
        rules[fold].hold(unit)
        held[fold][unit] = True
    wanted = round(test_fraction * data.units)
    return [data.corpus(name, _hold_in_order(rule, order, wanted, mask, skip=items)) for rule, mask in zip(rules, held)]


def _make_room(rules: list["_TranslationRule | _EntityRule"], held: list[np.ndarray], unit: int) -> int | None:
    """A fold ``unit`` fits once one item held there moves to another fold that takes it (the move is made),
    or None."""
    for fold, (rule, mask) in enumerate(zip(rules, held)):
        for other_unit in np.flatnonzero(mask):
            rule.release(other_unit)
            target = next((target for target, other in enumerate(rules)
                           if target != fold and other.allows(other_unit)), None) if rule.allows(unit) else None
            if target is not None:
                mask[other_unit] = False
                rules[target].hold(other_unit)
                held[target][other_unit] = True
                return fold
            rule.hold(other_unit)
    return None


def _pairs_of(n_lang: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(n_lang) for b in range(a + 1, n_lang)]


class _Multiway:
    """The tokenized texts, their translations and contested proxy, before any split."""

    def __init__(self, locales: Sequence[str], texts: Sequence[Sequence[str]], held_out: HeldOut) -> None:
        self.vocabulary: dict[str, int] = {}
        self.tokenized = [[[self.vocabulary.setdefault(word, len(self.vocabulary) + 1) for word in tokenize(text)]
                           for text in entity] for entity in texts]
        self.width = max(len(words) for entity in self.tokenized for words in entity)
        self.locales, self.held_out = tuple(locales), held_out
        self.language_pairs = _pairs_of(len(locales))
        self.translations = [(entity, pool) for entity in range(len(texts))
                             for pool in range(len(self.language_pairs))]
        self.vocab_size = len(self.vocabulary) + 1
        self.contested = disjoint_meaning_tokens(self.tokenized, len(locales), self.vocab_size)
        self.units = len(self.translations) if held_out == "translations" else len(texts)

    def rule(self) -> "_TranslationRule | _EntityRule":
        if self.held_out == "translations":
            return _TranslationRule(self.translations, self.language_pairs, len(self.tokenized), len(self.locales))
        return _EntityRule(self.tokenized, self.vocab_size)

    def translations_held(self, held_units: np.ndarray) -> np.ndarray:
        """Which translations a mask over the rule's units holds out."""
        if self.held_out == "translations":
            return held_units
        return np.array([held_units[entity] for entity, _ in self.translations], dtype=bool)

    def pairs(self, selected: np.ndarray) -> ParallelSet:
        chosen = [self.translations[i] for i in np.flatnonzero(selected)]
        first = np.array([self.language_pairs[pool][0] for _, pool in chosen], dtype=np.int64)
        second = np.array([self.language_pairs[pool][1] for _, pool in chosen], dtype=np.int64)
        source = [self.tokenized[entity][int(language)] for (entity, _), language in zip(chosen, first)]
        target = [self.tokenized[entity][int(language)] for (entity, _), language in zip(chosen, second)]
        return ParallelSet(_widened(source, self.width), first, _widened(target, self.width), second,
                           np.array([pool for _, pool in chosen], dtype=np.int64))

    def pools(self, is_test: np.ndarray) -> MinimalPairs:
        return minimal_pair_pools(self.pairs(np.ones_like(is_test)), is_test, self.contested)

    def contested_units(self) -> np.ndarray:
        """Units with a translation in some minimal-pair pool (pool membership does not depend on the split)."""
        every = self.pools(np.ones(len(self.translations), dtype=bool))
        units = np.zeros(self.units, dtype=bool)
        for translation in every.translation:
            unit = translation if self.held_out == "translations" else self.translations[translation][0]
            units[unit] = True
        return units

    def corpus(self, name: str, held_units: np.ndarray) -> Corpus:
        is_test = self.translations_held(held_units)
        return Corpus(name, self.locales, self.vocab_size, self.pairs(~is_test), self.pairs(is_test), self.contested,
                      ("<pad>", *self.vocabulary), self.pools(is_test))


def minimal_pair_pools(pairs: ParallelSet, held_out: np.ndarray, contested: np.ndarray) -> MinimalPairs:
    """For each locale pool of ``pairs`` and each word contested in either of its locales, the pairs
    with the word on one side or the other as one retrieval pool, kept where the word is on each side
    somewhere in it and some pair is held out; the held-out ones are scored."""
    index: list[np.ndarray] = []
    words: list[int] = []
    for pool in np.unique(pairs.group):
        members = np.flatnonzero(pairs.group == pool)
        a, b = int(pairs.source_language[members[0]]), int(pairs.target_language[members[0]])
        for token in np.flatnonzero(contested[a] | contested[b]):
            on_a = (pairs.source[members] == token).any(1)
            on_b = (pairs.target[members] == token).any(1)
            chosen = members[on_a | on_b]
            if on_a.any() and on_b.any() and held_out[chosen].any():
                index.append(chosen)
                words.append(int(token))
    rows = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    sizes = [len(chosen) for chosen in index]
    group = np.repeat(np.arange(len(index)), sizes)
    return MinimalPairs(pairs.rows(rows, group), held_out[rows], rows,
                        np.repeat(np.array(words, dtype=np.int64), sizes))


def _hold_in_order(rule: "_TranslationRule | _EntityRule", order: np.ndarray, wanted: int, held: np.ndarray,
                   skip: np.ndarray | None = None) -> np.ndarray:
    """``held`` topped up with units in ``order`` (none in ``skip``) that ``rule`` lets go, up to ``wanted``."""
    held = held.copy()
    count = int(held.sum())
    for unit in order:
        if count >= wanted:
            break
        if held[unit] or (skip is not None and skip[unit]) or not rule.allows(unit):
            continue
        rule.hold(unit)
        held[unit] = True
        count += 1
    return held


class _TranslationRule:
    """An (entity, language pair) translation may be held out while both of its names remain in
    another training pair of their entity."""

    def __init__(self, translations: list[tuple[int, int]], language_pairs: list[tuple[int, int]], n_entities: int,
                 n_lang: int) -> None:
        self.translations, self.language_pairs = translations, language_pairs
        self.in_training = np.full((n_entities, n_lang), n_lang - 1)

    def _names(self, unit: int) -> tuple[int, list[int]]:
        entity, pool = self.translations[unit]
        return entity, list(self.language_pairs[pool])

    def allows(self, unit: int) -> bool:
        entity, languages = self._names(unit)
        return bool((self.in_training[entity, languages] > 1).all())

    def hold(self, unit: int) -> None:
        entity, languages = self._names(unit)
        self.in_training[entity, languages] -= 1

    def release(self, unit: int) -> None:
        entity, languages = self._names(unit)
        self.in_training[entity, languages] += 1


class _EntityRule:
    """A whole entity may be held out while every (locale, token) it uses remains in a training entity
    (so fewer than the fraction may qualify)."""

    def __init__(self, tokenized: list[list[list[int]]], vocab_size: int) -> None:
        self.uses = [[(language, sorted(set(words))) for language, words in enumerate(entity)] for entity in tokenized]
        self.entities_using = np.zeros((len(tokenized[0]), vocab_size), dtype=np.int64)
        for uses in self.uses:
            for language, words in uses:
                self.entities_using[language, words] += 1

    def allows(self, unit: int) -> bool:
        return all((self.entities_using[language, words] > 1).all() for language, words in self.uses[unit])

    def hold(self, unit: int) -> None:
        for language, words in self.uses[unit]:
            self.entities_using[language, words] -= 1

    def release(self, unit: int) -> None:
        for language, words in self.uses[unit]:
            self.entities_using[language, words] += 1


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
