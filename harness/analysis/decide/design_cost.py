"""What a sequential run saved: the seeds and trial time it used against the fixed design that has
the same power at the effects it observed (the comparison a reader needs to trust stopping early)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from harness.analysis.decide.claims import ClaimResult, run_design
from harness.analysis.run_results import RunResults
from harness.analysis.stats.sequential_design import Schedule, fixed_seeds_for_power, operating_characteristics


@dataclass(frozen=True)
class DesignCost:
    design: Schedule
    seeds_used: int
    looks: int
    fixed_seeds: int | None  # the fixed design with the sequential design's power at the observed effects
    trial_seconds: float  # wall time of every finished trial

    @property
    def fixed_trial_seconds(self) -> float | None:
        if self.fixed_seeds is None or not self.seeds_used:
            return None
        return self.trial_seconds / self.seeds_used * self.fixed_seeds

    def line(self) -> str:
        d = self.design
        futility = f", {d.futility_phrase()}" if d.futility is not None else ""
        plan = f"group-sequential design ({d.spending} spending, looks at {', '.join(map(str, d.looks))} seeds{futility})"
        used = f"used {self.seeds_used} of {d.max_seeds} seeds in {self.looks} look(s), {self.trial_seconds:.0f} s of trials"
        if self.fixed_seeds is None:
            return f"{plan}: {used}"
        return (f"{plan}: {used}; the fixed design with the same power at the observed effects needs "
                f"{self.fixed_seeds} seeds (~{self.fixed_trial_seconds:.0f} s)")


def design_cost(results: RunResults, claims: Sequence[ClaimResult]) -> DesignCost | None:
    """None for a fixed design."""
    design = run_design(results)
    if not design.sequential:
        return None
    needed = [n for n in (_fixed_equivalent(design, claim) for claim in claims if claim.in_family) if n is not None]
    seconds = sum(t.wall_seconds for t in results.finished)
    looks = sum(n <= len(results.seeds) for n in design.looks)
    return DesignCost(design, len(results.seeds), looks, max(needed) if needed else None, seconds)


def _fixed_equivalent(design: Schedule, claim: ClaimResult) -> int | None:
    """Seeds a fixed test at the claim's level needs for the power the design has at the claim's effect."""
    estimate = claim.mean_estimate
    if estimate is None or not estimate.sd or claim.level is None or claim.estimate is None:
        return None
    effect = abs(estimate.mean) / estimate.sd
    power = operating_characteristics(design, effect, claim.level, paths=4000).power
    if power <= claim.level:
        return None
    return fixed_seeds_for_power(effect, claim.level, power, skew_bound=design.skew_bound)
