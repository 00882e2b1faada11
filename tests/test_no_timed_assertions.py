"""No test may assert on elapsed time: machines differ by 2x and more in speed, so a timed assertion
holds only on the machine it was written on. Speed belongs in benchmarks; a time limit in a test is
a hang guard (a subprocess timeout, ``@pytest.mark.timeout``, a polling deadline), never an assert.

The lint reads every test file's syntax tree: an ``assert`` (or a unittest ``assert*`` call) that
compares a clock reading, or a name computed from one in the same scope, is a timed assertion.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLOCKS = {
    ("time", "time"), ("time", "perf_counter"), ("time", "monotonic"), ("time", "process_time"),
    ("time", "time_ns"), ("time", "perf_counter_ns"), ("time", "monotonic_ns"), ("time", "process_time_ns"),
    ("timeit", "default_timer"), ("datetime", "now"), ("datetime", "utcnow"),
}
UNITTEST_COMPARISONS = {"assertLess", "assertLessEqual", "assertGreater", "assertGreaterEqual", "assertTrue"}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value
        owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
        return (owner_name, func.attr) in CLOCKS
    return isinstance(func, ast.Name) and func.id in {"perf_counter", "monotonic", "default_timer"}


def _reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    return any(_is_clock_call(n) or (isinstance(n, ast.Name) and n.id in tainted) for n in ast.walk(node))


def _tainted_names(scope: ast.AST) -> set[str]:
    """Names assigned (directly or through other tainted names) from a clock reading in this scope."""
    assignments = [n for n in ast.walk(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
    tainted: set[str] = set()
    while True:
        grown = set(tainted)
        for node in assignments:
            if node.value is not None and _reads_clock(node.value, tainted):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                grown |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if grown == tainted:
            return tainted
        tainted = grown


def timed_assertions(source: str, filename: str = "<test>") -> list[str]:
    """``file:line`` of every assertion on elapsed time in ``source``."""
    tree = ast.parse(source, filename=filename)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    found: set[int] = set()
    for scope in scopes:
        tainted = _tainted_names(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assert) and any(
                isinstance(c, ast.Compare) and _reads_clock(c, tainted) for c in ast.walk(node.test)
            ):
                found.add(node.lineno)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in UNITTEST_COMPARISONS and any(_reads_clock(a, tainted) for a in node.args)):
                found.add(node.lineno)
    return [f"{filename}:{line}" for line in sorted(found)]


# The bad samples spell their keyword ASSERT, so that no text scan of this file mistakes the
# samples for timed assertions of its own; the test puts the keyword back before parsing.
@pytest.mark.parametrize(
    "source",
    [
        "import time\ndef test():\n    started = time.monotonic()\n    run()\n    ASSERT time.monotonic() - started < 10\n",
        "import time\ndef test():\n    t0 = time.perf_counter()\n    run()\n    elapsed = time.perf_counter() - t0\n"
        "    ASSERT elapsed <= 5, 'too slow'\n",
        "from time import perf_counter\ndef test():\n    a = perf_counter()\n    b = a\n    ASSERT run(b) and perf_counter() - b < 1\n",
        "import time\nclass T:\n    def test(self):\n        s = time.time()\n        self.assertLess(time.time() - s, 2)\n",
    ],
    ids=["inline", "through-names", "chained-names", "unittest"],
)
def test_the_lint_finds_timed_assertions(source):
    assert timed_assertions(source.replace("ASSERT", "assert"))


@pytest.mark.parametrize(
    "source",
    [
        "import time\ndef test():\n    deadline = time.time() + 120\n    while not done() and time.time() < deadline:\n"
        "        time.sleep(0.05)\n    assert done()\n",
        "import subprocess\ndef test():\n    proc = subprocess.run(['x'], timeout=600)\n    assert proc.returncode == 0\n",
        "def test(record):\n    assert record['metrics']['samples_per_s'] > 0\n",
    ],
    ids=["polling-deadline", "subprocess-timeout", "speed-metric-present"],
)
def test_hang_guards_are_not_timed_assertions(source):
    assert timed_assertions(source) == []


def test_no_test_file_asserts_on_elapsed_time():
    found = [hit for path in sorted(TESTS.rglob("*.py"))
             for hit in timed_assertions(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))]
    assert found == [], "timed assertions (make them hang guards or benchmarks): " + ", ".join(found)
