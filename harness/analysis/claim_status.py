"""The results a primary claim can have: the claim tests give them and every report reads them, so
they sit beside and below both (harness/analysis/claim_tests/ and decide/claims.py)."""
from __future__ import annotations

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
VACUOUS = "vacuous"
INSUFFICIENT = "insufficient pairs"
FUTILE = "futile"
SHORT = "short of margin"  # surely better than 0, surely short of a superiority margin: a decided FAIL of the claim
NO_ANSWER = "no answer"  # treatment and control bit-identical on every seed: one arm twice, whatever its test says
DECIDED = (PASS, FAIL, SHORT, FUTILE)
