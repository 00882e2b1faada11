"""``non_inferior``: pass when the treatment is worse than the control by less than the margin; fail when
it is surely worse by more. The margin is absolute or a fraction of the reference effect, and the
claim is vacuous unless its reference contrast shows the control works in the run. The bound is
inclusive."""
from __future__ import annotations

from harness.analysis.claim_status import FAIL, PASS
from harness.analysis.claim_tests.contract import register
from harness.analysis.claim_tests.one_sided import OneSidedTest
from harness.suite.schema import ClaimSpec


@register
class NonInferior(OneSidedTest):
    name = "non_inferior"

    def bound(self, margin: float) -> float:
        return -margin

    def where(self, margin: float) -> str:
        return f"vs -{margin:.4g} (worse side)"

    def which_way(self, claim: ClaimSpec, status: str, low: float, high: float) -> tuple[str, str]:
        """A PASS whose interval lies above 0 is superior too; a FAIL is worse by more than the margin."""
        if status == PASS and low > 0:
            return status, "superior too"
        if status == FAIL:
            return status, "worse by more than the margin"
        return status, ""

    def plot_marks(self, claim: ClaimSpec, sign: int, margin: float | None) -> tuple[float, ...]:
        return () if margin is None else (-sign * margin,)

    def decision_bounds(self, claim: ClaimSpec, sign: int, margin: float) -> tuple[float, ...]:
        """The margin on the worse side, and 0 beside it."""
        return (-sign * margin, *((0.0,) if margin else ()))
