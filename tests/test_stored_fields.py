"""The declarative reader of stored documents: a field's key, shape and what a missing key reads as are
declared once on the dataclass, and a malformed document is refused naming the key (nested ones by path)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from harness.core.stored_fields import (
    INTEGER,
    PRESENT,
    TEXT,
    Schema,
    Shape,
    StoredFieldError,
    as_stored,
    document,
    from_stored,
    list_of,
    optional,
    stored,
    stored_rest,
    stored_value,
)


@dataclass(frozen=True)
class Point:
    x: int = stored(INTEGER)
    label: str | None = stored(optional(TEXT), missing=None)


@dataclass(frozen=True)
class Sketch:
    name: str = stored(TEXT)
    points: tuple[Point, ...] = stored(list_of(document(Point), "a list of points"))
    tags: list[Any] = stored(Shape("a list", lambda v: isinstance(v, list)), missing=[])
    rest: dict[str, Any] = stored(Shape("the rest", lambda v: True,
                                        lambda data, where: {k: v for k, v in data.items() if k.startswith("x-")},
                                        lambda rest: dict(rest)),
                                  flat=True)


def test_a_document_reads_its_fields_and_fills_what_is_missing():
    read = from_stored(Sketch, {"name": "s", "points": [{"x": 1}, {"x": 2, "label": "b"}], "x-note": 3})
    assert read == Sketch("s", (Point(1, None), Point(2, "b")), [], {"x-note": 3})
    again = from_stored(Sketch, {"name": "t", "points": []})
    again.tags.append(1)  # a missing key's value is a copy: another read does not see it
    assert from_stored(Sketch, {"name": "t", "points": []}).tags == []


@pytest.mark.parametrize("data, error", [
    ({"points": []}, "name: missing (expected a non-empty string)"),
    ({"name": "", "points": []}, "name: expected a non-empty string, got ''"),
    ({"name": "s", "points": [{"x": 1}, {"x": "2"}]}, "points[1].x: expected an integer, got '2'"),
    ({"name": "s", "points": [{"x": 1, "label": 5}]}, "points[0].label: expected a non-empty string or null, got 5"),
    ({"name": "s", "points": [7]}, "points[0]: expected a mapping, got 7"),
    ([1], "the document: expected a mapping, got [1]"),
])
def test_a_malformed_document_is_refused_naming_the_key(data, error):
    with pytest.raises(StoredFieldError, match=f"^{re.escape(error)}$"):
        from_stored(Sketch, data)


def test_unknown_keys_are_refused_only_when_asked():
    assert from_stored(Point, {"x": 1, "y": 2}) == Point(1, None)
    with pytest.raises(StoredFieldError, match=r"^p\.y: not a field of a point$"):
        from_stored(Point, {"x": 1, "y": 2}, "p.", unknown="not a field of a point")


@dataclass(frozen=True)
class Note:
    """A versioned document: version 1 called ``text`` ``body``; version 2 added ``tags`` (absent: none)."""

    stored_schema = Schema(3, {2: lambda old: {"text": old["body"]}, 3: lambda old: {**old, "tags": []}})
    text: str = stored(TEXT)
    tags: tuple[str, ...] = stored(list_of(TEXT))
    label: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)


@pytest.mark.parametrize("data", [
    {"name": "s", "points": [{"x": 1, "label": None}, {"x": 2, "label": "b"}], "tags": [[1, 2]], "x-note": 3},
    {"name": "t", "points": [], "tags": []},
])
def test_a_document_is_written_back_as_it_was_read(data):
    read = from_stored(Sketch, data)
    assert as_stored(read) == data
    assert from_stored(Sketch, as_stored(read)) == read


def test_tuples_are_written_as_lists_and_unset_omitted_fields_as_no_key():
    assert as_stored(Point(3, None)) == {"x": 3, "label": None}
    assert as_stored(Note("hi", ("a",))) == {"schema": 3, "text": "hi", "tags": ["a"]}
    assert as_stored(Note("hi", (), "l")) == {"schema": 3, "text": "hi", "tags": [], "label": "l"}


def test_an_older_document_is_migrated_one_version_at_a_time():
    assert from_stored(Note, {"schema": 1, "body": "old"}, unknown="x") == Note("old", ())
    assert from_stored(Note, {"schema": 2, "text": "mid"}) == Note("mid", ())
    assert from_stored(Note, {"schema": 3, "text": "new", "tags": ["t"]}) == Note("new", ("t",))
    assert as_stored(from_stored(Note, {"schema": 1, "body": "old"})) == {"schema": 3, "text": "old", "tags": []}


@pytest.mark.parametrize("data, error", [
    ({"schema": 4, "text": "new", "tags": []}, "n.schema: version 4 is newer than this harness reads (up to 3)"),
    ({"schema": 0, "text": "old"}, "n.schema: version 0 is older than this harness reads (from 1)"),
    ({"text": "t", "tags": []}, "n.schema: missing (expected an integer)"),
    ({"schema": True, "text": "t", "tags": []}, "n.schema: expected an integer, got True"),
])
def test_a_schema_this_harness_cannot_read_is_refused_naming_it(data, error):
    with pytest.raises(StoredFieldError, match=f"^{re.escape(error)}$"):
        from_stored(Note, data, "n.")


def test_migrations_must_lead_up_to_the_version_without_a_gap():
    with pytest.raises(TypeError, match="one version at a time"):
        Schema(3, {2: lambda old: old})
    with pytest.raises(TypeError, match="needs the value"):
        stored(TEXT, omit_missing=True)


@dataclass(frozen=True)
class Entry:
    """A document that types the keys its readers need and keeps the others as written."""

    name: str = stored(TEXT)
    rest: dict[str, Any] = stored_rest()


def test_keys_no_field_names_are_kept_as_written_and_written_back():
    read = from_stored(Entry, {"name": "e", "note": [1, None], "extra": {"a": 1}})
    assert read == Entry("e", {"note": [1, None], "extra": {"a": 1}})
    assert as_stored(read) == {"name": "e", "note": [1, None], "extra": {"a": 1}}
    assert as_stored(Entry("f")) == {"name": "f"}


@dataclass(frozen=True)
class Reading:
    """A document of two kinds: only a timed reading holds ``seconds`` (null where it was not measured), and
    a file written before versions were stored is of the first."""

    stored_schema = Schema(1, missing=1)
    kind: str = stored(TEXT)
    seconds: float | None = stored(optional(INTEGER), missing=None, written_if=lambda reading: reading.kind == "timed")
    flagged: bool = stored(PRESENT, missing=False)


def test_a_field_only_some_entries_hold_is_written_for_those_alone_even_when_null():
    assert as_stored(Reading("timed", None, True)) == {"schema": 1, "kind": "timed", "seconds": None, "flagged": True}
    assert as_stored(Reading("count", None, True)) == {"schema": 1, "kind": "count", "flagged": True}
    assert from_stored(Reading, {"kind": "timed", "seconds": 3}) == Reading("timed", 3, False)  # no schema: version 1
    assert from_stored(Reading, {"kind": "count", "flagged": None}).flagged  # a key that is there, whatever it holds


@dataclass(frozen=True)
class Named:
    """A document a mapping keeps under its name: the name is given, not stored."""

    name: str
    size: int = stored(INTEGER)


def test_a_field_the_document_does_not_store_is_given_and_one_field_reads_as_it_is_stored():
    named = from_stored(Named, {"size": 2}, given={"name": "n"})
    assert named == Named(name="n", size=2) and as_stored(named) == {"size": 2}
    assert stored_value(Note("hi", ("a", "b")), "tags") == ["a", "b"]
    with pytest.raises(StoredFieldError, match=r"^p\.y: not a field of a point$"):
        document(Point, "not a field of a point").read({"x": 1, "y": 2}, "p")
