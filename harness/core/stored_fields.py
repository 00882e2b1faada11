"""One declarative reader and writer for the JSON documents the harness commits or keeps beside a run (the
baseline, the design lock, the tuning lock, the ledger). A document is a frozen dataclass whose fields name
its keys (``stored(shape)`` on each field); ``from_stored`` reads every field in one place and refuses a
malformed document in one line naming the key and what it must hold, and ``as_stored`` writes the same
fields back (``as_stored(from_stored(cls, data)) == data`` for a document harness wrote). So no parser
indexes the raw dict itself, no writer names its keys by hand, and the keys a document has are written once,
where its fields are declared. A document that carries a schema version declares it, and the migrations
from older versions, on its class (``stored_schema``: asv's ``api_version`` with its ``update_to_N``).
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, TypeVar

T = TypeVar("T")
SHAPE, MISSING_VALUE, FLAT, OMITTED = "stored_shape", "stored_missing", "stored_flat", "stored_omitted"  # metadata keys
WRITTEN_IF = "stored_written_if"
REST = "stored_rest"


class StoredFieldError(ValueError):
    """A stored document that does not hold what its fields declare (one line naming the key)."""


@dataclass(frozen=True)
class Shape:
    """What a stored value must be: ``test`` says whether it is, ``expected`` says so in words, ``load``
    makes the field's value from it (given where the value sits, for a nested document's errors), and
    ``dump`` makes the stored value from the field's (``load``'s inverse; by default ``plain``)."""

    expected: str
    test: Callable[[Any], bool]
    load: Callable[[Any, str], Any] = lambda value, where: value
    dump: Callable[[Any], Any] = lambda value: plain(value)

    def read(self, value: Any, where: str) -> Any:
        if not self.test(value):
            raise StoredFieldError(f"{where}: expected {self.expected}, got {shown(value)}")
        return self.load(value, where)


def is_document(value: Any) -> bool:
    """Whether ``value`` is a stored document: a dataclass instance with fields declared by ``stored``."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and \
        any(SHAPE in f.metadata or REST in f.metadata for f in dataclasses.fields(value))


def plain(value: Any) -> Any:
    """A field's value as JSON holds it: a document as ``as_stored`` writes it, a tuple as a list, a mapping as
    a dict (its values plain too); anything else as it is."""
    if is_document(value):
        return as_stored(value)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    return value


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
# whether a key is there at all (declared with missing=False), whatever it holds: a file's mark, checked first
PRESENT = Shape("anything", lambda value: True, lambda value, where: True)
TEXT_MAPPING = Shape("a mapping of strings",
                     lambda value: isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))


def optional(shape: Shape) -> Shape:
    """``shape`` or null (read as None)."""
    return Shape(f"{shape.expected} or null", lambda value: value is None or shape.test(value),
                 lambda value, where: None if value is None else shape.load(value, where),
                 lambda value: None if value is None else shape.dump(value))


def one_of(*choices: str) -> Shape:
    return Shape(f"one of {', '.join(choices)}", lambda value: isinstance(value, str) and value in choices)


def list_of(item: Shape, expected: str | None = None, non_empty: bool = False) -> Shape:
    """A list whose every item has ``item``'s shape, read as a tuple; the first bad item is named by index."""
    def load(value: list[Any], where: str) -> tuple[Any, ...]:
        return tuple(item.read(entry, f"{where}[{index}]") for index, entry in enumerate(value))

    words = expected or f"a {'non-empty ' if non_empty else ''}list, each item {item.expected}"
    return Shape(words, lambda value: isinstance(value, list) and (bool(value) or not non_empty), load,
                 lambda value: [item.dump(entry) for entry in value])


def mapping_of(item: Shape, expected: str) -> Shape:
    """A mapping whose every value has ``item``'s shape; the first bad value is named by its key."""
    def load(value: dict[str, Any], where: str) -> dict[str, Any]:
        return {key: item.read(entry, f"{where}.{key}") for key, entry in value.items()}

    return Shape(expected, lambda value: isinstance(value, dict), load,
                 lambda value: {key: item.dump(entry) for key, entry in value.items()})


def document(cls: type[Any], unknown: str | None = None) -> Shape:
    """A nested document: a mapping read by ``from_stored`` into ``cls`` (``unknown``: as there)."""
    return Shape("a mapping", lambda value: isinstance(value, dict),
                 lambda value, where: from_stored(cls, value, f"{where}.", unknown), as_stored)


def stored(shape: Shape, *, missing: Any = dataclasses.MISSING, flat: bool = False, omit_missing: bool = False,
           written_if: Callable[[Any], bool] | None = None, **field_args: Any) -> Any:
    """A document's field: the value under the key of the field's name, of ``shape``. A key the file lacks
    reads as ``missing`` (a copy of it; without one the key is required); with ``omit_missing`` a value equal
    to ``missing`` is written as no key at all (a field its document holds only when set). ``written_if``
    says of the whole document whether the field is written at all (a field only some kinds of entry hold,
    whatever its value). A ``flat`` field's shape reads the whole mapping instead, its ``load`` given the
    mapping and the prefix of its keys (fields stored beside the others, such as a claim's evidence in its
    entry), its ``dump`` giving the keys it writes. ``field_args`` go to ``dataclasses.field`` (a default for
    those who build the document in code)."""
    if omit_missing and missing is dataclasses.MISSING:
        raise TypeError("omit_missing needs the value a missing key reads as")
    return dataclasses.field(metadata={SHAPE: shape, MISSING_VALUE: missing, FLAT: flat, OMITTED: omit_missing,
                                       WRITTEN_IF: written_if}, **field_args)


