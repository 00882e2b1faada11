"""``superior``: pass when the treatment is better than the control by more than its ``margin`` (0 when
none is declared); fail when it is surely not. A declared margin is the smallest gain worth having,
so a mechanism that helps by less is decided (SHORT OF MARGIN) instead of staying open for ever. The
bound is strict: an arm identical to its control fails."""
from __future__ import annotations

from harness.analysis.claim_status import FAIL, SHORT
from harness.analysis.claim_tests.contract import register
from harness.analysis.claim_tests.one_sided import OneSidedTest
from harness.analysis.stats.paired_stats import MeanEstimate
from harness.suite.schema import ClaimSpec


@register
class Superior(OneSidedTest):
    name = "superior"
    strict = True  # an exact tie is not better, it fails

    def bound(self, margin: float) -> float:
        return margin

    def where(self, margin: float) -> str:
        return f"vs {margin:.4g} (better side)"

    def statement(self, claim: ClaimSpec) -> str:
        return f"superior (by more than {claim.margin:g})" if claim.margin else "superior"

    def which_way(self, claim: ClaimSpec, status: str, low: float, high: float) -> tuple[str, str]:
        """A FAIL surely short of a margin but surely better than 0 is SHORT OF MARGIN; one at or below 0
        is 'not better'."""
        if status != FAIL:
            return status, ""
        margin = float(claim.margin or 0.0)
        if margin > 0 and low > 0:
            return SHORT, f"better, by less than {margin:g}"
        if high <= 0:
            return status, "not better"
        return status, f"short of {margin:g}, not shown better than 0"

    def plot_marks(self, claim: ClaimSpec, sign: int, margin: float | None) -> tuple[float, ...]:
        return (sign * float(claim.margin),) if claim.margin else ()

    def decision_bounds(self, claim: ClaimSpec, sign: int, margin: float) -> tuple[float, ...]:
        """The margin, and 0 beside it: where 'surely better than 0 but short of the margin' parts from
        'surely not better'."""
        return (sign * margin, *((0.0,) if margin else ()))

    def mde(self, claim: ClaimSpec, estimate: MeanEstimate, level: float) -> float:
        """The true gain it needs is beyond the margin."""
        return float(claim.margin or 0.0) + super().mde(claim, estimate, level)
