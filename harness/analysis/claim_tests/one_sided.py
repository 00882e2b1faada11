"""The step superiority and non-inferiority share: a one-sided t test of the paired differences
against one bound on the better or the worse side, confirmed by the sign-flip test at that bound."""
from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar, Sequence

from harness.analysis.claim_status import INCONCLUSIVE
from harness.analysis.claim_tests.contract import ClaimTest, ClaimTestOutcome
from harness.analysis.claim_tests.bounds import p_better, p_worse
from harness.analysis.stats.paired_stats import MeanEstimate, sign_flip_p_beyond
from harness.suite.schema import ClaimSpec


class OneSidedTest(ClaimTest):
    """Pass beyond ``bound(margin)`` on the better side, fail surely short of it."""

    strict: ClassVar[bool] = False  # a strict bound: an exact tie is not beyond it, so it fails

    @abstractmethod
    def bound(self, margin: float) -> float:
        """The pass bound, in 'better is positive' units."""

    @abstractmethod
    def where(self, margin: float) -> str:
        """The bound as the claims table's detail names it."""

    def decide(self, claim: ClaimSpec, estimate: MeanEstimate, values: Sequence[float], sign: int,
               margin: float) -> ClaimTestOutcome:
        bound = self.bound(margin)
        return ClaimTestOutcome(INCONCLUSIVE, f"one-sided t {self.where(margin)}",
                                p_value=p_better(estimate, sign, bound, inclusive=not self.strict),
                                p_fail=p_worse(estimate, sign, bound, inclusive=self.strict),
                                p_flip=sign_flip_p_beyond(values, sign * bound, sign),
                                p_flip_fail=sign_flip_p_beyond(values, sign * bound, -sign))
