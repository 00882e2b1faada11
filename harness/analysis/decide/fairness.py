"""Fair-arm facts: whether the arms of one seed trained for the same budget, and how much of a
hard-bounded parameter sits at its bound.

Every trained arm reports its budget as ``budget/steps`` (and ``budget/examples`` or
``budget/tokens`` where meaningful) and, for a parameter clamped to a range, ``at_bound/<param>``:
the fraction of its entries at the bound, where it gets no gradient. An arm that trained fewer steps
than its control loses for a reason that is not its mechanism, so the report flags unequal budgets
within a seed even where no premise names them (a premise such as ``equal_budget`` makes the claims
depend on it). An arm that reports a budget of 0 did not train (a random or a constructed control):
it is not a trained arm, and its zero is not compared.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from harness.analysis.run_results import RunResults
from harness.analysis.stats.number_format import fmt

BUDGET_PREFIX = "budget/"
AT_BOUND_PREFIX = "at_bound/"


@dataclass(frozen=True)
class UnequalBudget:
    """One budget key at one sweep point whose arms differ within at least one seed."""

    key: str
    point: str
    seeds: tuple[int, ...]  # the seeds whose arms differ
    of_seeds: int  # seeds with the key reported by two arms or more
    example: Mapping[str, float]  # arm label -> value, at the first differing seed

    def text(self) -> str:
        where = f" at {self.point}" if self.point else ""
        values = ", ".join(f"{label} {fmt(value)}" for label, value in self.example.items())
        return (f"unequal {self.key}{where} within {len(self.seeds)} of {self.of_seeds} seed(s) "
                f"(seed {self.seeds[0]}: {values})")


def unequal_budgets(results: RunResults) -> list[UnequalBudget]:
    """Every budget key and point where arms of one seed did not get the same budget."""
    out: list[UnequalBudget] = []
    labels = results.arm_labels()
    for point in results.point_labels():
        for key in results.metric_keys(point=point):
            if not key.startswith(BUDGET_PREFIX):
                continue
            by_seed: dict[int, dict[str, float]] = {}
            for label in labels:
                for seed, value in results.values(label, point, key).items():
                    if value != 0:
                        by_seed.setdefault(seed, {})[label] = value
            compared = {seed: values for seed, values in sorted(by_seed.items()) if len(values) > 1}
            differing = [seed for seed, values in compared.items() if len(set(values.values())) > 1]
            if differing:
                out.append(UnequalBudget(key, point, tuple(differing), len(compared), compared[differing[0]]))
    return out