@dataclass(frozen=True)
class Schema:
    """A document's schema version, stored under ``key``, and how an older document is brought up to it:
    ``migrations[n]`` turns the mapping of version n - 1 into that of version n (asv's ``update_to_N``),
    applied in turn by ``from_stored`` before any field is read. A document of a version newer than
    ``version``, or older than the oldest a migration starts from, is refused. A document without the key
    is of version ``missing`` (one written before its versions were stored); without one the key is
    required. Declared on the document's class as ``stored_schema``; ``as_stored`` writes ``version``."""

    version: int
    migrations: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)
    key: str = "schema"
    missing: int | None = None

    def __post_init__(self) -> None:
        oldest = self.version - len(self.migrations)
        if sorted(self.migrations) != list(range(oldest + 1, self.version + 1)):
            raise TypeError(f"migrations must lead, one version at a time, up to {self.version}: "
                            f"{sorted(self.migrations)}")

    @property
    def oldest(self) -> int:
        """The oldest version this harness reads (by migrating it)."""
        return self.version - len(self.migrations)

    def upgrade(self, data: dict[str, Any], where: str = "") -> dict[str, Any]:
        """``data`` as a document of ``version``: each migration from its own version on applied in turn."""
        found = read_keys({self.key: Shape("an integer", is_int)}, data, where,
                          () if self.missing is None else (self.key,)).get(self.key, self.missing)
        if found > self.version:
            raise StoredFieldError(f"{where}{self.key}: version {found} is newer than this harness reads (up to "
                                   f"{self.version})")
        if found < self.oldest:
            raise StoredFieldError(f"{where}{self.key}: version {found} is older than this harness reads (from "
                                   f"{self.oldest})")
        for version in range(found + 1, self.version + 1):
            data = {**self.migrations[version](data), self.key: version}
        return data


def stored_rest() -> Any:
    """A document's field that holds every key no other field names, as written (keys a reader does not
    need typed, or that only some versions wrote); ``as_stored`` writes them back beside the others."""
    return dataclasses.field(metadata={REST: True}, default_factory=dict)


def schema_of(cls: type[Any]) -> Schema | None:
    """The schema a document's class declares (``stored_schema``), if any."""
    return getattr(cls, "stored_schema", None)


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


def from_stored(cls: type[T], data: Any, where: str = "", unknown: str | None = None,
                given: Mapping[str, Any] | None = None) -> T:
    """The document ``cls`` read from ``data``: every field declared with ``stored`` taken from its key and
    checked against its shape; StoredFieldError names the first key that is wrong (``where`` prefixes it).
    With ``unknown`` (why), a key no field names is refused too. ``given`` holds the values of fields the
    document does not store itself (its name, where a mapping keeps it under its name). A document of a class
    that declares a ``stored_schema`` is first brought up to its version (``Schema.upgrade``)."""
    schema = schema_of(cls)
    if schema is not None:
        data = schema.upgrade(data, where)
    fields = [f for f in dataclasses.fields(cls) if SHAPE in f.metadata]
    keyed = {f.name: f for f in fields if not f.metadata[FLAT]}
    values = read_keys({name: f.metadata[SHAPE] for name, f in keyed.items()}, data, where,
                       {name for name, f in keyed.items() if f.metadata[MISSING_VALUE] is not dataclasses.MISSING})
    extra = sorted(set(data) - set(keyed) - ({schema.key} if schema else set())) if unknown else []
    if extra:
        raise StoredFieldError(f"{where}{extra[0]}: {unknown}")
    for name, f in keyed.items():
        if name not in values:
            values[name] = copy.copy(f.metadata[MISSING_VALUE])
    for f in fields:
        if f.metadata[FLAT]:
            values[f.name] = f.metadata[SHAPE].load(data, where)
    for f in dataclasses.fields(cls):
        if f.metadata.get(REST):
            values[f.name] = {key: value for key, value in data.items()
                              if key not in keyed and key != (schema.key if schema else None)}
    return cls(**values, **(given or {}))


def _omitted(f: dataclasses.Field[Any], document: Any, value: Any) -> bool:
    missing, written_if = f.metadata[MISSING_VALUE], f.metadata[WRITTEN_IF]
    return (f.metadata[OMITTED] and type(value) is type(missing) and value == missing) or \
        (written_if is not None and not written_if(document))


def stored_value(document: Any, name: str) -> Any:
    """One field of ``document`` as ``as_stored`` writes it under its key (its shape's ``dump``), for a reader
    that compares or hashes the stored form of a field rather than the whole document."""
    f = next(f for f in dataclasses.fields(document) if f.name == name and SHAPE in f.metadata)
    return f.metadata[SHAPE].dump(getattr(document, name))


def as_stored(document: Any) -> dict[str, Any]:
    """The mapping ``document`` is stored as: each field declared with ``stored`` under its key, made by its
    shape's ``dump`` (a flat field's keys beside the others; a field left out when ``omit_missing`` and
    unset, or where ``written_if`` says so), and the schema version its class declares. ``from_stored``'s
    inverse."""
    stored_document: dict[str, Any] = {}
    schema = schema_of(type(document))
    if schema is not None:
        stored_document[schema.key] = schema.version
    for f in dataclasses.fields(document):
        if f.metadata.get(REST):
            stored_document.update(getattr(document, f.name))
        if SHAPE not in f.metadata:
            continue
        value = getattr(document, f.name)
        if f.metadata[FLAT]:
            stored_document.update(f.metadata[SHAPE].dump(value))
        elif not _omitted(f, document, value):
            stored_document[f.name] = f.metadata[SHAPE].dump(value)
    return stored_document
