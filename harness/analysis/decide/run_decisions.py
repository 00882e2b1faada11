"""Everything decided from one run's stored results, before anything is written: the contrast rows,
the validity of the suite and its primary claims."""
from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.decide.claims import ClaimResult, evaluate_claims, last_look_premises
from harness.analysis.decide.design_cost import DesignCost, design_cost
from harness.analysis.decide.fairness import UnequalBudget, unequal_budgets
from harness.analysis.decide.premises import PremiseResult
from harness.analysis.decide.verdicts import (
    ContrastRow,
    Validity,
    evaluate_contrasts,
    evaluate_validity,
)
from harness.analysis.run_results import RunResults


@dataclass(frozen=True)
class RunAnalysis:
    """Everything decided from one run's stored results, before anything is written."""

    results: RunResults
    rows: tuple[ContrastRow, ...]
    validity: Validity
    claims: tuple[ClaimResult, ...]
    cost: DesignCost | None = None  # sequential runs: seeds and time used against the fixed design
    premises: tuple[PremiseResult, ...] = ()
    unequal_budgets: tuple[UnequalBudget, ...] = ()  # arms of one seed trained for different budgets


def analyse(results: RunResults) -> RunAnalysis:
    premises = last_look_premises(results)
    claims = tuple(evaluate_claims(results, premises=premises))
    return RunAnalysis(
        results=results,
        rows=tuple(evaluate_contrasts(results)),
        validity=evaluate_validity(results),
        claims=claims,
        cost=design_cost(results, claims),
        premises=tuple(premises),
        unequal_budgets=tuple(unequal_budgets(results)),
    )
