"""The declarative reader of stored documents: a field's key, shape and what a missing key reads as are
declared once on the dataclass, and a malformed document is refused naming the key (nested ones by path)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from harness.core.stored_fields import (
    INTEGER,
    TEXT,
    Shape,
    StoredFieldError,
    document,
    from_stored,
    list_of,
    optional,
    stored,
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
                                        lambda data, where: {k: v for k, v in data.items() if k.startswith("x-")}),
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
