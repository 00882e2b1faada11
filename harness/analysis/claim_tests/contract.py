"""The claim test every test's module subclasses: what it says, how it decides, which family it is
tested in, which way it reads, what a plot marks on its row and what it could have found.

A test's class sets ``name`` and is decorated with ``@register`` (its row of
harness/suite/claim_needs.py must exist: that row is what a suite file may write). ``claims.py`` runs
the shared steps (pairing, the reference effect, Holm over the family, the looks) and asks the claim's
test for every step that differs by test.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Sequence, TypeVar

import scipy.stats

from harness.analysis.stats.paired_stats import MeanEstimate, minimum_detectable_effect
from harness.core.metrics import Metric
from harness.suite.claim_needs import CLAIM_TEST_NEEDS, REQUIRED_MARGIN, Needs
from harness.suite.schema import ClaimSpec

QUALITY_FAMILY, TIMING_FAMILY = "quality", "timing"
REGISTERED: dict[str, ClaimTest] = {}  # name -> the one instance of its class, in the order modules load
Test = TypeVar("Test", bound=type["ClaimTest"])


@dataclass(frozen=True)
class ClaimTestOutcome:
    """What a test reads from a claim's paired values before multiplicity: INCONCLUSIVE with the
    p-values Holm decides on, or (an exact test) the result itself."""

    status: str
    detail: str  # how it was tested, as the claims table shows it
    p_value: float | None = None  # one-sided, of the pass hypothesis
    p_fail: float | None = None  # one-sided, of the fail hypothesis (the claim is surely false)
    p_flip: float | None = None  # the sign-flip test of the pass hypothesis at its bound (no normality)
    p_flip_fail: float | None = None  # the same for the fail hypothesis


class ClaimTest(ABC):
    """One claim test. The defaults serve a one-sided test of paired differences in the quality or
    timing family; a test overrides what it does otherwise."""

    name: ClassVar[str]
    directional: ClassVar[bool] = True  # reads the metric's better direction (a metric without one: inconclusive)
    exact: ClassVar[bool] = False  # decided from every pair exactly: no sampling error, no Holm family, no side

    @property
    def needs(self) -> Needs:
        """What a claim of this test gives (margin, reference, bounds) and whether it reads ratios."""
        return CLAIM_TEST_NEEDS[self.name]

    # -- statement ---------------------------------------------------------------------------------

    def statement(self, claim: ClaimSpec) -> str:
        """How the claim reads in every report: its test and the margin it is held to."""
        if self.needs.margin != REQUIRED_MARGIN:
            return self.name
        if claim.relative_margin is not None:
            return f"{self.name} (margin {claim.relative_margin:g} x {claim.reference})"
        return f"{self.name} (margin {claim.margin:g})"

    # -- decision rule -----------------------------------------------------------------------------

    @abstractmethod
    def decide(self, claim: ClaimSpec, estimate: MeanEstimate, values: Sequence[float], sign: int,
               margin: float) -> ClaimTestOutcome:
        """The test of the claim's paired ``values`` (differences, or ratios where the test reads them)
        summarised by ``estimate``; ``sign``: the metric's better direction, ``margin``: the absolute
        margin (resolved from the reference effect where the margin is relative)."""

    # -- family membership -------------------------------------------------------------------------

    def in_holm_family(self, spec: Metric) -> bool:
        """Tested for sampling error: not exact, and testable (a direction, or a test that needs none).
        A testable claim leaves the family only when its observed spread is zero, whatever the metric's
        kind; one that could not be tested stays in it at p = 1."""
        return not self.exact and (spec.better_sign != 0 or not self.directional)

    def family(self, spec: Metric) -> str:
        """Timing claims form a Holm family of their own: their noise follows the machine's load, so a
        timing claim must not make a quality claim harder to pass, nor the reverse."""
        return TIMING_FAMILY if spec.kind == "speed" else QUALITY_FAMILY

    # -- which way ---------------------------------------------------------------------------------

    def which_way(self, claim: ClaimSpec, status: str, low: float, high: float) -> tuple[str, str]:
        """The status and the words on where the deciding interval [low, high] (better is positive) lies
        beside 0 as well as beside the claim's boundary; read off that one interval, so no new test."""
        return status, ""

    def favours_an_arm(self) -> bool:
        """Whether a decided claim of this test reads for one arm and against the other."""
        return not self.exact

    # -- plot marks --------------------------------------------------------------------------------

    def plot_marks(self, claim: ClaimSpec, sign: int, margin: float | None) -> tuple[float, ...]:
        """The dashed ticks on the claim's forest-plot row, in the estimate's units; ``sign``: the better
        direction (1 where the metric has none), ``margin``: the reference-resolved margin or None."""
        return ()

    def decision_bounds(self, claim: ClaimSpec, sign: int, margin: float) -> tuple[float, ...]:
        """The values the claim's decision interval is read against (compare and gate: how near a
        label change was), in the estimate's units; ``margin`` is finite."""
        return ()

    # -- power and MDE -----------------------------------------------------------------------------

    def mde(self, claim: ClaimSpec, estimate: MeanEstimate, level: float) -> float:
        """The effect the claim could have found: 80% power at its n, its spread and ``level``."""
        return minimum_detectable_effect(estimate.sd or 0.0, estimate.n, level)

    def effect_in_sd(self, p_value: float | None, n: int) -> float | None:
        """A pilot's standardized distance from the pass bound (the one-sided t over sqrt(n)): the effect
        seed planning powers the claim for. A p-value is clipped to [1e-16, 1 - 1e-16], where t's inverse
        survival function stays finite: a pilot that surely passes (p = 0) reads as a large effect."""
        if p_value is None or n < 2:
            return None
        p = min(max(p_value, 1e-16), 1.0 - 1e-16)
        return float(scipy.stats.t.isf(p, n - 1)) / math.sqrt(n)


def register(cls: Test) -> Test:
    """Make ``cls`` the test its ``name`` stands for (a test module's class decorator)."""
    if cls.name not in CLAIM_TEST_NEEDS:
        raise TypeError(f"claim test {cls.name!r} has no row in harness/suite/claim_needs.py")
    if cls.name in REGISTERED:
        raise TypeError(f"claim test {cls.name!r} is defined twice")
    REGISTERED[cls.name] = cls()
    return cls
