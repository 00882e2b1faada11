"""A pytest plugin for mutation testing only (``pytest_add_cli_args`` in pyproject's ``[tool.mutmut]``).

mutmut runs the tests once in its own process to learn which tests reach which function, then forks a
child per mutant. The decision core memoizes its simulations (``functools.lru_cache``: the null paths,
the calibrated critical values, the detectable effect), so a child would read the unmutated values its
parent cached and a mutant in a function reached only through a cache could never be caught. Each
session therefore starts with those caches empty: what the tests see is what the mutated code computes.
"""
from __future__ import annotations

import sys

CACHED_PACKAGES = ("harness.analysis.stats.", "harness.analysis.decide.", "harness.analysis.claim_tests.",
                   "harness.gating.")


def pytest_sessionstart(session: object) -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(CACHED_PACKAGES):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == name:
                value.cache_clear()
