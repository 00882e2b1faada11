"""`harness plan`: how many seeds each primary claim needs, before spending them.

Per claim, the fixed design's seeds for 80% power and the sequential design's power and expected
seeds, at the effect a pilot run showed (its standardized distance from the claim's pass bound,
t / sqrt(n)) or, without a pilot, at a ladder of standardized effects. Planning uses the level the
claim would face first under Holm in the run, alpha / (claims in its own Holm family: quality and
timing claims are tested apart): conservative by design. A design that declares a skewness bound is
planned at its calibrated critical values, the fixed design's as well as the sequential one's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from harness.analysis.claim_tests import claim_test
from harness.analysis.claim_tests.contract import QUALITY_FAMILY
from harness.analysis.decide.claims import ClaimResult, claim_alpha
from harness.analysis.stats.paired_stats import POWER
from harness.analysis.stats.sequential_design import (
    OperatingCharacteristics,
    Schedule,
    fixed_seeds_for_power,
    operating_characteristics,
)
from harness.core.metrics import Metric, metric_family

ASSUMED_EFFECTS = (0.5, 0.8, 1.2, 2.0)  # mean difference / sd of the paired differences


@dataclass(frozen=True)
class ClaimPlan:
    label: str  # contrast, metric, point and test of the claim, or the assumed effect
    effect_in_sd: float | None
    fixed_seeds: int | None  # for POWER at the planning level
    sequential: OperatingCharacteristics | None


@dataclass(frozen=True)
class SeedPlan:
    suite: str
    family_sizes: dict[str, int]  # sampled claims per Holm family (quality, timing)
    alpha: float  # the one-sided claim level before Holm
    design: Schedule
    source: str  # where the effects come from
    rows: tuple[ClaimPlan, ...]

    def render(self) -> str:
        d = self.design
        families = ", ".join(f"{family} {size} at one-sided {self.alpha / size:.4g}"
                             for family, size in sorted(self.family_sizes.items()))
        lines = [f"== {self.suite}: sampled claims per Holm family, each planned at the level the run's first Holm "
                 f"step tests it: {families or 'none'}; effects {self.source}",
                 f"sequential design: {d.spending}, looks at {', '.join(map(str, d.looks))} seeds"
                 + (f", {d.futility_phrase()}" if d.futility is not None else "")
                 + (f"; fixed and sequential alike at critical values calibrated to |skewness| <= {d.skew_bound:g}"
                    if d.skew_bound is not None else "")]
        header = f"{'claim':<58} {'effect/sd':>9} {'fixed n (80%)':>13} {'seq power':>9} {'seq E[n]':>8}"
        lines += [header, "-" * len(header)]
        for row in self.rows:
            effect = "-" if row.effect_in_sd is None else f"{row.effect_in_sd:.3g}"
            fixed = "-" if row.fixed_seeds is None else str(row.fixed_seeds)
            if row.fixed_seeds is None and row.effect_in_sd is not None and row.effect_in_sd > 0:
                fixed = ">1000"
            seq = row.sequential
            power = "-" if seq is None else f"{seq.power:.2f}"
            expected = "-" if seq is None else f"{seq.expected_seeds:.1f}"
            lines.append(f"{row.label[:58]:<58} {effect:>9} {fixed:>13} {power:>9} {expected:>8}")
        if any(row.sequential is None for row in self.rows):
            lines.append("-: the pilot's estimate is not on the claim's pass side (effect/sd <= 0) or gave no t, so no "
                         "seed count gives it 80% power")
        if any(row.fixed_seeds is None and row.sequential is not None for row in self.rows):
            lines.append(">1000: more seeds than planning tries")
        return "\n".join(lines)


def plan_suite(name: str, confidence: float, family_sizes: dict[str, int], design: Schedule,
               pilot: Sequence[ClaimResult] | None) -> SeedPlan:
    """The plan of one suite; ``pilot`` are the claim results of an earlier run of it."""
    alpha = claim_alpha(confidence)
    level = alpha / max(family_sizes.get(QUALITY_FAMILY) or next(iter(family_sizes.values()), 1), 1)  # the ladder's
    if pilot:
        rows = [_row(_label(c), c.test.effect_in_sd(c.p_value, c.n), alpha / max(family_sizes.get(c.family, 1), 1), design)
                for c in pilot if c.in_family]
        source = "from the pilot run"
    else:
        rows = [_row(f"any claim at effect/sd = {d:g}", d, level, design) for d in ASSUMED_EFFECTS]
        source = "assumed (give --from RESULTS for a pilot's)"
    return SeedPlan(name, dict(family_sizes), alpha, design, source, tuple(rows))


def family_sizes(claims: Sequence[dict[str, Any]], metrics: dict[str, Metric]) -> dict[str, int]:
    """How many claims each of the suite's Holm families will hold (the rules ``evaluate_claims`` applies:
    which claims are sampled, and timing claims in a family of their own)."""
    sizes: dict[str, int] = {}
    for claim in claims:
        spec = metrics.get(metric_family(claim["metric"])) or Metric.undeclared(claim["metric"])
        test = claim_test(claim["test"])
        if test.in_holm_family(spec):
            sizes[test.family(spec)] = sizes.get(test.family(spec), 0) + 1
    return sizes


def _row(label: str, effect: float | None, level: float, design: Schedule) -> ClaimPlan:
    if effect is None or effect <= 0:
        return ClaimPlan(label, effect, None, None)
    fixed = fixed_seeds_for_power(effect, level, POWER, skew_bound=design.skew_bound)
    return ClaimPlan(label, effect, fixed, operating_characteristics(design, effect, level, paths=4000))


def _label(claim: ClaimResult) -> str:
    point = f" @ {claim.point}" if claim.point else ""
    return f"{claim.contrast} {claim.key}{point} {claim.statement}"
