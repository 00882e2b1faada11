"""Reading a suite file safely: size and node limits before anything is built, no YAML tags, a key
written twice refused, nesting bounded, and the file:line of any node for error messages.

A suite file is untrusted input: a YAML alias bomb, a 100 MB scalar, a FIFO or /dev/zero must be
refused in one line without expanding or reading it."""
from __future__ import annotations

import stat
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import ValidationError

from harness.suite.resolved_suite import SuiteError

# Bounds on what one suite file may ask for, so that a hostile or mistaken file fails at once
# instead of hanging `validate` or filling the disk: nodes after expanding YAML aliases (a few
# hundred in the shipped suites), nesting depth, and trials after expanding seeds and sweeps.
MAX_SUITE_NODES = 100_000
MAX_DEPTH = 50
MAX_SUITE_BYTES = 1 << 20  # 1 MiB, ~200x the largest shipped suite; more with a --max-suite-nodes above 104,857
BYTES_PER_NODE = 10


class _TooManyNodes(yaml.YAMLError):
    """More nodes composed than the limit allows, counted as the document is read."""

    def __init__(self, mark: yaml.Mark) -> None:
        super().__init__()
        self.mark = mark


class _SuiteLoader(yaml.SafeLoader):
    """A safe loader that refuses nesting beyond ``MAX_DEPTH`` and more than ``max_nodes`` nodes
    while composing (pyyaml composes recursively: 500 levels would otherwise end in a
    RecursionError, and a long list would be built whole, at kilobytes of memory a node, before
    ``_check_nodes`` counted it)."""

    def __init__(self, stream: str, max_nodes: int = MAX_SUITE_NODES) -> None:
        super().__init__(stream)
        self._depth, self._nodes, self._max_nodes = 0, 0, max_nodes

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            if self._nodes > self._max_nodes:
                raise _TooManyNodes(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _read_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes, refused at once when it is not a regular file (a FIFO would block, /dev/zero
    never end) or holds more than ``limit`` bytes."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise SuiteError(f"{path}: not a regular file; a suite is a YAML file")
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read suite file ({exc.strerror})") from None
    if len(raw) > limit:
        raise SuiteError(f"{path}: larger than {limit:,} bytes; a suite file is a few KB "
                         f"(raise the limit with --max-suite-nodes, which allows {BYTES_PER_NODE} bytes a node)")
    return raw


def read_yaml(path: Path, max_nodes: int = MAX_SUITE_NODES) -> tuple[Any, yaml.Node | None]:
    raw = _read_bytes(path, max(MAX_SUITE_BYTES, max_nodes * BYTES_PER_NODE))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the suite as UTF-8"
        ) from None
    loader = None
    try:
        loader = _SuiteLoader(text, max_nodes)  # the reader refuses control characters at once
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(path, loader, node, max_nodes)
        data = loader.construct_document(node) if node is not None else None
    except _TooManyNodes as exc:
        raise SuiteError(f"{path}:{exc.mark.line + 1}: expands to more than {max_nodes:,} YAML nodes by this line "
                         "(raise the limit with --max-suite-nodes)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
        raise SuiteError(f"{where}: malformed YAML: {one_line(problem)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_nodes(path: Path, loader: yaml.SafeLoader, root: yaml.Node, max_nodes: int) -> None:
    """Refuse duplicate mapping keys, recursive aliases, and documents that are too large or too
    deep once aliases are expanded (the classic alias bomb is tiny as text)."""
    size: dict[int, int] = {}  # node id -> nodes in its expanded subtree
    depth: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str, ...], bool]] = [(root, (), False)]
    while stack:
        node, where, done = stack.pop()
        key = id(node)
        if done:
            entered.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            dotted = ".".join(where) or "(top level)"
            line = f"{path}:{node.start_mark.line + 1}"
            if size[key] > max_nodes:
                raise SuiteError(
                    f"{line}: {dotted}: expands to more than {max_nodes:,} YAML nodes (aliases included); "
                    "is an alias repeated by mistake? (raise the limit with --max-suite-nodes)"
                )
            if depth[key] > MAX_DEPTH:
                raise SuiteError(f"{line}: {dotted}: nested deeper than {MAX_DEPTH} levels once aliases are expanded")
            continue
        if key in size:
            continue
        if key in entered:
            raise SuiteError(f"{path}:{node.start_mark.line + 1}: {'.'.join(where)}: an alias refers to itself (recursive YAML)")
        entered.add(key)
        stack.append((node, where, True))
        if isinstance(node, yaml.MappingNode):
            _check_keys(path, loader, node, where)
            # children pushed last-first, so nodes are visited in document order: an anchored node is
            # first reached where it is defined (anchors precede their aliases), which messages name
            for key_node, value_node in reversed(node.value):
                label = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                stack.append((value_node, (*where, label), False))
                stack.append((key_node, where, False))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, (*where, str(i)), False) for i, child in reversed(list(enumerate(node.value))))


def _check_keys(path: Path, loader: yaml.SafeLoader, node: yaml.MappingNode, where: tuple[str, ...]) -> None:
    """A key written twice in one mapping is an error (pyyaml would silently keep the last)."""
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if key in first:
            dotted = ".".join((*where, str(key)))
            raise SuiteError(
                f"{path}:{line}: {dotted}: duplicate key {key!r} (first at line {first[key]}); each key may appear once"
            )
        first[key] = line


def line_of(node: yaml.Node | None, loc: Sequence[Any]) -> int | None:
    """1-based line of the deepest node reachable along loc (a pydantic error location)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == str(key)), None)
            if match is None:
                key_node = next((k for k, _ in node.value if k.value == str(key)), None)
                return key_node.start_mark.line + 1 if key_node is not None else line
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        line = node.start_mark.line + 1
    return line


def exists(node: yaml.Node | None, loc: Sequence[Any]) -> bool:
    """Whether the document has a value at loc (mapping keys and sequence indexes)."""
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return False
    return node is not None


def located(path: Path, node: yaml.Node | None, loc: Sequence[Any]) -> str:
    line = line_of(node, loc)
    return f"{path}:{line}" if line else str(path)


def validation_message(path: Path, node: yaml.Node | None, exc: ValidationError, prefix: Sequence[Any] = ()) -> str:
    err = exc.errors()[0]
    loc = [*prefix, *err["loc"]]
    key = ".".join(str(p) for p in loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        problem = f"unknown key {str(err['loc'][-1])!r}"
    elif err["type"] == "missing":
        problem = "required key is missing"
    else:
        problem = err["msg"]
    return f"{located(path, node, loc)}: {key}: {problem}"
