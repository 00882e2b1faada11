"""One name per idea (issue 73): no two classes of the package share a name, no two of its modules share a
file name, and the gate dispatches on the kind of a check through one table.

A name that two things share makes a traceback, an import or a search say less than it seems to. The
exceptions below are the mechanism folders' own (harness/tasks/<name>/): each stands alone (the import
contract "each mechanism's folder stands alone" keeps them apart, so no reader meets both), and a rename
there edits the task's code, whose hash is in every trial's identity and in its registrations (a renamed
class or module reruns its trials and ends the match with its sealed registrations). A new shared name
fails here, exceptions included: each lists every place the name is used.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from harness.gating.values import CHECK_KINDS, CHECKS

PACKAGE = Path(__file__).resolve().parent.parent / "harness"
IN_TWO_MECHANISMS = ("in two mechanism folders, which import contracts keep apart; renaming it edits the task "
                     "code (its hash: the trials' identity and the registrations)")
CLASS_EXCEPTIONS = {
    "Corpus": ({"tasks/vocab/corpus.py", "tasks/er2/data.py"}, IN_TWO_MECHANISMS),
}
MODULE_EXCEPTIONS = {
    "task.py": ({"tasks/vocab/task.py", "tasks/routing/task.py", "tasks/er2/task.py"},
                "each mechanism's entry point, named so by its entry point (harness.tasks.<name>.task) and by "
                "the scaffold's template for a new task"),
    "pooling.py": ({"tasks/vocab/mechanism/pooling.py", "tasks/routing/pooling.py"}, IN_TWO_MECHANISMS),
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _where(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _shared(places: dict[str, set[str]], exceptions: dict[str, tuple[set[str], str]]) -> dict[str, set[str]]:
    """The names used in more than one place, but for an exception used exactly where it says."""
    return {name: where for name, where in places.items()
            if len(where) > 1 and (name not in exceptions or exceptions[name][0] != where)}


def test_no_two_classes_share_a_name():
    places: dict[str, set[str]] = defaultdict(set)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                places[node.name].add(_where(path))
    assert not _shared(places, CLASS_EXCEPTIONS)
    assert all(name in places for name in CLASS_EXCEPTIONS), "an exception no longer needed: remove it"


def test_no_two_modules_share_a_file_name():
    places: dict[str, set[str]] = defaultdict(set)
    for path in _modules():
        if path.name != "__init__.py":
            places[path.name].add(_where(path))
    assert not _shared(places, MODULE_EXCEPTIONS)
    assert all(len(places[name]) > 1 for name in MODULE_EXCEPTIONS), "an exception no longer needed: remove it"


def _compares_check_names(node: ast.Compare) -> bool:
    """A comparison of check kinds: with a check-name constant (QUALITY, CLAIM, ...), or of a ``check`` with
    a string literal."""
    sides = [node.left, *node.comparators]

    def named(side: ast.expr) -> bool:
        if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
            return any(named(item) for item in side.elts)
        return isinstance(side, ast.Name) and side.id in {"QUALITY", "MEMORY", "SPEED_RATIO", "CONTRAST", "CLAIM"}

    def check(side: ast.expr) -> bool:
        return isinstance(side, ast.Name) and side.id == "check" or isinstance(side, ast.Attribute) and \
            side.attr == "check"

    def literal(side: ast.expr) -> bool:
        return isinstance(side, ast.Constant) and isinstance(side.value, str)

    return any(named(side) for side in sides) or any(
        check(a) and literal(b) or literal(a) and check(b) for a, b in zip(sides, sides[1:]))


def test_the_gate_dispatches_on_the_kind_of_a_check_through_one_table():
    """What differs by kind of check (how it is measured and judged, what its entries hold, whether it is a
    timing) is one row of gating.values.CHECK_KINDS: the gate, the baseline and the report read the row."""
    assert tuple(CHECK_KINDS) == CHECKS
    assert all(kind.name == name for name, kind in CHECK_KINDS.items())
    comparing = [f"{_where(path)}:{node.lineno}" for path in sorted((PACKAGE / "gating").glob("*.py"))
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Compare) and _compares_check_names(node)]
    assert not comparing
