"""Synthetic languages whose contested tokens are known by construction.

Hidden concepts are rendered by L languages. Each concept has its own word form per language,
except that a ``cognate_rate`` share of concepts use one form in every language (same form,
same meaning: sharing the row is right) and ``false_friend_rate`` * concepts forms are false
friends: one form used by two languages for two different concepts, the truly contested
(language, token) pairs. Sentences are bags of concepts rendered in two languages; test
sentences are fresh bags drawn from a separate random stream (held-out pairs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.tasks.vocab.corpus import PAD, Corpus, ParallelSet, pad_sentences


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


def _sample_pairs(spec: SyntheticSpec, forms: np.ndarray, weights: np.ndarray, languages: np.ndarray,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    sources, targets = [], []
    for source_language, target_language in languages:
        length = int(rng.integers(spec.min_length, spec.max_length + 1))
        concepts = rng.choice(forms.shape[1], size=length, replace=False, p=weights)
        sources.append(forms[source_language, concepts].tolist())
        targets.append(forms[target_language, concepts].tolist())
    return pad_sentences(sources), pad_sentences(targets)


def _parallel_set(spec: SyntheticSpec, forms: np.ndarray, weights: np.ndarray,
                  languages: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> ParallelSet:
    source, target = _sample_pairs(spec, forms, weights, languages, rng)
    width = spec.max_length
    return ParallelSet(_widen(source, width), languages[:, 0].copy(), _widen(target, width),
                       languages[:, 1].copy(), group)


def _widen(ids: np.ndarray, width: int) -> np.ndarray:
    out = np.full((ids.shape[0], width), PAD, dtype=np.int64)
    out[:, : ids.shape[1]] = ids
    return out


def synthetic_corpus(spec: SyntheticSpec, seed: int) -> Corpus:
    """Lexicon, training pairs and held-out test pairs for one seed."""
    lexicon_rng, train_rng, test_rng = (np.random.default_rng([seed, stream]) for stream in range(3))
    forms, contested, vocab_size = build_lexicon(spec, lexicon_rng)
    weights = _concept_weights(forms, contested, spec.false_friend_boost)
    n_lang = spec.n_languages
    ordered = np.array([(a, b) for a in range(n_lang) for b in range(n_lang) if a != b])
    train_languages = ordered[train_rng.integers(0, len(ordered), size=spec.train_pairs)]
    train = _parallel_set(spec, forms, weights, train_languages, np.zeros(spec.train_pairs, dtype=np.int64),
                          train_rng)
    unordered = [(a, b) for a in range(n_lang) for b in range(a + 1, n_lang)]
    per_pair = spec.test_pairs_per_language_pair
    test_languages = np.repeat(np.array(unordered), per_pair, axis=0)
    test_group = np.repeat(np.arange(len(unordered)), per_pair)
    test = _parallel_set(spec, forms, weights, test_languages, test_group, test_rng)
    names = tuple(f"L{index}" for index in range(n_lang))
    return Corpus("synthetic", names, vocab_size, train, test, contested)
