"""The claim tests, one module each: every module of this package is loaded here, and each test's
class registers itself with ``@register``. Adding a test is one module (and its row in
harness/suite/claim_needs.py, what a suite file may write); nothing else names it."""
from __future__ import annotations

import importlib
import pkgutil

from harness.analysis.claim_tests.contract import REGISTERED, ClaimTest
from harness.suite.claim_needs import CLAIM_TEST_NEEDS

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

_UNDEFINED = sorted(set(CLAIM_TEST_NEEDS) - set(REGISTERED))
if _UNDEFINED:
    raise ImportError(f"claim test(s) {', '.join(_UNDEFINED)} have a row in harness/suite/claim_needs.py but no class "
                      "in harness/analysis/claim_tests/")


def claim_test(name: str) -> ClaimTest:
    """The test a claim names (a validated claim names one that exists)."""
    return REGISTERED[name]
