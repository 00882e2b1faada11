"""``ratio``: per-pair treatment / control (pairs with a zero control left out); pass when the mean ratio
surely lies within [min, max] (either bound may be open), fail when it surely lies outside. Needs no
better direction; its plots and tables show ratios (no effect at 1)."""
from __future__ import annotations

import math
from typing import Sequence

from harness.analysis.claim_status import INCONCLUSIVE
from harness.analysis.claim_tests.contract import ClaimTest, ClaimTestOutcome, register
from harness.analysis.claim_tests.bounds import either_side, p_strict
from harness.analysis.stats.paired_stats import MeanEstimate
from harness.suite.schema import ClaimSpec


@register
class Ratio(ClaimTest):
    name = "ratio"
    directional = False

    def statement(self, claim: ClaimSpec) -> str:
        return f"ratio in [{_bound(claim.min)}, {_bound(claim.max)}]"

    def decide(self, claim: ClaimSpec, estimate: MeanEstimate, values: Sequence[float], sign: int,
               margin: float) -> ClaimTestOutcome:
        lower = -math.inf if claim.min is None else float(claim.min)
        upper = math.inf if claim.max is None else float(claim.max)
        p = max(estimate.p_above(lower) if math.isfinite(lower) else 0.0,
                estimate.p_below(upper) if math.isfinite(upper) else 0.0)
        below = p_strict(estimate, lower, -1) if math.isfinite(lower) else 1.0
        above = p_strict(estimate, upper, +1) if math.isfinite(upper) else 1.0
        p_outside = either_side(above, below) if math.isfinite(lower) and math.isfinite(upper) else min(above, below)
        return ClaimTestOutcome(INCONCLUSIVE, "one-sided t of the mean treatment/control ratio vs its bounds",
                                p_value=p, p_fail=p_outside)

    def plot_marks(self, claim: ClaimSpec, sign: int, margin: float | None) -> tuple[float, ...]:
        return _bounds(claim)

    def decision_bounds(self, claim: ClaimSpec, sign: int, margin: float) -> tuple[float, ...]:
        return _bounds(claim)


def _bounds(claim: ClaimSpec) -> tuple[float, ...]:
    return tuple(float(bound) for bound in (claim.min, claim.max) if bound is not None)


def _bound(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
