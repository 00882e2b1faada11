"""Real multi-way parallel sentences: the gettext catalogs (``.mo``) that ship inside ``django``.

Django's own apps (core, admin, auth, ...) carry a compiled catalog per locale: each English
``msgid`` (a UI sentence) with its human translation. A message translated in every asked locale is
one entity, written once per locale ("en" is the msgid itself): real bitext, multi-way parallel by
construction. Django is a data dependency only: its files are located, never imported.

Format placeholders and markup (``%(name)s``, ``%s``, ``{0}``, ``<a href=...>``) are removed before
tokenising: they are copied verbatim into every translation, so they would be free cognates.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from babel.messages.mofile import read_mo

from harness.tasks.vocab.corpus import Corpus, refuse_unknown
from harness.tasks.vocab.multiway import multiway_corpus, multiway_folds, tokenize

SOURCE_LOCALE = "en"  # the msgid's language
_MARKUP = re.compile(r"%\(\w+\)[sdifr]|%[sdifr]|\{\w*\}|<[^>]*>|&\w+;")


def catalog_root() -> Path:
    """The installed ``django`` package folder (found, not imported)."""
    spec = importlib.util.find_spec("django")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the gettext workload reads the catalogs shipped in django, a declared dependency of "
                         "harness: install the package (pip install -e . -c constraints.txt)")
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=4)
def check_catalogs(root: Path) -> str:
    """The django release whose catalogs ``root`` holds, after checking every catalog against the
    sha256 its installed distribution recorded: records name the release, so a catalog replaced,
    removed or shadowed by another ``django`` on the path would change results under the same ids."""
    try:
        dist = importlib.metadata.distribution("django")
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(f"{root}: no installed django distribution records these catalogs") from None
    installed = Path(dist.locate_file("django")).resolve()
    if installed != root.resolve():
        raise ValueError(f"the django found first on the path ({root}) is not the installed release "
                         f"{dist.version} ({installed}): its catalogs are not the recorded ones")
    for file in dist.files or ():
        if file.name != "django.mo" or file.hash is None or file.hash.mode != "sha256":
            continue
        path = Path(dist.locate_file(file))
        try:
            digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        except OSError:
            raise ValueError(f"{path}: a catalog of django {dist.version} is missing or unreadable") from None
        if digest != file.hash.value:
            raise ValueError(f"{path}: differs from the catalog django {dist.version} installed (sha256 mismatch)")
    return f"django=={dist.version}"


def catalog_apps(root: Path) -> list[Path]:
    """The folders holding a ``locale/`` tree: django's core (``conf``) and each contrib app."""
    contrib = sorted(path for path in (root / "contrib").iterdir() if path.is_dir())
    return [app for app in (root / "conf", *contrib) if (app / "locale").is_dir()]


def catalog_locales(root: Path) -> list[str]:
    """Every locale with a ``django.mo`` in some app, plus the msgid language."""
    found = {path.parts[-3] for app in catalog_apps(root) for path in app.glob("locale/*/LC_MESSAGES/django.mo")}
    return sorted(found | {SOURCE_LOCALE})


def _translations(path: Path) -> dict[tuple[str, str | None], str]:
    """(msgid, context) -> translation; plural entries by their singular forms; untranslated left out."""
    try:
        with path.open("rb") as handle:
            catalog = read_mo(handle)
    except Exception as exc:  # read_mo raises whatever a malformed file trips (struct, index, decode errors)
        raise ValueError(f"{path}: not a readable gettext catalog ({type(exc).__name__}: {exc})") from exc
    out = {}
    for message in catalog:
        source = message.id[0] if isinstance(message.id, (list, tuple)) else message.id
        target = message.string[0] if isinstance(message.string, (list, tuple)) else message.string
        if source and target:
            out[(source, message.context)] = target
    return out


@lru_cache(maxsize=4)
def catalog_texts(locales: tuple[str, ...], root: Path) -> tuple[tuple[str, ...], ...]:
    """One tuple of texts (in ``locales`` order) per message that every locale translates, read from the
    apps under ``root`` (django's package folder).

    Apps in path order, messages sorted within an app. A message whose text, tokenised, repeats an
    earlier kept message's in any locale (or is empty there) is dropped: retrieval ties count
    against the query, so a duplicate would make two queries unanswerable.
    """
    refuse_unknown("gettext locales", locales, catalog_locales(root))
    kept: list[tuple[str, ...]] = []
    seen: list[set[tuple[str, ...]]] = [set() for _ in locales]
    for app in catalog_apps(root):
        tables = [None if code == SOURCE_LOCALE else _load(app, code) for code in locales]
        keys = set.intersection(*(set(table) for table in tables if table is not None))
        for key in sorted(keys, key=lambda k: (k[0], k[1] or "")):
            texts = tuple(key[0] if table is None else table[key] for table in tables)
            words = [tuple(tokenize(_MARKUP.sub(" ", text))) for text in texts]
            if all(words) and all(word not in taken for word, taken in zip(words, seen)):
                for word, taken in zip(words, seen):
                    taken.add(word)
                kept.append(tuple(" ".join(word) for word in words))
    return tuple(kept)


def _load(app: Path, code: str) -> dict[tuple[str, str | None], str]:
    path = app / "locale" / code / "LC_MESSAGES" / "django.mo"
    return _translations(path) if path.exists() else {}


def gettext_corpus(locales: Sequence[str], test_fraction: float, rng: np.random.Generator) -> Corpus:
    """Every locale pair of every message; a ``test_fraction`` of whole messages is held out, each only
    while every word it uses stays in a training message of the same locale (translation retrieval of
    unseen sentences made of seen words)."""
    root = catalog_root()
    check_catalogs(root)
    texts = catalog_texts(tuple(locales), root)
    return multiway_corpus("gettext", locales, texts, "entities", test_fraction, rng)


def gettext_folds(locales: Sequence[str], test_fraction: float, folds: int, rng: np.random.Generator) -> list[Corpus]:
    """As ``gettext_corpus``, in ``folds`` (or more) corpora that hold out every contested message the
    rule lets go once."""
    root = catalog_root()
    check_catalogs(root)
    return multiway_folds("gettext", locales, catalog_texts(tuple(locales), root), "entities", test_fraction, folds,
                          rng)
