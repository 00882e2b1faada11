"""Premises: facts about the testbed that a suite's claims rely on, checked before a claim is read.

A claim about a mechanism means nothing where the testbed never put the mechanism in its regime
(the signal it relies on is absent, a parameter sits at its bound, the arms trained for different
budgets). A premise bounds one arm's metric, or a contrast's paired difference, and is checked at
every sweep point, on every variant of a swept arm or contrast and every reported key of a metric
family:

- sampled metrics through the one-sided confidence bounds at the look's spent level (``looks.py``:
  the suite's claim level in a fixed design, the look's nominal level under the design's alpha
  spending in a sequential one, so that reading a premise at every look does not make a false hold
  likelier than the claim level): a premise **holds** when the bound on the far
  side clears it (``at_least``: the lower bound is at least the bound), **fails** when the bound on
  the near side does not reach it (``at_least``: the upper bound is below it), and is **open**
  otherwise, or with fewer than two values;
- exact metrics (bytes, counts, training budgets) value by value: it holds when every value (every
  paired difference) lies within the bounds, fails when one does not, and is open while a seed of
  the run is missing.

A claim whose premise failed at its sweep point is VACUOUS (it does not count for or against the
mechanism); one whose premise is still open is VACUOUS until more seeds settle it, which is what a
sequential design adds seeds for. A premise that holds changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from harness.analysis.decide.verdicts import ContrastVariant, compare, contrast_variants, variants_named
from harness.analysis.run_results import RunResults, metric_order
from harness.analysis.stats.number_format import fmt
from harness.analysis.decide.looks import claim_alpha
from harness.analysis.stats.paired_stats import MeanEstimate, mean_estimate
from harness.core.metrics import Metric, metric_family
from harness.suite.schema import PremiseSpec

HOLDS, FAILS, OPEN = "holds", "fails", "open"
SEVERITY = {HOLDS: 0, OPEN: 1, FAILS: 2}
# Units and metric namespaces of quantities that are exact by construction: no sampling error.
EXACT_UNITS = frozenset({"bytes", "count", "steps", "examples", "tokens", "parameters"})
EXACT_NAMESPACES = ("budget/",)


@dataclass(frozen=True)
class PremiseResult:
    """One premise at one sweep point, on one arm label or contrast variant and one metric key."""

    premise: PremiseSpec
    point: str
    subject: str  # the arm label or contrast variant it read
    key: str
    status: str
    n: int
    estimate: float | None  # mean value (arm) or mean paired difference (contrast)
    low: float | None  # lower one-sided confidence bound (exact: the smallest value)
    high: float | None  # upper one-sided confidence bound (exact: the largest value)
    exact: bool
    detail: str = ""

    @property
    def name(self) -> str:
        return str(self.premise.name)

    def needed_by(self, contrast: str) -> bool:
        """Whether claims on ``contrast`` (as the suite names it) rely on this premise."""
        named = self.premise.claims
        return not named or contrast in named

    @property
    def requirement(self) -> str:
        """'needs >= 0.9', 'needs <= 0', 'needs in [0, 0]'."""
        low, high = self.premise.at_least, self.premise.at_most
        if low is not None and high is not None:
            return f"needs in [{fmt(low)}, {fmt(high)}]"
        return f"needs >= {fmt(low)}" if low is not None else f"needs <= {fmt(high)}"

    @property
    def figures(self) -> str:
        """The estimate and the confidence bound that decided (or the range, for an exact metric)."""
        if self.estimate is None:
            return self.detail or "no values"
        if self.exact:
            span = fmt(self.low) if self.low == self.high else f"{fmt(self.low)}..{fmt(self.high)}"
            return f"{fmt(self.estimate)} (exact: {span})"
        if self.low is None or self.high is None:
            return f"{fmt(self.estimate)} (n={self.n}, no interval)"
        return f"{fmt(self.estimate)} [{fmt(self.low)}, {fmt(self.high)}]"

    def text(self) -> str:
        """'premise <name> not met: <estimate (bound)>, <requirement>' (or 'open', or 'holds')."""
        where = f" ({self.subject} {self.key}{f' at {self.point}' if self.point else ''})"
        state = {FAILS: "not met", OPEN: "not yet established", HOLDS: "holds"}[self.status]
        return f"premise {self.name} {state}: {self.figures}, {self.requirement}{where}"


def is_exact(spec: Metric) -> bool:
    """Bytes, counts and training budgets are exact by construction."""
    return spec.kind == "memory" or spec.unit in EXACT_UNITS or spec.name.startswith(EXACT_NAMESPACES)


def evaluate_premises(results: RunResults, level: float | None = None) -> list[PremiseResult]:
    """Every declared premise at every sweep point, per arm label or contrast variant and metric key,
    its sampled bounds read at one-sided ``level`` (the claim level when None)."""
    level = claim_alpha(results.confidence) if level is None else level
    out: list[PremiseResult] = []
    variants = contrast_variants(results)
    for premise in results.stored.premises:
        for point in results.point_labels():
            subjects = list(_subjects(results, variants, premise, point))
            if not subjects:
                what = premise.arm or premise.contrast
                out.append(PremiseResult(premise, point, str(what), premise.metric, OPEN, 0, None, None, None,
                                         False, f"{what} has no finished trials reporting {premise.metric}"))
            for subject, key, values in subjects:
                out.append(_check(results, premise, point, subject, key, values, level))
    return out


def worst_needed(premises: Sequence[PremiseResult], contrast: str, point: str) -> PremiseResult | None:
    """The premise result a claim on ``contrast`` at ``point`` must answer to: the first failed one,
    else the first open one; None when every premise it needs holds (or it needs none)."""
    needed = [p for p in premises if p.point == point and p.needed_by(contrast) and p.status != HOLDS]
    return max(needed, key=lambda p: SEVERITY[p.status], default=None)


def _subjects(results: RunResults, variants: list[ContrastVariant], premise: PremiseSpec, point: str
              ) -> Iterator[tuple[str, str, list[float]]]:
    """(arm label or contrast variant, metric key, values) for each thing the premise reads at a point."""
    if premise.arm:
        for label in results.arm_labels(premise.arm):
            for key in _keys(premise.metric, results.metric_keys(label, point)):
                yield label, key, list(results.values(label, point, key).values())
        return
    for variant in variants_named(variants, premise.contrast):
        reported = set(results.metric_keys(variant.treatment_label, point)) & set(
            results.metric_keys(variant.control_label, point))
        for key in _keys(premise.metric, reported):
            difference = compare(results, variant.treatment_label, variant.control_label, point, key)
            yield variant.name, key, [] if difference is None else list(difference.differences)


def _keys(wanted: str, reported) -> list[str]:
    """The reported keys a premise's metric names: the key itself, or every key of its family."""
    reported = set(reported)
    if wanted in reported:
        return [wanted]
    return sorted((k for k in reported if "@" not in wanted and metric_family(k) == wanted), key=metric_order)


