"""The looks a run's design takes, and the level each look reads a bound at.

Claims, premises and validity are all read again at every look of a sequential design. A premise or
a positive control read at the unadjusted claim level at every look "holds" by chance far more often
than that level (a premise exactly at its bound held in 10.6% of runs over looks 3-16, against 2.5%),
so every look reads them at the level the design's alpha spending gives that look: over all looks
together, the chance of a false hold is the claim level.
"""
from __future__ import annotations

from typing import NamedTuple

from harness.analysis.run_results import RunResults
from harness.analysis.stats.sequential_design import Schedule, conditional_power
from harness.suite.schema import StoredSequential


def claim_alpha(confidence: float) -> float:
    """One-sided level of every claim: the two-sided interval's tail."""
    return (1.0 - confidence) / 2.0


def run_design(results: RunResults) -> Schedule:
    """The schedule the run declared (suite.json ``sequential``), fixed at its seeds otherwise."""
    return stored_schedule(results.stored.sequential, len(results.seeds))


def stored_schedule(sequential: StoredSequential | None, seeds: int) -> Schedule:
    """The schedule of a suite.json's sequential design (read and checked with the suite); fixed at its
    ``seeds`` when it declares none."""
    if sequential is None:
        return Schedule(max(seeds, 1), max(seeds, 1))
    return Schedule.of(sequential.spec, sequential.first)


def looks_taken(results: RunResults, design: Schedule) -> tuple[int, ...]:
    """Seed counts of the looks the stored seeds reach (a fixed design: all its seeds at once)."""
    if not design.sequential:
        return (len(results.seeds),)
    taken = tuple(n for n in design.looks if n <= len(results.seeds))
    return taken or (len(results.seeds),)


def spent_level(results: RunResults) -> float:
    """The one-sided level at which the latest look reads premises and validity: the claim level for a
    fixed design, the look's nominal level under the design's spending for a sequential one (either
    calibrated to the design's skewness bound when it declares one)."""
    design = run_design(results)
    taken = looks_taken(results, design)
    return design.levels(design.looks if design.sequential else taken, claim_alpha(results.confidence))[len(taken) - 1]


class Futility(NamedTuple):
    power: float  # conditional power to reach the last look's level
    threshold: float  # the design's futility threshold
    max_seeds: int

    @property
    def futile(self) -> bool:
        return self.power < self.threshold


def power_by_last_look(results: RunResults, p_now: float) -> Futility | None:
    """Conditional power, under the current estimate, of a one-sided test now at ``p_now`` to reach the
    last look's level by ``max_seeds`` (the rule that stops a claim as futile); None where the latest
    look may not stop anything as futile (a fixed design, the last look, before ``futility_from``)."""
    design = run_design(results)
    taken = looks_taken(results, design)
    if not design.sequential or len(taken) >= len(design.looks) or not design.may_stop_futile(taken[-1]):
        return None
    final = design.levels(design.looks, claim_alpha(results.confidence))[-1]
    power = conditional_power(p_now, taken[-1] / design.max_seeds, final)
    return Futility(power, float(design.futility or 0.0), design.max_seeds)
