"""Synthetic languages whose contested tokens are known by construction.

Hidden concepts are rendered by L languages. Every concept has its own word form per language,
except where a shared form takes its place: ``cognate_rate`` * concepts cognate forms (one concept,
one form in m languages: sharing the row is right) and ``false_friend_rate`` * concepts false-friend
forms (one form in m languages, each using it for a different concept: every such (language, token)
is truly contested). The design keeps the trivial cues away from the truth:

- m, the number of languages sharing a form, is drawn uniformly from 2..L for every shared form,
  whatever its kind, so counting a form's languages says nothing about whether it is contested;
- concept frequencies are log-normal (``frequency_spread``) and drawn from their own stream, so a
  pair's training count says nothing either (``false_friend_boost`` > 1 plants a frequency cue on
  purpose, for tests; the suites leave it at 1);
- token ids are a random permutation, so no tie broken by position carries the kind of a form.

Sentences are bags of concepts rendered in two languages; test sentences are fresh bags from a
separate stream (held-out pairs). A ``twin_fraction`` of each test pool is built from minimal
pairs: a bag with a false friend's meaning and its twin with the form's other meaning in that
slot (same rest), so a model that reads the shared form identically in both languages meets the
distractor its confusion predicts.
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
    false_friend_boost: float  # how much more often false-friend concepts occur (1: no frequency cue)
    frequency_spread: float  # sigma of the log-normal concept frequencies
    min_length: int
    max_length: int
    train_pairs: int
    test_pairs_per_language_pair: int
    twin_fraction: float


def build_lexicon(spec: SyntheticSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Forms ``(languages, concepts)`` token ids, the contested truth mask, and the vocab size."""
    n_lang, n_con = spec.n_languages, spec.n_concepts
    forms = np.arange(n_lang * n_con).reshape(n_con, n_lang).T.copy()  # own form per (language, concept)
    taken = np.zeros((n_lang, n_con), dtype=bool)
    kinds = rng.permutation(np.repeat([False, True], [int(round(spec.cognate_rate * n_con)),
                                                       int(round(spec.false_friend_rate * n_con))]))
    contested_forms = []
    next_form = forms.size
    for false_friend in kinds:
        users = rng.choice(n_lang, size=int(rng.integers(2, n_lang + 1)), replace=False)
        concepts = _false_friend_meanings(taken, users, rng) if false_friend else _cognate_meaning(taken, users, rng)
        if concepts is None:
            continue
        forms[users, concepts] = next_form
        taken[users, concepts] = True
        if false_friend:
            contested_forms.append(next_form)
        next_form += 1
    used, forms = np.unique(forms, return_inverse=True)
    token_of = rng.permutation(used.size) + PAD + 1
    forms = token_of[forms.reshape(n_lang, n_con)]
    contested = np.zeros((n_lang, used.size + 1), dtype=bool)
    for form in contested_forms:
        token = token_of[np.searchsorted(used, form)]
        contested[np.flatnonzero((forms == token).any(1)), token] = True
    return forms, contested, used.size + 1


def _cognate_meaning(taken: np.ndarray, users: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """One concept free in every user language (its form there becomes the cognate)."""
    free = np.flatnonzero(~taken[users].any(0))
    return np.full(users.size, rng.choice(free)) if free.size else None


def _false_friend_meanings(taken: np.ndarray, users: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """A different free concept for each user language."""
    chosen: list[int] = []
    for language in users:
        free = np.setdiff1d(np.flatnonzero(~taken[language]), chosen)
        if not free.size:
            return None
        chosen.append(int(rng.choice(free)))
    return np.array(chosen)


def concept_weights(spec: SyntheticSpec, contested: np.ndarray, forms: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    """How often each concept is drawn: log-normal, independent of the lexicon unless boosted."""
    weights = np.exp(spec.frequency_spread * rng.standard_normal(forms.shape[1]))
    involved = np.zeros(forms.shape[1], dtype=bool)
    for language in range(forms.shape[0]):
        involved |= contested[language, forms[language]]
    weights = np.where(involved, spec.false_friend_boost * weights, weights)
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
    lexicon_rng, frequency_rng, train_rng, test_rng = (
        streams("synthetic", part) for part in ("lexicon", "frequency", "train", "test"))
    forms, contested, vocab_size = build_lexicon(spec, lexicon_rng)
    weights = concept_weights(spec, contested, forms, frequency_rng)
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
