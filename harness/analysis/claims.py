"""The suite's claims, evaluated to pass / fail / inconclusive from paired bootstrap intervals.

Intervals are read in 'better is positive' units (the metric's direction), margins are absolute,
in the metric's unit, and boundaries are inclusive:

- ``superior``: pass when the interval is entirely better; fail when it holds no improvement.
- ``non_inferior``: pass when its worse end stays within the margin; fail when it is entirely
  worse than the margin.
- ``equivalent``: pass when the interval lies within +-margin; fail when it lies entirely outside.
- ``equal``: pass when every paired difference is exactly zero (deterministic quantities such as
  bytes); fail otherwise. The only test a single pair can decide.
- ``ratio``: per-pair treatment / control; pass when the interval of the mean ratio lies within
  [min, max]; fail when it lies entirely outside.

A claim naming ``<treatment arm>-vs-<control arm>`` applies to every variant of a swept arm; a
metric family without a qualifier applies to each of its reported keys.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from harness.analysis.results import RunResults, metric_order
from harness.analysis.stats import Interval, bootstrap_mean_interval, pair_values
from harness.analysis.verdicts import ContrastVariant, compare, contrast_variants, oriented
from harness.tasks.base import metric_family

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"


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

    @property
    def statement(self) -> str:
        claim = self.claim
        if claim["test"] in ("non_inferior", "equivalent"):
            return f"{claim['test']} (margin {claim['margin']:g})"
        if claim["test"] == "ratio":
            return f"ratio in [{_bound(claim.get('min'))}, {_bound(claim.get('max'))}]"
        return str(claim["test"])


def evaluate_claims(results: RunResults) -> list[ClaimResult]:
    """One result per claim x matching contrast variant x sweep point x metric key."""
    variants = contrast_variants(results)
    out: list[ClaimResult] = []
    for claim in results.meta.get("claims") or []:
        wanted = claim["contrast"]
        matching = [v for v in variants if wanted in (v.name, v.declared_name, f"{v.treatment_arm}-vs-{v.control_arm}")]
        if not matching:
            out.append(_undecided(claim, claim["contrast"], "", claim["metric"], "no such contrast in this run"))
        for variant in matching:
            for point in results.point_labels():
                out.extend(_evaluate_at(results, claim, variant, point))
    return out


def _evaluate_at(results: RunResults, claim: Mapping[str, Any], variant: ContrastVariant, point: str) -> list[ClaimResult]:
    reported = set(results.metric_keys(variant.treatment_label, point)) & set(
        results.metric_keys(variant.control_label, point)
    )
    wanted = claim["metric"]
    family_keys = (k for k in reported if "@" not in wanted and metric_family(k) == wanted)
    keys = [wanted] if wanted in reported else sorted(family_keys, key=metric_order)
    if not keys:
        return [_undecided(claim, variant.name, point, wanted, "metric not reported by both arms")]
    return [_evaluate_key(results, claim, variant, point, key) for key in keys]


def _evaluate_key(
    results: RunResults, claim: Mapping[str, Any], variant: ContrastVariant, point: str, key: str
) -> ClaimResult:
    test = claim["test"]
    if test == "ratio":
        return _ratio(results, claim, variant, point, key)
    difference = compare(results, variant.treatment_label, variant.control_label, point, key)
    if difference is None:
        return _undecided(claim, variant.name, point, key, "no seed finished on both sides")
    common = dict(claim=claim, contrast=variant.name, point=point, key=key, n=difference.n,
                  estimate=difference.mean_difference, interval=difference.interval)
    if test == "equal":
        exact = all(d == 0 for d in difference.differences)
        return ClaimResult(**common, status=PASS if exact else FAIL,
                           detail="every paired difference is 0" if exact else "paired differences are not all 0")
    if difference.interval.degenerate:
        return ClaimResult(**common, status=INCONCLUSIVE, detail="one pair: no confidence interval")
    sign = results.spec_for(key).better_sign
    if test in ("superior", "non_inferior") and sign == 0:
        return ClaimResult(**common, status=INCONCLUSIVE, detail="metric has no direction")
    margin = float(claim.get("margin") or 0.0)
    if test == "equivalent":
        low, high = difference.interval.low, difference.interval.high
        status = PASS if -margin <= low and high <= margin else FAIL if low > margin or high < -margin else INCONCLUSIVE
        return ClaimResult(**common, status=status, detail=f"95% CI vs +-{margin:g}")
    low, high = oriented(difference.interval, sign)
    if test == "superior":
        status = PASS if low > 0 else FAIL if high <= 0 else INCONCLUSIVE
        return ClaimResult(**common, status=status, detail="95% CI vs 0 (better side)")
    status = PASS if low >= -margin else FAIL if high < -margin else INCONCLUSIVE
    return ClaimResult(**common, status=status, detail=f"95% CI vs -{margin:g} (worse side)")


def _ratio(results: RunResults, claim: Mapping[str, Any], variant: ContrastVariant, point: str, key: str) -> ClaimResult:
    _, treated, controlled = pair_values(
        results.values(variant.treatment_label, point, key), results.values(variant.control_label, point, key)
    )
    usable = controlled != 0
    if not usable.any():
        return _undecided(claim, variant.name, point, key, "no pair with a non-zero control value")
    ratios = treated[usable] / controlled[usable]
    interval = bootstrap_mean_interval(ratios)
    lower = -math.inf if claim.get("min") is None else float(claim["min"])
    upper = math.inf if claim.get("max") is None else float(claim["max"])
    common = dict(claim=claim, contrast=variant.name, point=point, key=key, n=int(ratios.size),
                  estimate=float(ratios.mean()), interval=interval)
    if interval.degenerate:
        return ClaimResult(**common, status=INCONCLUSIVE, detail="one pair: no confidence interval")
    if lower <= interval.low and interval.high <= upper:
        status = PASS
    elif interval.high < lower or interval.low > upper:
        status = FAIL
    else:
        status = INCONCLUSIVE
    return ClaimResult(**common, status=status, detail="95% CI of treatment/control ratio")


def _undecided(claim: Mapping[str, Any], contrast: str, point: str, key: str, detail: str) -> ClaimResult:
    return ClaimResult(claim, contrast, point, key, INCONCLUSIVE, 0, None, None, detail)


def _bound(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
