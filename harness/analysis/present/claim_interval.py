"""The one interval a claim is shown with, and its name, in every place a claim is reported.

A sequential design decides a claim on its repeated interval (the level its deciding look spent), which
is wider than the plain t interval at the same confidence; a fixed design reports the run's confidence
interval. Showing the plain interval beside a result the repeated one decided reads as a contradiction
(an interval wholly above 0 next to FUTILE), so the terminal, summary.md, summary.json, the forest plot,
MLflow and the published pages all take the interval and its name from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.decide.claims import ClaimResult
from harness.analysis.stats.number_format import fmt
from harness.analysis.stats.paired_stats import Interval


@dataclass(frozen=True)
class ShownInterval:
    """The claim's interval as every report shows it."""

    low: float
    high: float
    name: str  # "repeated 95%" for a sequential claim, "95%" otherwise

    def text(self, signed: bool = True) -> str:
        return f"[{fmt(self.low, signed)}, {fmt(self.high, signed)}]"


def interval_name(claim: ClaimResult, confidence: float) -> str:
    """'repeated 95%' for a claim of a sequential design, '95%' for a fixed one."""
    level = f"{100 * confidence:g}%"
    return f"repeated {level}" if is_repeated(claim) else level


def decided_interval(claim: ClaimResult) -> Interval | None:
    """The repeated interval of a sequential claim, the run's confidence interval of a fixed one (and of
    an exact claim, whose interval is its one value at every level)."""
    return claim.decision_interval if is_repeated(claim) else claim.interval


def is_repeated(claim: ClaimResult) -> bool:
    """Whether the claim is shown with its repeated interval."""
    return claim.sequential and claim.decision_interval is not None


def shown_interval(claim: ClaimResult, confidence: float) -> ShownInterval | None:
    """The interval the claim was decided on, named; None when it has none (too few pairs)."""
    interval = decided_interval(claim)
    if interval is None:
        return None
    return ShownInterval(interval.low, interval.high, interval_name(claim, confidence))


def interval_names(claims: list[ClaimResult], confidence: float) -> str:
    """The names of the intervals a set of claims is shown with, once each ('95%', 'repeated 95%'); an
    exact claim's single value reads the same under any name, so it adds none unless it is alone."""
    spread = [claim for claim in claims if has_spread(claim)]
    return " and ".join(dict.fromkeys(interval_name(claim, confidence) for claim in spread or claims))


def has_spread(claim: ClaimResult) -> bool:
    """Whether the claim's interval is more than one value (an exact claim's is one value under any name)."""
    interval = decided_interval(claim)
    return interval is not None and interval.low != interval.high
