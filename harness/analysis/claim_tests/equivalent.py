"""``equivalent``: pass when the difference lies within +-margin (two one-sided tests); fail when it surely
lies outside (either side, Bonferroni over the two). Needs no better direction. As non-inferiority,
it names a reference contrast and is vacuous unless that shows the control works."""
from __future__ import annotations

from typing import Sequence

from harness.analysis.claim_status import INCONCLUSIVE
from harness.analysis.claim_tests.contract import ClaimTest, ClaimTestOutcome, register
from harness.analysis.claim_tests.bounds import either_side, p_strict
from harness.analysis.stats.paired_stats import MeanEstimate
from harness.suite.schema import ClaimSpec


@register
class Equivalent(ClaimTest):
    name = "equivalent"
    directional = False

    def decide(self, claim: ClaimSpec, estimate: MeanEstimate, values: Sequence[float], sign: int,
               margin: float) -> ClaimTestOutcome:
        p = max(estimate.p_above(-margin), estimate.p_below(margin))
        p_outside = either_side(p_strict(estimate, margin, +1), p_strict(estimate, -margin, -1))
        return ClaimTestOutcome(INCONCLUSIVE, f"two one-sided t tests vs +-{margin:.4g}", p_value=p, p_fail=p_outside)

    def plot_marks(self, claim: ClaimSpec, sign: int, margin: float | None) -> tuple[float, ...]:
        return () if margin is None else (-margin, margin)

    def decision_bounds(self, claim: ClaimSpec, sign: int, margin: float) -> tuple[float, ...]:
        return (-margin, margin)
