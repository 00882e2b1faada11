"""The suite's claims: its pre-declared primary hypotheses, tested one-sided and Holm-corrected.

Every claim is a one-sided t test at level (1 - confidence) / 2, which is exactly "the two-sided
interval at the run's confidence lies on the right side of the boundary" when it stands alone.
The claims of a suite form one family: their p-values are Holm-adjusted together, and a claim
PASSes only when its adjusted p-value is within the level. Intervals are read in 'better is
positive' units (the metric's direction); boundaries are inclusive:

- ``superior``: pass when the treatment is better than the control; fail when the interval
  holds no improvement.
- ``non_inferior``: pass when the treatment is worse by less than the margin; fail when the
  interval lies entirely beyond the margin on the worse side.
- ``equivalent``: pass when the difference lies within +-margin (two one-sided tests); fail when
  the interval lies entirely outside.
- ``equal``: pass when every paired difference is exactly zero (deterministic quantities such as
  bytes); fail otherwise. Exact, so outside the Holm family, and the only test one pair decides.
- ``ratio``: per-pair treatment / control; pass when its mean is within [min, max].

Non-inferiority and equivalence prove nothing when the control itself does nothing in this run
(both arms at chance are "equivalent"). Such a claim names a ``reference`` contrast whose
treatment is the claim's control (e.g. raw-vs-none); its margin is absolute or a fraction of the
reference effect. The claim is ``vacuous`` unless the reference effect is established: its interval
lies on the better side beyond the margin. Fewer than two pairs give ``insufficient pairs``.

A claim naming ``<treatment arm>-vs-<control arm>`` applies to every variant of a swept arm; a
metric family without a qualifier applies to each of its reported keys. For every claim the
minimum detectable effect (80% power at the run's n and observed spread) says what the testbed
could have found.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from harness.analysis.results import RunResults, metric_order
from harness.analysis.stats import (
    Interval,
    MeanEstimate,
    holm_adjust,
    mean_estimate,
    minimum_detectable_effect,
)
from harness.analysis.verdicts import ContrastVariant, compare, contrast_variants, oriented
from harness.metrics import metric_family

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
VACUOUS = "vacuous"
INSUFFICIENT = "insufficient pairs"


@dataclass(frozen=True)
class ReferenceEffect:
    """The assay-sensitivity check of a non-inferiority or equivalence claim."""

    contrast: str
    estimate: float | None  # in the metric's units (treatment - control of the reference contrast)
    interval: Interval | None
    n: int
    margin: float | None  # the claim's absolute margin (resolved when relative)
    established: bool
    reason: str


@dataclass(frozen=True)
class ClaimResult:
    claim: Mapping[str, Any]
    contrast: str
    point: str
    key: str
    status: str
    n: int
    estimate: float | None
    interval: Interval | None
    detail: str
    p_value: float | None = None  # one-sided, for the claim's pass hypothesis
    p_adjusted: float | None = None  # Holm over the suite's claims
    mde: float | None = None  # minimum detectable effect at 80% power, metric units (ratio: ratio units)
    dropped: int = 0
    reference: ReferenceEffect | None = None

    @property
    def statement(self) -> str:
        claim = self.claim
        if claim["test"] in ("non_inferior", "equivalent"):
            if claim.get("relative_margin") is not None:
                return f"{claim['test']} (margin {claim['relative_margin']:g} x {claim.get('reference')})"
            return f"{claim['test']} (margin {claim['margin']:g})"
        if claim["test"] == "ratio":
            return f"ratio in [{_bound(claim.get('min'))}, {_bound(claim.get('max'))}]"
        return str(claim["test"])


def claim_alpha(confidence: float) -> float:
    """One-sided level of every claim: the two-sided interval's tail."""
    return (1.0 - confidence) / 2.0


def evaluate_claims(results: RunResults, include_speed: bool = True) -> list[ClaimResult]:
    """One result per claim x matching contrast variant x sweep point x metric key, Holm-corrected.

    ``include_speed=False`` leaves claims on speed metrics out, Holm family included: the gate's view
    where timings are not gated, so that their noise cannot move the claims it does gate.
    """
    variants = contrast_variants(results)
    out: list[ClaimResult] = []
    for claim in results.meta.get("claims") or []:
        if not include_speed and results.spec_for(claim["metric"]).kind == "speed":
            continue
        matching = _variants_named(variants, claim["contrast"])
        if not matching:
            out.append(_undecided(claim, claim["contrast"], "", claim["metric"], "no such contrast in this run"))
        for variant in matching:
            for point in results.point_labels():
                out.extend(_evaluate_at(results, variants, claim, variant, point))
    return [_missing_cannot_pass(r) for r in _decide(out, claim_alpha(results.confidence))]


