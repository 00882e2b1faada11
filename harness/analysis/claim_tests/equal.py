"""``equal``: pass when every paired difference is exactly zero (deterministic quantities such as bytes);
fail otherwise. The only test one pair decides; with no sampling error it stays outside the Holm
family and reads for neither arm."""
from __future__ import annotations

from typing import Sequence

from harness.analysis.claim_status import FAIL, PASS
from harness.analysis.claim_tests.contract import ClaimTest, ClaimTestOutcome, register
from harness.analysis.stats.paired_stats import MeanEstimate
from harness.suite.schema import ClaimSpec


@register
class Equal(ClaimTest):
    name = "equal"
    directional = False
    exact = True

    def decide(self, claim: ClaimSpec, estimate: MeanEstimate, values: Sequence[float], sign: int,
               margin: float) -> ClaimTestOutcome:
        if all(d == 0 for d in values):
            return ClaimTestOutcome(PASS, "every paired difference is 0")
        return ClaimTestOutcome(FAIL, "paired differences are not all 0")