def bound_status(estimate: MeanEstimate, at_least: float | None, at_most: float | None, level: float
                 ) -> tuple[str, float, float]:
    """(holds / fails / open, low, high) of a sampled mean against its bounds, read through the
    one-sided confidence bounds at ``level`` (two values at least)."""
    interval = estimate.interval_at(level)
    low, high = interval.low, interval.high
    holds = (at_least is None or low >= at_least) and (at_most is None or high <= at_most)
    fails = (at_least is not None and high < at_least) or (at_most is not None and low > at_most)
    return (HOLDS if holds else (FAILS if fails else OPEN)), low, high


def _check(results: RunResults, premise: PremiseSpec, point: str, subject: str, key: str,
           values: list[float], level: float) -> PremiseResult:
    at_least, at_most = premise.at_least, premise.at_most
    common = dict(premise=premise, point=point, subject=subject, key=key, n=len(values))
    if not values:
        return PremiseResult(**common, status=OPEN, estimate=None, low=None, high=None, exact=False,
                             detail=f"no finite values of {key}")
    estimate = mean_estimate(values, results.confidence)
    if is_exact(results.spec_for(key)):
        low, high = min(values), max(values)
        outside = (at_least is not None and low < at_least) or (at_most is not None and high > at_most)
        complete = len(values) >= len(results.seeds)
        status = FAILS if outside else (HOLDS if complete else OPEN)
        return PremiseResult(**common, status=status, estimate=estimate.mean, low=low, high=high, exact=True)
    if estimate.interval is None:
        return PremiseResult(**common, status=OPEN, estimate=estimate.mean, low=None, high=None, exact=False,
                             detail="fewer than 2 values: no confidence bound")
    status, low, high = bound_status(estimate, at_least, at_most, level)
    return PremiseResult(**common, status=status, estimate=estimate.mean, low=low, high=high, exact=False)
