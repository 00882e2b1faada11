"""Did a claim move between two runs? Read from its evidence, not only from its label.

A claim's label (PASS, FAIL, INCONCLUSIVE, ...) says on which side of a critical value its t
statistic fell. A statistic that sits on its critical value crosses it with float noise (another
CPU) while nothing real changed, and a real change can move an estimate a long way without
crossing. So two runs of one claim (a baseline and the gated run, or A and B of `harness compare`)
are compared on the evidence both record:

- the estimate may move by at most ``SPREAD_Z`` standard errors of the difference of the two
  estimates (each run's standard error over seeds; the suite's tolerance for the metric where a run
  has no spread), in either direction, whatever the labels say: a move beyond it is a regression
  even when the label holds;
- a label change is *near the boundary* (a warning, not a regression) when, at every decision bound
  whose side it changed, the claim's t statistic against that bound, (estimate - bound) / standard
  error, lay within ``NEAR_T`` of a critical value in both runs (either run's: Holm's step moves a
  claim's critical value when another claim's result changes). Any other label change is a
  regression, and so is one the statistic does not explain (a premise, a dropped pair, a reference
  effect): there the labels are compared as before.

Labels are opaque strings here, so a new result label needs no change; what is read is the
estimate, its standard error, the critical t the claim had to reach (``ClaimResult.boundary_t``)
and the bounds the decision interval is read against.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.analysis.decide.claims import ClaimResult
from harness.core.metrics import metric_family
from harness.suite.schema import GateSpec

SPREAD_Z = 3.0  # a move beyond 3 standard errors of the difference of two estimates is not seed noise
# A label change with the statistic within half a standard error of its critical value in both runs is
# a coin toss on a boundary: a sixth of the SPREAD_Z standard errors any estimate may move by.
NEAR_T = 0.5


@dataclass(frozen=True)
class ClaimEvidence:
    """What one run's claim rests on. ``None`` where the run could not measure it (one seed, an
    untestable claim, a baseline saved before evidence was stored)."""

    result: str
    estimate: float | None = None
    standard_error: float | None = None
    boundary_t: float | None = None
    bounds: tuple[float, ...] = ()  # where the label can change, in the estimate's units

    @property
    def testable(self) -> bool:
        return self.estimate is not None and self.standard_error is not None and self.boundary_t is not None

    def t_at(self, bound: float) -> float:
        """The t statistic against one bound; a deterministic estimate is infinitely far from any bound it misses."""
        gap = float(self.estimate) - bound
        if not self.standard_error:
            return 0.0 if gap == 0 else math.copysign(math.inf, gap)
        return gap / self.standard_error

    def side(self, bound: float) -> int:
        """+1 surely above the bound, -1 surely below, 0 undecided (the decision interval straddles it)."""
        t = self.t_at(bound)
        return 1 if t >= self.boundary_t else -1 if t <= -self.boundary_t else 0

    def entry_fields(self) -> dict[str, Any]:
        """The fields a baseline's claim entry stores."""
        return {"estimate": self.estimate, "standard_error": self.standard_error, "boundary_t": self.boundary_t,
                "bounds": list(self.bounds)}


def claim_evidence(claim: ClaimResult, better_sign: int, result: str | None = None) -> ClaimEvidence:
    """A claim's evidence; ``result`` is its label as the caller shows it (its status by default)."""
    estimate = claim.mean_estimate
    mean = _finite(estimate.mean) if estimate is not None else None
    error = _finite(estimate.standard_error) if estimate is not None else None
    return ClaimEvidence(claim.status if result is None else result, mean, error, _finite(claim.boundary_t),
                         decision_bounds(claim, better_sign))


def decision_bounds(claim: ClaimResult, better_sign: int) -> tuple[float, ...]:
    """The values the claim's decision interval is read against, in the estimate's units. A margin of
    superiority or non-inferiority also has 0 beside it: where 'surely better than 0 but short of the
    margin' parts from 'surely not better'. A bound that does not split labels only makes a label
    change less likely to be called near."""
    spec = claim.claim
    margin = claim.reference.margin if claim.reference is not None else float(spec.margin or 0.0)
    if margin is None or not math.isfinite(margin):
        return ()
    return claim.test.decision_bounds(spec, better_sign or 1, margin)


