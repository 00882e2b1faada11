"""Synthetic languages whose contested tokens are known by construction.

Hidden concepts are rendered by L languages. Every concept has its own word form per language,
except where a shared form takes its place. Three kinds of shared form, each used by m languages
(m drawn uniformly from 2..L whatever the kind):

- ``cognate_rate`` * concepts cognates: one concept, one form in m languages (sharing the row is
  right);
- ``false_friend_rate`` * concepts false friends: a different concept in each of the m languages
  (every such (language, token) is contested);
- ``partial_false_friend_rate`` * concepts partial false friends: a cognate whose form, in a random
  non-empty subset of its languages, also means a second concept of that language (senses that
  differ only in some contexts). The (language, token)s with the extra sense are contested; how
  often they are used in it follows the concepts' frequencies, so the conflict is graded.

Wherever a shared form takes a concept's place, the language keeps its own form as a synonym and
writes it instead in a share of its sentences drawn uniformly from [0, ``synonym_rate``]: a cognate
is not always translated by itself (and every kind of shared form loses uses alike, so synonyms
carry no frequency cue).

Training pairs are loose translations: each concept slot of the target is replaced by a random
concept with probability ``alignment_noise``. Together with synonyms and partial senses this
keeps every counting cue imperfect: how often a form appears on both sides of one pair (the
alignment count) no longer separates the contested pairs exactly. The design keeps the other
trivial cues away from the truth:

- m is drawn independently of the kind, so counting a form's languages says little;
- concept frequencies are log-normal (``frequency_spread``) and drawn from their own stream
  (``false_friend_boost`` > 1 plants a frequency cue on purpose, for tests; the suites leave it at
  1). A form with two senses is used more often than one with one: polysemy carries a mild
  frequency cue, as in real languages, which every trial measures (``frequency_auroc``);
- token ids are a random permutation, so no tie broken by position carries the kind of a form.

Sentences are bags of concepts rendered in two languages; test sentences are fresh bags from a
separate stream (held-out pairs, no alignment noise). A ``twin_fraction`` of each test pool is
built from minimal pairs: a bag with one sense of a contested form and its twin with another
language's sense in that slot (same rest), so a model that reads the shared form identically in
both languages meets the distractor its confusion predicts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.services.seeding import NumpyStreams
from harness.tasks.vocab.corpus import PAD, Corpus, ParallelSet

COGNATE, FALSE_FRIEND, PARTIAL = 0, 1, 2


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
    partial_false_friend_rate: float = 0.0
    synonym_rate: float = 0.0  # most a language writes its own synonym in place of a cognate
    alignment_noise: float = 0.0  # chance a training target's concept slot is a random concept


@dataclass(frozen=True)
class Lexicon:
    """``forms[language, concept]``: the token a language writes for a concept (two concepts of one
    language share a token where a partial false friend has its extra sense); ``synonym``: the
    language's own token where a shared form took the concept's place (PAD where none) and
    ``synonym_share``: how often it is written instead; ``contested[language, token]``: the truth mask."""

    forms: np.ndarray
    synonym: np.ndarray
    synonym_share: np.ndarray
    contested: np.ndarray
    vocab_size: int

    def senses(self, language: int, token: int) -> np.ndarray:
        return np.flatnonzero(self.forms[language] == token)


def build_lexicon(spec: SyntheticSpec, rng: np.random.Generator) -> Lexicon:
    """Forms, synonyms and the contested truth of one seed's languages."""
    n_lang, n_con = spec.n_languages, spec.n_concepts
    own = np.arange(n_lang * n_con).reshape(n_con, n_lang).T.copy()  # own form per (language, concept)
    forms, synonym = own.copy(), np.full((n_lang, n_con), -1)
    taken = np.zeros((n_lang, n_con), dtype=bool)
    counts = [int(round(rate * n_con)) for rate in (spec.cognate_rate, spec.false_friend_rate,
                                                    spec.partial_false_friend_rate)]
    kinds = rng.permutation(np.repeat([COGNATE, FALSE_FRIEND, PARTIAL], counts))
    contested_uses: list[tuple[np.ndarray, int]] = []
    next_form = own.size
    for kind in kinds:
        users = rng.choice(n_lang, size=int(rng.integers(2, n_lang + 1)), replace=False)
        if kind == FALSE_FRIEND:
            concepts = _free_concepts(taken, users, rng)
            if concepts is None:
                continue
            contested_uses.append((users, next_form))
        else:
            concept = _cognate_meaning(taken, users, rng)
            if concept is None:
                continue
            concepts = np.full(users.size, concept)
            if kind == PARTIAL:
                divergent = _divergent_users(users, rng)
                with_shared = taken.copy()
                with_shared[users, concept] = True
                extra = _free_concepts(with_shared, divergent, rng)
                if extra is None:
                    continue
                forms[divergent, extra] = next_form
                synonym[divergent, extra] = own[divergent, extra]
                taken[divergent, extra] = True
                contested_uses.append((divergent, next_form))
        forms[users, concepts] = next_form
        synonym[users, concepts] = own[users, concepts]
        taken[users, concepts] = True
        next_form += 1
    share = np.where(synonym >= 0, spec.synonym_rate * rng.random((n_lang, n_con)), 0.0)
    used, inverse = np.unique(np.concatenate([forms.reshape(-1), synonym[synonym >= 0]]), return_inverse=True)
    token_of = rng.permutation(used.size) + PAD + 1
    forms = token_of[inverse[: forms.size]].reshape(n_lang, n_con)
    synonym_tokens = np.full((n_lang, n_con), PAD)
    synonym_tokens[synonym >= 0] = token_of[inverse[forms.size:]]
    contested = np.zeros((n_lang, used.size + 1), dtype=bool)
    for languages, form in contested_uses:
        contested[languages, token_of[np.searchsorted(used, form)]] = True
    return Lexicon(forms, synonym_tokens, share, contested, used.size + 1)


