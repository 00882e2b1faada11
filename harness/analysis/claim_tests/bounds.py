"""One-sided p-values of a mean against a bound, in 'better is positive' terms, with a deterministic
tie at the bound counted the way the claim's boundary reads it (strict or inclusive)."""
from __future__ import annotations

from harness.analysis.stats.paired_stats import MeanEstimate


def p_better(estimate: MeanEstimate, sign: int, bound: float, inclusive: bool = True) -> float:
    """One-sided p of H0: the oriented true mean <= bound (oriented: better is positive); a deterministic
    tie at the bound passes only when the bound is ``inclusive``."""
    if not inclusive:
        return p_strict(estimate, sign * bound, sign)
    return estimate.p_above(bound) if sign > 0 else estimate.p_below(-bound)


def p_worse(estimate: MeanEstimate, sign: int, bound: float, inclusive: bool = False) -> float:
    """One-sided p of H0: the oriented true mean >= bound (small when it is surely on the worse side); a
    deterministic tie at the bound fails only when ``inclusive`` (the pass side was strict)."""
    if inclusive:
        return estimate.p_below(bound) if sign > 0 else estimate.p_above(-bound)
    return p_strict(estimate, sign * bound, -sign)


def p_strict(estimate: MeanEstimate, bound: float, side: int) -> float:
    """One-sided p of H0: side * (mean - bound) <= 0, with a deterministic tie counted as not beyond."""
    if (estimate.standard_error or 0.0) == 0.0:
        return 0.0 if side * (estimate.mean - bound) > 0 else 1.0
    return estimate.p_above(bound) if side > 0 else estimate.p_below(bound)


def either_side(p_high: float, p_low: float) -> float:
    """p of 'surely outside [low, high]': either one-sided test, Bonferroni over the two sides, so the
    FAIL of a two-sided claim is held to the same level as every other claim's."""
    return min(1.0, 2.0 * min(p_high, p_low))
