"""Synthetic languages whose contested tokens are known by construction.

Hidden concepts are rendered by L languages. Each concept has its own word form per language,
except that a ``cognate_rate`` share of concepts use one form in every language (same form,
same meaning: sharing the row is right) and ``false_friend_rate`` * concepts forms are false
friends: one form used by two languages for two different concepts, the truly contested
(language, token) pairs. Sentences are bags of concepts rendered in two languages; test
sentences are fresh bags drawn from a separate random stream (held-out pairs). A
``twin_fraction`` of each test pool is built from minimal pairs: a bag with a false friend's
concept and its twin with the friend's other meaning in its place (same rest), so a model that
reads the shared form identically in both languages meets the distractor its confusion predicts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.services.seeding import NumpyStreams
from harness.tasks.vocab.corpus import PAD, Corpus, ParallelSet


@dataclass(frozen=True)
class SyntheticSpec:
    n_languages: int
    n_concepts: int
    cognate_rate: float
    false_friend_rate: float
    false_friend_boost: float  # how much more often false-friend concepts occur than others
    min_length: int
    max_length: int
    train_pairs: int
    test_pairs_per_language_pair: int
    twin_fraction: float


def build_lexicon(spec: SyntheticSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Forms ``(languages, concepts)`` token ids, the contested truth mask, and the vocab size."""
    n_lang, n_con = spec.n_languages, spec.n_concepts
    forms = np.zeros((n_lang, n_con), dtype=np.int64)
    next_token = PAD + 1
    cognate = rng.random(n_con) < spec.cognate_rate
    for concept in range(n_con):
        if cognate[concept]:
            forms[:, concept] = next_token
            next_token += 1
        else:
            forms[:, concept] = np.arange(next_token, next_token + n_lang)
            next_token += n_lang
    free = [list(rng.permutation(np.flatnonzero(~cognate))) for _ in range(n_lang)]
    contested_pairs = []
    for _ in range(int(round(spec.false_friend_rate * n_con))):
        first, second = rng.choice(n_lang, size=2, replace=False)
        if not free[first] or not free[second]:
            break
        concept_first = free[first].pop()
        concept_second = next(c for c in free[second] if c != concept_first)
        free[second].remove(concept_second)
        forms[first, concept_first] = next_token
        forms[second, concept_second] = next_token
        contested_pairs += [(first, next_token), (second, next_token)]
        next_token += 1
    contested = np.zeros((n_lang, next_token), dtype=bool)
    for language, token in contested_pairs:
        contested[language, token] = True
    return forms, contested, next_token


def _concept_weights(forms: np.ndarray, contested: np.ndarray, boost: float) -> np.ndarray:
    involved = np.zeros(forms.shape[1], dtype=bool)
    for language in range(forms.shape[0]):
        involved |= contested[language, forms[language]]
    weights = np.where(involved, boost, 1.0)
    return weights / weights.sum()


def _parallel_set(spec: SyntheticSpec, forms: np.ndarray, bags: list[np.ndarray], languages: np.ndarray,
                  group: np.ndarray) -> ParallelSet:
    source = _render(forms, languages[:, 0], bags, spec.max_length)
    target = _render(forms, languages[:, 1], bags, spec.max_length)
    return ParallelSet(source, languages[:, 0].copy(), target, languages[:, 1].copy(), group)


def _random_bag(spec: SyntheticSpec, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    length = int(rng.integers(spec.min_length, spec.max_length + 1))
    return rng.choice(weights.size, size=length, replace=False, p=weights)


def _twin_bags(spec: SyntheticSpec, meanings: tuple[int, int], weights: np.ndarray,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two bags identical but for one slot: a false friend's two meanings."""
    rest_weights = weights.copy()
    rest_weights[list(meanings)] = 0.0
    length = int(rng.integers(max(spec.min_length, 1), spec.max_length + 1))
    rest = rng.choice(weights.size, size=length - 1, replace=False, p=rest_weights / rest_weights.sum())
    return np.append(rest, meanings[0]), np.append(rest, meanings[1])


def _false_friends_between(forms: np.ndarray, contested: np.ndarray, a: int, b: int) -> list[tuple[int, int]]:
    """(concept in a, concept in b) for each form that a and b both use with different meanings."""
    shared = np.flatnonzero(contested[a] & contested[b])
    return [(int(np.flatnonzero(forms[a] == t)[0]), int(np.flatnonzero(forms[b] == t)[0])) for t in shared]


def _test_pool(spec: SyntheticSpec, forms: np.ndarray, contested: np.ndarray, weights: np.ndarray,
               a: int, b: int, rng: np.random.Generator) -> list[np.ndarray]:
    friends = _false_friends_between(forms, contested, a, b)
    size = spec.test_pairs_per_language_pair
    n_twins = int(spec.twin_fraction * size) // 2 if friends else 0
    bags: list[np.ndarray] = []
    for _ in range(n_twins):
        bags.extend(_twin_bags(spec, friends[int(rng.integers(len(friends)))], weights, rng))
    bags.extend(_random_bag(spec, weights, rng) for _ in range(size - len(bags)))
    return bags


def _render(forms: np.ndarray, languages: np.ndarray, bags: list[np.ndarray], width: int) -> np.ndarray:
    """Each bag's concepts in its language's word forms, PAD-padded to ``width``."""
    out = np.full((len(bags), width), PAD, dtype=np.int64)
    for row, (language, bag) in enumerate(zip(languages, bags)):
        out[row, : bag.size] = forms[language, bag]
    return out


def synthetic_corpus(spec: SyntheticSpec, streams: NumpyStreams) -> Corpus:
    """Lexicon, training pairs and held-out test pairs, each from its own named stream of the seed."""
    lexicon_rng, train_rng, test_rng = (streams("synthetic", part) for part in ("lexicon", "train", "test"))
    forms, contested, vocab_size = build_lexicon(spec, lexicon_rng)
    weights = _concept_weights(forms, contested, spec.false_friend_boost)
    n_lang = spec.n_languages
    ordered = np.array([(a, b) for a in range(n_lang) for b in range(n_lang) if a != b])
    train_languages = ordered[train_rng.integers(0, len(ordered), size=spec.train_pairs)]
    train_bags = [_random_bag(spec, weights, train_rng) for _ in range(spec.train_pairs)]
    train = _parallel_set(spec, forms, train_bags, train_languages, np.zeros(spec.train_pairs, dtype=np.int64))
    test_bags, test_languages, test_group = [], [], []
    for pool, (a, b) in enumerate((a, b) for a in range(n_lang) for b in range(a + 1, n_lang)):
        bags = _test_pool(spec, forms, contested, weights, a, b, test_rng)
        test_bags += bags
        test_languages += [(a, b)] * len(bags)
        test_group += [pool] * len(bags)
    test = _parallel_set(spec, forms, test_bags, np.array(test_languages), np.array(test_group))
    names = tuple(f"L{index}" for index in range(n_lang))
    return Corpus("synthetic", names, vocab_size, train, test, contested)
