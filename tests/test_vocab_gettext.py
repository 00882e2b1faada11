"""The real-bitext workload: gettext catalogs read into a multi-way parallel corpus, and the held-out
rule that keeps every test word seen in its locale."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fault_injection import hang_guard
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

from harness.tasks.vocab.corpus import PAD
from harness.tasks.vocab.gettext import catalog_root, catalog_texts, gettext_corpus
from harness.tasks.vocab.multiway import multiway_corpus

ENTRIES = {  # msgid -> {locale: translation}; None: that locale leaves it untranslated
    "Save %(name)s": {"de": "%(name)s speichern", "fr": "Enregistrer %(name)s"},
    "Delete": {"de": "Löschen", "fr": "Supprimer"},
    "Remove": {"de": "Löschen", "fr": "Retirer"},  # same German text as "Delete": dropped (a tie)
    "Add <b>user</b>": {"de": "Benutzer hinzufügen", "fr": None},  # untranslated in fr: dropped
    ("%(count)s item", "%(count)s items"): {"de": ("%(count)s Eintrag", "%(count)s Einträge"),
                                           "fr": ("%(count)s élément", "%(count)s éléments")},
}


def _fake_django(root: Path) -> Path:
    """A django-shaped folder: conf/locale/<code>/LC_MESSAGES/django.mo and an empty contrib/."""
    (root / "contrib").mkdir(parents=True)
    for code in ("de", "fr"):
        catalog = Catalog(locale=code)
        for msgid, translations in ENTRIES.items():
            if translations[code] is not None:
                catalog.add(msgid, translations[code])
        folder = root / "conf" / "locale" / code / "LC_MESSAGES"
        folder.mkdir(parents=True)
        with (folder / "django.mo").open("wb") as handle:
            write_mo(handle, catalog)
    return root


def test_catalogs_become_parallel_texts_without_placeholders_ties_or_gaps(tmp_path: Path) -> None:
    texts = catalog_texts(("en", "de", "fr"), _fake_django(tmp_path / "django"))
    assert set(texts) == {
        ("item", "eintrag", "élément"),  # plural: the singular forms; %(count)s is gone (a free cognate)
        ("delete", "löschen", "supprimer"),
        ("save", "speichern", "enregistrer"),
    }
    assert ("remove", "löschen", "retirer") not in texts, "a text another message already has is a retrieval tie"


def test_unknown_gettext_locale_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown gettext locales \['xx'\].*de, en, fr"):
        catalog_texts(("en", "xx"), _fake_django(tmp_path / "django"))


def test_entity_split_holds_out_whole_entities_whose_words_training_shows() -> None:
    # "zeta" appears once in locale 0: its entity can never be held out.
    texts = [[f"w{i % 5} v{i // 5}", f"p{i % 8} q{i // 8}", f"r{i % 4} s{i // 4}"] for i in range(40)]
    texts.append(["zeta v0", "p0 q0 q1", "r0 s0 s1"])  # 41 distinct sentences per locale
    corpus = multiway_corpus("toy", ("a", "b", "c"), texts, "entities", 0.5, np.random.default_rng(0))
    assert len(corpus.test) == 3 * 20, "20 of 41 entities, three locale pairs each"
    seen = corpus.usage()
    for ids, languages in ((corpus.test.source, corpus.test.source_language),
                           (corpus.test.target, corpus.test.target_language)):
        real = ids != PAD
        assert seen[np.repeat(languages, ids.shape[1])[real.reshape(-1)], ids[real]].all()
    zeta = corpus.token_names.index("zeta")
    assert zeta in corpus.train.source and zeta not in corpus.test.source
    train_sentences = {tuple(row) for row in corpus.train.source.tolist()}
    test_sentences = {tuple(row) for row in corpus.test.source.tolist()}
    assert not train_sentences & test_sentences, "an entity is either held out whole or not at all"


@pytest.mark.skipif(importlib.util.find_spec("django") is None, reason="django (a declared dependency) not installed")
def test_django_catalogs_give_hundreds_of_six_way_messages_with_real_false_friends() -> None:
    locales = ("en", "de", "fr", "es", "it", "nl")
    texts = catalog_texts(locales, catalog_root())
    assert len(texts) > 500
    corpus = gettext_corpus(locales, 0.2, np.random.default_rng(0))
    assert abs(len(corpus.test) - 0.2 * len(texts) * 15) <= 15, "qualifying messages are plentiful"
    es = corpus.token_names.index("es")
    assert corpus.contested[1, es] and corpus.contested[3, es], "German 'es' (it) vs Spanish 'es' (is)"


def test_the_catalogs_are_checked_against_the_installed_release(tmp_path, monkeypatch):
    """Records name the django release: a catalog replaced, removed or shadowed by another django on
    the path must not feed a trial under the same id."""
    from harness.tasks.vocab import gettext

    root = catalog_root()
    assert gettext.check_catalogs.__wrapped__(root).startswith("django==")
    with pytest.raises(ValueError, match="not the installed release"):
        gettext.check_catalogs.__wrapped__(_fake_django(tmp_path / "django"))
    # a release installed first on the path (its own RECORD), then one of its catalogs replaced
    site = tmp_path / "site"
    catalog = site / "django" / "conf" / "locale" / "de" / "LC_MESSAGES" / "django.mo"
    catalog.parent.mkdir(parents=True)
    original = (root / "conf" / "locale" / "de" / "LC_MESSAGES" / "django.mo").read_bytes()
    catalog.write_bytes(original)
    (site / "django" / "__init__.py").write_text("")
    info = site / "Django-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Django\nVersion: 0.0\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(original).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(f"django/conf/locale/de/LC_MESSAGES/django.mo,sha256={digest},{len(original)}\n")
    monkeypatch.syspath_prepend(str(site))
    assert gettext.check_catalogs.__wrapped__(site / "django") == "django==0.0"
    catalog.write_bytes(original + b"\0")
    with pytest.raises(ValueError, match="sha256 mismatch"):
        gettext.check_catalogs.__wrapped__(site / "django")


def test_a_corrupt_catalog_is_refused_naming_its_file(tmp_path: Path) -> None:
    root = _fake_django(tmp_path / "django")
    broken = root / "conf" / "locale" / "fr" / "LC_MESSAGES" / "django.mo"
    broken.write_bytes(b"not a catalog")
    with pytest.raises(ValueError, match=rf"{broken}: not a readable gettext catalog"):
        catalog_texts(("en", "de", "fr"), root)


@pytest.mark.integration  # the CLI in a subprocess, with a django-shaped package first on the path
@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_validate_refuses_a_broken_catalog_in_one_line_exit_2(tmp_path: Path, damage: str) -> None:
    root = _fake_django(tmp_path / "site" / "django")
    (root / "__init__.py").write_text("")
    catalog = root / "conf" / "locale" / "fr" / "LC_MESSAGES" / "django.mo"
    if damage == "corrupt":
        catalog.write_bytes(b"")
    else:
        catalog.unlink()
    suite = tmp_path / "gettext.yaml"
    suite.write_text("suite: gt\ntask: vocab\nseeds: [0]\n"
                     "params: {workload.kind: gettext,\n         workload.locales: [en, de, fr]}\narms:\n  shared: {index: none}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "harness", "validate", str(suite)], capture_output=True, text=True,
                          env=env, timeout=hang_guard(300))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{suite}:4: arm 'shared'" in lines[0], lines  # the workload the arm runs
    assert (f"{catalog}: not a readable gettext catalog" if damage == "corrupt" else "unknown gettext locales ['fr']") \
        in lines[0]
