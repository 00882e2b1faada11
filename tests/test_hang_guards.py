"""A subprocess's timeout in a test is a hang guard sized for a loaded machine: every one goes through
``fault_injection.hang_guard``, which scales a quiet machine's ample time by the ways the cores may be
shared, so a test run beside other jobs fails only on a hang, never on being slow."""
from __future__ import annotations

import ast
from pathlib import Path

from fault_injection import SHARED_WAYS, hang_guard

TESTS = Path(__file__).resolve().parent
WAITS = {"run", "communicate", "wait", "check_output", "check_call", "call"}  # what waits on a process


def bare_guards(source: str, filename: str) -> list[str]:
    """``file:line`` of each wait on a process whose timeout is a bare number rather than a hang guard."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WAITS:
            for keyword in node.keywords:
                if keyword.arg == "timeout" and isinstance(keyword.value, ast.Constant):
                    found.append(f"{filename}:{node.lineno}")
    return found


def test_every_subprocess_guard_in_the_tests_is_sized_for_a_loaded_machine():
    found = [line for path in sorted(TESTS.rglob("*.py")) for line in bare_guards(path.read_text(), path.name)]
    assert not found, "wrap these timeouts in hang_guard(...): " + ", ".join(found)


def test_the_lint_sees_a_bare_guard_and_the_guard_scales():
    assert bare_guards("import subprocess\nsubprocess.run(['x'], timeout=300)\n", "t.py") == ["t.py:2"]
    assert bare_guards("proc.wait(timeout=hang_guard(30))\n", "t.py") == []
    assert SHARED_WAYS >= 4 and hang_guard(300) == 300 * SHARED_WAYS