@dataclass(frozen=True)
class ClaimMove:
    """Two runs of one claim, judged: a regression, a near-boundary warning, or neither."""

    regression: bool
    near_boundary: bool
    rule: str


def judge(before: ClaimEvidence, after: ClaimEvidence, fallback_tolerance: float | None) -> ClaimMove:
    """The rule of this module; ``fallback_tolerance`` is the suite's tolerance for the metric, used where
    a run measured no spread (None: no estimate check then)."""
    labels = f"result {before.result.upper()} -> {after.result.upper()}"
    moved = _estimate_move(before, after, fallback_tolerance)
    if moved is not None and moved[0]:
        changed = " (changed)" if before.result != after.result else ""
        return ClaimMove(True, False, f"{labels}{changed}; {moved[1]}")
    estimates = f"; {moved[1]}" if moved is not None else ""
    if before.result == after.result:
        return ClaimMove(False, False, labels + estimates)
    near = _near_crossing(before, after)
    if near is None:
        return ClaimMove(True, False, f"{labels} (changed){estimates}")
    return ClaimMove(False, True, f"{labels} near the boundary: {near}{estimates}")


def _estimate_move(before: ClaimEvidence, after: ClaimEvidence,
                   fallback: float | None) -> tuple[bool, str] | None:
    """(beyond its tolerance, why) for two known estimates, else None."""
    if before.estimate is None or after.estimate is None:
        return None
    if before.standard_error is not None and after.standard_error is not None:
        tolerance = max(SPREAD_Z * math.hypot(before.standard_error, after.standard_error), round_off(before.estimate))
        source = f"{SPREAD_Z:g} standard errors over seeds"
    elif fallback is not None:
        tolerance, source = fallback, "the suite's tolerance (no spread)"
    else:
        return None
    change = after.estimate - before.estimate
    beyond = abs(change) > tolerance
    verb = "moved by" if beyond else "moves by"
    relation = ">" if beyond else "<="
    return beyond, (f"estimate {before.estimate:+.4g} -> {after.estimate:+.4g} {verb} {abs(change):.3g} "
                    f"{relation} {tolerance:.3g} = {source}")


def _near_crossing(before: ClaimEvidence, after: ClaimEvidence) -> str | None:
    """How the label change crossed its bounds, when every crossing was within NEAR_T of a critical
    value in both runs; None when one was not, or when no crossing explains the change."""
    if not (before.testable and after.testable) or len(before.bounds) != len(after.bounds):
        return None
    crossed = [(b, a) for b, a in zip(before.bounds, after.bounds) if before.side(b) != after.side(a)]
    if not crossed:
        return None
    critical = (before.boundary_t, after.boundary_t)
    described = []
    for bound_before, bound_after in crossed:
        edge = before.side(bound_before) + after.side(bound_after)  # +1 or -1: the critical value crossed
        t_before, t_after = before.t_at(bound_before), after.t_at(bound_after)
        if edge == 0 or not all(_within(t, edge, critical) for t in (t_before, t_after)):
            return None  # from surely above to surely below, or far from the critical value
        described.append(f"t {t_before:+.3g} -> {t_after:+.3g} against {bound_after:+.4g}")
    return (f"{'; '.join(described)}, critical t {critical[0]:.3g} -> {critical[1]:.3g} "
            f"(within {NEAR_T:g} of it in both runs)")


def _within(t: float, edge: int, critical: tuple[float, float]) -> bool:
    return any(abs(t - edge * c) <= NEAR_T for c in critical)


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def round_off(value: float) -> float:
    """How far two computations of the same mean may differ by float rounding alone (summation order)."""
    return 1e-9 * max(1.0, abs(value))


def suite_tolerance(tolerances: GateSpec, key: str, default: float) -> float:
    """The suite's tolerance for a metric: by its key, else its family, else ``default``."""
    named = tolerances.tolerances
    if key in named:
        return float(named[key])
    return float(named.get(metric_family(key), default))