def _cognate_meaning(taken: np.ndarray, users: np.ndarray, rng: np.random.Generator) -> int | None:
    """One concept free in every user language (its form there becomes the cognate)."""
    free = np.flatnonzero(~taken[users].any(0))
    return int(rng.choice(free)) if free.size else None


def _divergent_users(users: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random non-empty subset of a partial false friend's languages (each kept with probability 1/2)."""
    keep = rng.random(users.size) < 0.5
    keep[int(rng.integers(users.size))] = True
    return users[keep]


def _free_concepts(taken: np.ndarray, users: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """A different free concept for each user language."""
    chosen: list[int] = []
    for language in users:
        free = np.setdiff1d(np.flatnonzero(~taken[language]), chosen)
        if not free.size:
            return None
        chosen.append(int(rng.choice(free)))
    return np.array(chosen)


def concept_weights(spec: SyntheticSpec, lexicon: Lexicon, rng: np.random.Generator) -> np.ndarray:
    """How often each concept is drawn: log-normal, independent of the lexicon unless boosted."""
    forms = lexicon.forms
    weights = np.exp(spec.frequency_spread * rng.standard_normal(forms.shape[1]))
    involved = np.zeros(forms.shape[1], dtype=bool)
    for language in range(forms.shape[0]):
        involved |= lexicon.contested[language, forms[language]]
    weights = np.where(involved, spec.false_friend_boost * weights, weights)
    return weights / weights.sum()


def _random_bag(spec: SyntheticSpec, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    length = int(rng.integers(spec.min_length, spec.max_length + 1))
    return rng.choice(weights.size, size=length, replace=False, p=weights)


def _loose(bag: np.ndarray, noise: float, n_concepts: int, rng: np.random.Generator) -> np.ndarray:
    """The bag with each concept replaced by a random one with probability ``noise``."""
    replaced = rng.random(bag.size) < noise
    return np.where(replaced, rng.integers(0, n_concepts, size=bag.size), bag)


def _twin_bags(spec: SyntheticSpec, meanings: tuple[int, int], weights: np.ndarray,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two bags identical but for one slot: two senses of a contested form."""
    rest_weights = weights.copy()
    rest_weights[list(meanings)] = 0.0
    length = int(rng.integers(max(spec.min_length, 1), spec.max_length + 1))
    rest = rng.choice(weights.size, size=length - 1, replace=False, p=rest_weights / rest_weights.sum())
    return np.append(rest, meanings[0]), np.append(rest, meanings[1])


def _contested_senses_between(lexicon: Lexicon, a: int, b: int) -> list[tuple[int, int]]:
    """(sense in a, sense in b) of each form a and b both write, contested in either, where the two
    senses differ: the minimal pairs the form's confusion predicts."""
    shared = np.flatnonzero((lexicon.contested[a] | lexicon.contested[b])
                            & np.isin(np.arange(lexicon.vocab_size), lexicon.forms[a])
                            & np.isin(np.arange(lexicon.vocab_size), lexicon.forms[b]))
    return [(int(x), int(y)) for token in shared for x in lexicon.senses(a, token)
            for y in lexicon.senses(b, token) if x != y]


def _test_pool(spec: SyntheticSpec, lexicon: Lexicon, weights: np.ndarray, a: int, b: int,
               rng: np.random.Generator) -> list[np.ndarray]:
    twins = _contested_senses_between(lexicon, a, b)
    size = spec.test_pairs_per_language_pair
    n_twins = int(spec.twin_fraction * size) // 2 if twins else 0
    bags: list[np.ndarray] = []
    for _ in range(n_twins):
        bags.extend(_twin_bags(spec, twins[int(rng.integers(len(twins)))], weights, rng))
    bags.extend(_random_bag(spec, weights, rng) for _ in range(size - len(bags)))
    return bags


def _render(lexicon: Lexicon, languages: np.ndarray, bags: list[np.ndarray], width: int,
            rng: np.random.Generator) -> np.ndarray:
    """Each bag's concepts in its language's word forms (a cognate's synonym in its share of
    uses), PAD-padded to ``width``."""
    out = np.full((len(bags), width), PAD, dtype=np.int64)
    for row, (language, bag) in enumerate(zip(languages, bags)):
        use_synonym = rng.random(bag.size) < lexicon.synonym_share[language, bag]
        out[row, : bag.size] = np.where(use_synonym, lexicon.synonym[language, bag], lexicon.forms[language, bag])
    return out


def _parallel_set(spec: SyntheticSpec, lexicon: Lexicon, source_bags: list[np.ndarray],
                  target_bags: list[np.ndarray], languages: np.ndarray, group: np.ndarray,
                  rng: np.random.Generator) -> ParallelSet:
    source = _render(lexicon, languages[:, 0], source_bags, spec.max_length, rng)
    target = _render(lexicon, languages[:, 1], target_bags, spec.max_length, rng)
    return ParallelSet(source, languages[:, 0].copy(), target, languages[:, 1].copy(), group)


def synthetic_corpus(spec: SyntheticSpec, streams: NumpyStreams) -> Corpus:
    """Lexicon, training pairs and held-out test pairs, each from its own named stream of the seed."""
    lexicon_rng, frequency_rng, train_rng, test_rng = (
        streams("synthetic", part) for part in ("lexicon", "frequency", "train", "test"))
    lexicon = build_lexicon(spec, lexicon_rng)
    weights = concept_weights(spec, lexicon, frequency_rng)
    n_lang, n_con = spec.n_languages, spec.n_concepts
    ordered = np.array([(a, b) for a in range(n_lang) for b in range(n_lang) if a != b])
    train_languages = ordered[train_rng.integers(0, len(ordered), size=spec.train_pairs)]
    train_bags = [_random_bag(spec, weights, train_rng) for _ in range(spec.train_pairs)]
    loose_bags = [_loose(bag, spec.alignment_noise, n_con, train_rng) for bag in train_bags]
    train = _parallel_set(spec, lexicon, train_bags, loose_bags, train_languages,
                          np.zeros(spec.train_pairs, dtype=np.int64), train_rng)
    test_bags, test_languages, test_group = [], [], []
    for pool, (a, b) in enumerate((a, b) for a in range(n_lang) for b in range(a + 1, n_lang)):
        bags = _test_pool(spec, lexicon, weights, a, b, test_rng)
        test_bags += bags
        test_languages += [(a, b)] * len(bags)
        test_group += [pool] * len(bags)
    test = _parallel_set(spec, lexicon, test_bags, test_bags, np.array(test_languages), np.array(test_group),
                         test_rng)
    names = tuple(f"L{index}" for index in range(n_lang))
    return Corpus("synthetic", names, lexicon.vocab_size, train, test, lexicon.contested)
