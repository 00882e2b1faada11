"""k-fold over contested items on the real-data workloads: every item scored once per seed."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from harness.execution.executor import run_single
from harness.tasks.base import numpy_stream
from harness.tasks.vocab.cldr import cldr_folds, display_names
from harness.tasks.vocab.corpus import PAD, Corpus
from harness.tasks.vocab.gettext import catalog_root, catalog_texts, gettext_folds
from harness.tasks.vocab.multiway import minimal_pair_pools, multiway_corpus, multiway_folds, tokenize
from harness.tasks.vocab.task import VocabTask

LOCALES = ("en", "de", "fr", "es", "it", "nl")


def _every_item(texts: list[list[str]], held_out: str) -> set[tuple[int, int]]:
    """(word, translation) of every contested pool entry whose unit the held-out rule can let go alone,
    worked out apart from the fold code: an entity only if each of its words is in another entity of
    its locale; a translation always (with three or more locales its names train with a third)."""
    corpus = multiway_corpus("all", tuple(f"l{i}" for i in range(len(texts[0]))), texts, "translations", 0.0,
                             np.random.default_rng(0))
    n_lang = len(texts[0])
    pools = minimal_pair_pools(_every_pair(corpus), np.ones(len(texts) * n_lang * (n_lang - 1) // 2, dtype=bool),
                               corpus.contested)
    words = [[set(tokenize(text)) for text in entity] for entity in texts]

    def holdable(translation: int) -> bool:
        if held_out == "translations":
            return True
        entity = translation // (n_lang * (n_lang - 1) // 2)
        return all(any(word in other[language] for j, other in enumerate(words) if j != entity)
                   for language, own in enumerate(words[entity]) for word in own)

    return {(word, translation) for word, translation in zip(pools.word.tolist(), pools.translation.tolist())
            if holdable(translation)}


def _every_pair(corpus: Corpus):
    """The corpus's pairs with none held out (test_fraction 0), in translation order."""
    assert len(corpus.test) == 0
    return corpus.train


def _scored(folds: list[Corpus]) -> Counter:
    """(word, translation) of every query of every fold, counted each time it is scored."""
    counts: Counter = Counter()
    for fold in folds:
        pools = fold.minimal_pairs
        counts.update(zip(pools.word[pools.scored].tolist(), pools.translation[pools.scored].tolist()))
    return counts


def _held_out_tokens_seen(fold: Corpus) -> bool:
    seen = fold.usage()
    for ids, languages in ((fold.test.source, fold.test.source_language), (fold.test.target, fold.test.target_language)):
        real = ids != PAD
        if not seen[np.repeat(languages, ids.shape[1])[real.reshape(-1)], ids[real]].all():
            return False
    return True


@pytest.mark.parametrize("seed", [0, 1])
def test_cldr_folds_score_every_contested_translation_exactly_once(seed: int) -> None:
    locales = ("en", "de", "fr", "es")
    texts = [[entity[code] for code in locales] for entity in display_names(locales, ("territories", "languages"))]
    folds = cldr_folds(locales, ("territories", "languages"), 0.6, 2, np.random.default_rng(seed))
    scored = _scored(folds)
    assert max(scored.values()) == 1, "an item scored twice"
    assert set(scored) == _every_item(texts, "translations"), "an item never scored (or one that is not an item)"
    assert len(scored) > 20
    for fold in folds:
        assert _held_out_tokens_seen(fold)
        assert abs(len(fold.test) - 0.6 * (len(fold.train) + len(fold.test))) <= 1, "filled to the held-out share"


@pytest.mark.parametrize("seed", [0, 700])
def test_gettext_folds_score_every_contested_message_the_rule_lets_go_exactly_once(seed: int) -> None:
    """Seed 700 needs a move: greedy placement alone left an item that fit neither fold."""
    texts = [list(entity) for entity in catalog_texts(LOCALES, catalog_root())]
    folds = gettext_folds(LOCALES, 0.2, 2, np.random.default_rng(seed))
    scored = _scored(folds)
    assert max(scored.values()) == 1, "an item scored twice"
    assert set(scored) == _every_item(texts, "entities"), "an item never scored (or one that is not an item)"
    assert len(folds) == 2 and all(_held_out_tokens_seen(fold) for fold in folds)


def test_an_item_no_fold_can_take_opens_a_fold_of_its_own() -> None:
    """"gift" in locale a (a present) is contested: locale b's "gift" is poison. The three a-messages
    with it are items, and with only them writing "gift" in a one fold holds at most two: asked for
    one fold, the third must open another."""
    texts = [["gift one", "geschenk uno", "x one"], ["gift two", "geschenk dos", "x two"],
             ["gift three", "geschenk tres", "x three"], ["one two", "uno dos", "one two"],
             ["three one", "tres uno", "three one"], ["two three", "dos tres", "two three"],
             ["poison", "gift", "poison"]]
    folds = multiway_folds("toy", ("a", "b", "c"), texts, "entities", 0.1, 1, np.random.default_rng(0))
    scored = _scored(folds)
    assert len(folds) >= 2 and max(scored.values()) == 1
    assert set(scored) == _every_item(texts, "entities")


@pytest.mark.integration  # the real task end to end, two folds of a small CLDR workload
def test_a_trial_pools_every_fold_query_once(tmp_path: Path) -> None:
    locales = ["en", "de", "fr"]
    params = {"workload.kind": "cldr", "workload.locales": locales, "workload.categories": ["territories"],
              "workload.test_fraction": 0.2, "workload.folds": 2, "steps": 5, "dim": 8, "interference_steps": 2,
              "interference_batches": 4, "throughput.measure": False, "index": "interference"}
    trial = run_single(VocabTask, params, seed=0, work_root=tmp_path)
    assert trial.status == "finished", trial.error
    folds = cldr_folds(locales, ["territories"], 0.2, 2, numpy_stream(0, "cldr-split"))
    texts = [[entity[code] for code in locales] for entity in display_names(locales, ["territories"])]
    assert trial.metrics["folds"] == len(folds)
    assert trial.metrics["contested_test_pairs"] == len(_every_item(texts, "translations"))
    assert len(list((tmp_path / "cache").glob("vocab-interference-*.pt"))) == len(folds), "one measurement a fold"