def _variants_named(variants: list[ContrastVariant], name: str) -> list[ContrastVariant]:
    return [v for v in variants if name in (v.name, v.declared_name, f"{v.treatment_arm}-vs-{v.control_arm}")]


def _evaluate_at(
    results: RunResults, variants: list[ContrastVariant], claim: Mapping[str, Any], variant: ContrastVariant, point: str
) -> list[ClaimResult]:
    reported = set(results.metric_keys(variant.treatment_label, point)) & set(
        results.metric_keys(variant.control_label, point)
    )
    wanted = claim["metric"]
    family_keys = (k for k in reported if "@" not in wanted and metric_family(k) == wanted)
    keys = [wanted] if wanted in reported else sorted(family_keys, key=metric_order)
    if not keys:
        return [_undecided(claim, variant.name, point, wanted, "metric not reported by both arms")]
    return [_evaluate_key(results, variants, claim, variant, point, key) for key in keys]


def _evaluate_key(
    results: RunResults, variants: list[ContrastVariant], claim: Mapping[str, Any], variant: ContrastVariant,
    point: str, key: str,
) -> ClaimResult:
    """The claim's test before multiplicity: status is pass-candidate (p_value), fail or undecided."""
    test = claim["test"]
    if test == "ratio":
        return _ratio(results, claim, variant, point, key)
    difference = compare(results, variant.treatment_label, variant.control_label, point, key)
    if difference is None:
        return _undecided(claim, variant.name, point, key, "no seed finished on both sides")
    estimate = difference.estimate
    common = dict(claim=claim, contrast=variant.name, point=point, key=key, n=difference.n,
                  estimate=difference.mean_difference, interval=difference.interval, dropped=len(difference.dropped))
    if test == "equal":
        exact = all(d == 0 for d in difference.differences)
        return ClaimResult(**common, status=PASS if exact else FAIL,
                           detail="every paired difference is 0" if exact else "paired differences are not all 0")
    sign = results.spec_for(key).better_sign
    if sign == 0 and test != "equivalent":
        return ClaimResult(**common, status=INCONCLUSIVE, detail="metric has no direction")
    reference = None
    margin = float(claim.get("margin") or 0.0)
    if test in ("non_inferior", "equivalent"):
        reference = _reference_effect(results, variants, claim, variant, point, key, sign or 1)
        margin = reference.margin if reference.margin is not None else math.nan
    if estimate.insufficient:
        return ClaimResult(**common, status=INSUFFICIENT, reference=reference,
                           detail=f"{difference.n} pair(s): a t interval needs at least 2")
    alpha = claim_alpha(results.confidence)
    mde = minimum_detectable_effect(estimate.sd or 0.0, estimate.n, alpha, sided=1)
    common.update(mde=mde, reference=reference)
    if reference is not None and not reference.established:
        return ClaimResult(**common, status=VACUOUS, detail=reference.reason)
    if test in ("superior", "non_inferior"):
        bound = 0.0 if test == "superior" else -margin
        best = oriented(estimate.interval, sign)[1]
        failed = best <= 0 if test == "superior" else best < bound
        where = "vs 0 (better side)" if test == "superior" else f"vs -{margin:.4g} (worse side)"
        return ClaimResult(**common, status=FAIL if failed else PASS, p_value=_p_better(estimate, sign, bound),
                           detail=f"one-sided t {where}")
    p = max(estimate.p_above(-margin), estimate.p_below(margin))
    outside = estimate.interval.low > margin or estimate.interval.high < -margin
    return ClaimResult(**common, status=FAIL if outside else PASS, p_value=p,
                       detail=f"two one-sided t tests vs +-{margin:.4g}")


def _p_better(estimate: MeanEstimate, sign: int, bound: float) -> float:
    """One-sided p of H0: the oriented true mean <= bound (oriented: better is positive)."""
    return estimate.p_above(bound) if sign > 0 else estimate.p_below(-bound)


