"""One declarative reader for the JSON documents the harness commits or keeps beside a run (the baseline,
the design lock, the tuning lock). A document is a frozen dataclass whose fields name its keys
(``stored(shape)`` on each field); ``from_stored`` reads every field in one place and refuses a malformed
document in one line naming the key and what it must hold. So no parser indexes the raw dict itself, and
the keys a document has are written once, where its fields are declared.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping, TypeVar

T = TypeVar("T")
SHAPE, MISSING_VALUE, FLAT = "stored_shape", "stored_missing", "stored_flat"  # a field's metadata keys


class StoredFieldError(ValueError):
    """A stored document that does not hold what its fields declare (one line naming the key)."""


@dataclass(frozen=True)
class Shape:
    """What a stored value must be: ``test`` says whether it is, ``expected`` says so in words, and ``load``
    makes the field's value from it (given where the value sits, for a nested document's errors)."""

    expected: str
    test: Callable[[Any], bool]
    load: Callable[[Any, str], Any] = lambda value, where: value

    def read(self, value: Any, where: str) -> Any:
        if not self.test(value):
            raise StoredFieldError(f"{where}: expected {self.expected}, got {shown(value)}")
        return self.load(value, where)


def shown(value: Any) -> str:
    """A value as an error line shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


ANY = Shape("anything", lambda value: True)
TEXT = Shape("a non-empty string", lambda value: isinstance(value, str) and bool(value))
STRING = Shape("a string", lambda value: isinstance(value, str))
INTEGER = Shape("an integer", is_int)
BOOLEAN = Shape("true or false", lambda value: isinstance(value, bool))
COUNT = Shape("a count (an integer >= 0)", lambda value: is_int(value) and value >= 0)
NUMBER = Shape("a finite number", is_number)
NON_NEGATIVE = Shape("a non-negative number", lambda value: is_number(value) and value >= 0)
MAPPING = Shape("a mapping", lambda value: isinstance(value, dict))
TEXT_MAPPING = Shape("a mapping of strings",
                     lambda value: isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))


def optional(shape: Shape) -> Shape:
    """``shape`` or null (read as None)."""
    return Shape(f"{shape.expected} or null", lambda value: value is None or shape.test(value),
                 lambda value, where: None if value is None else shape.load(value, where))


def one_of(*choices: str) -> Shape:
    return Shape(f"one of {', '.join(choices)}", lambda value: isinstance(value, str) and value in choices)


def list_of(item: Shape, expected: str | None = None, non_empty: bool = False) -> Shape:
    """A list whose every item has ``item``'s shape, read as a tuple; the first bad item is named by index."""
    def load(value: list[Any], where: str) -> tuple[Any, ...]:
        return tuple(item.read(entry, f"{where}[{index}]") for index, entry in enumerate(value))

    words = expected or f"a {'non-empty ' if non_empty else ''}list, each item {item.expected}"
    return Shape(words, lambda value: isinstance(value, list) and (bool(value) or not non_empty), load)


def mapping_of(item: Shape, expected: str) -> Shape:
    """A mapping whose every value has ``item``'s shape; the first bad value is named by its key."""
    def load(value: dict[str, Any], where: str) -> dict[str, Any]:
        return {key: item.read(entry, f"{where}.{key}") for key, entry in value.items()}

    return Shape(expected, lambda value: isinstance(value, dict), load)


def document(cls: type[Any]) -> Shape:
    """A nested document: a mapping read by ``from_stored`` into ``cls``."""
    return Shape("a mapping", lambda value: isinstance(value, dict),
                 lambda value, where: from_stored(cls, value, f"{where}."))


def stored(shape: Shape, *, missing: Any = dataclasses.MISSING, flat: bool = False, **field_args: Any) -> Any:
    """A document's field: the value under the key of the field's name, of ``shape``. A key the file lacks
    reads as ``missing`` (a copy of it; without one the key is required). A ``flat`` field's shape reads the
    whole mapping instead, its ``load`` given the mapping and the prefix of its keys (fields stored beside
    the others, such as a claim's evidence in its entry).
    ``field_args`` go to ``dataclasses.field`` (a default for those who build the document in code)."""
    return dataclasses.field(metadata={SHAPE: shape, MISSING_VALUE: missing, FLAT: flat}, **field_args)


def read_keys(shapes: Mapping[str, Shape], data: Any, where: str = "",
              optional_keys: Collection[str] = ()) -> dict[str, Any]:
    """``{key: value}`` of each key in ``shapes`` that ``data`` holds, each checked against its shape; a key
    not in ``optional_keys`` is required. Keys ``shapes`` does not name are left alone."""
    if not isinstance(data, dict):
        raise StoredFieldError(f"{where.rstrip('.') or 'the document'}: expected a mapping, got {shown(data)}")
    values = {}
    for key, shape in shapes.items():
        if key in data:
            values[key] = shape.read(data[key], f"{where}{key}")
        elif key not in optional_keys:
            raise StoredFieldError(f"{where}{key}: missing (expected {shape.expected})")
    return values


def from_stored(cls: type[T], data: Any, where: str = "", unknown: str | None = None) -> T:
    """The document ``cls`` read from ``data``: every field declared with ``stored`` taken from its key and
    checked against its shape; StoredFieldError names the first key that is wrong (``where`` prefixes it).
    With ``unknown`` (why), a key no field names is refused too."""
    fields = [f for f in dataclasses.fields(cls) if SHAPE in f.metadata]
    keyed = {f.name: f for f in fields if not f.metadata[FLAT]}
    values = read_keys({name: f.metadata[SHAPE] for name, f in keyed.items()}, data, where,
                       {name for name, f in keyed.items() if f.metadata[MISSING_VALUE] is not dataclasses.MISSING})
    extra = sorted(set(data) - set(keyed)) if unknown else []
    if extra:
        raise StoredFieldError(f"{where}{extra[0]}: {unknown}")
    for name, f in keyed.items():
        if name not in values:
            values[name] = copy.copy(f.metadata[MISSING_VALUE])
    for f in fields:
        if f.metadata[FLAT]:
            values[f.name] = f.metadata[SHAPE].load(data, where)
    return cls(**values)