def _reference_effect(
    results: RunResults, variants: list[ContrastVariant], claim: Mapping[str, Any], variant: ContrastVariant,
    point: str, key: str, sign: int,
) -> ReferenceEffect:
    """Does the claim's control really work here? Its reference contrast at the same point and key."""
    name = str(claim.get("reference") or "")
    candidates = _variants_named(variants, name) if name else []
    chosen = [v for v in candidates if v.treatment_label == variant.control_label] or candidates[:1]
    relative = claim.get("relative_margin")
    absolute = None if relative is not None else float(claim.get("margin") or 0.0)
    if not chosen:
        why = "no reference contrast declared" if not name else f"reference {name!r} has no variant in this run"
        return ReferenceEffect(name, None, None, 0, absolute, False, f"vacuous: {why}, so nothing shows the control works")
    difference = compare(results, chosen[0].treatment_label, chosen[0].control_label, point, key)
    if difference is None or difference.interval is None:
        n = 0 if difference is None else difference.n
        return ReferenceEffect(chosen[0].name, None if difference is None else difference.mean_difference, None, n,
                               absolute, False, f"vacuous: reference {chosen[0].name} has {n} pair(s) on {key}")
    low, _ = oriented(difference.interval, sign)
    effect = sign * difference.mean_difference
    margin = absolute if relative is None else float(relative) * effect
    label = f"reference {chosen[0].name} {difference.mean_difference:+.4g} [{difference.interval.low:+.4g}, {difference.interval.high:+.4g}]"
    if effect <= 0 or low <= 0:
        reason = f"vacuous: {label} is not established (interval reaches 0 or the worse side)"
        return ReferenceEffect(chosen[0].name, difference.mean_difference, difference.interval, difference.n,
                               margin if effect > 0 else None, False, reason)
    if low <= margin:
        reason = f"vacuous: {label} is not surely larger than the margin {margin:.4g}"
        return ReferenceEffect(chosen[0].name, difference.mean_difference, difference.interval, difference.n,
                               margin, False, reason)
    return ReferenceEffect(chosen[0].name, difference.mean_difference, difference.interval, difference.n, margin,
                           True, f"{label} established")


def _ratio(results: RunResults, claim: Mapping[str, Any], variant: ContrastVariant, point: str, key: str) -> ClaimResult:
    difference = compare(results, variant.treatment_label, variant.control_label, point, key)
    controlled = np.asarray(difference.control if difference else ())
    usable = controlled != 0
    if not usable.any():
        return _undecided(claim, variant.name, point, key, "no pair with a non-zero control value")
    ratios = np.asarray(difference.treatment)[usable] / controlled[usable]
    estimate = mean_estimate(ratios, results.confidence)
    lower = -math.inf if claim.get("min") is None else float(claim["min"])
    upper = math.inf if claim.get("max") is None else float(claim["max"])
    common = dict(claim=claim, contrast=variant.name, point=point, key=key, n=estimate.n, estimate=estimate.mean,
                  interval=estimate.interval, dropped=len(difference.dropped) + int(np.count_nonzero(~usable)))
    if estimate.insufficient:
        return ClaimResult(**common, status=INSUFFICIENT, detail=f"{estimate.n} pair(s): a t interval needs at least 2")
    p = max(estimate.p_above(lower) if math.isfinite(lower) else 0.0,
            estimate.p_below(upper) if math.isfinite(upper) else 0.0)
    outside = estimate.interval.high < lower or estimate.interval.low > upper
    mde = minimum_detectable_effect(estimate.sd or 0.0, estimate.n, claim_alpha(results.confidence), sided=1)
    return ClaimResult(**common, status=FAIL if outside else PASS, p_value=p, mde=mde,
                       detail="one-sided t of the mean treatment/control ratio vs its bounds")


def _decide(results: list[ClaimResult], alpha: float) -> list[ClaimResult]:
    """Holm over every claim with a p-value; a pass candidate passes only within the adjusted level."""
    tested = [i for i, r in enumerate(results) if r.p_value is not None]
    adjusted = holm_adjust([results[i].p_value for i in tested])
    out = list(results)
    for i, p_adjusted in zip(tested, adjusted):
        result = results[i]
        status = result.status
        if status == PASS and p_adjusted > alpha:
            status = INCONCLUSIVE
        out[i] = replace(result, status=status, p_adjusted=p_adjusted)
    return out


def _missing_cannot_pass(result: ClaimResult) -> ClaimResult:
    """A pass with dropped pairs is INCONCLUSIVE: a value missing not at random (the worst seeds
    diverging to NaN) must not help a claim, and a fail stays a fail whatever the missing values were."""
    if result.status != PASS or not result.dropped:
        return result
    why = f"{result.dropped} pair(s) dropped (missing or non-finite): a pass needs every pair"
    return replace(result, status=INCONCLUSIVE, detail=f"{result.detail}; {why}")


def _undecided(claim: Mapping[str, Any], contrast: str, point: str, key: str, detail: str) -> ClaimResult:
    return ClaimResult(claim, contrast, point, key, INCONCLUSIVE, 0, None, None, detail)


def _bound(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
