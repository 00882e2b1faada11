"""What each claim test needs from its claim in a suite file: the table the schema validates a claim
against, so that a suite file is checked without loading the analysis that runs the tests (each
test's class in harness/analysis/claim_tests/ names its row here)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a test reads a margin: NO_MARGIN takes none; OPTIONAL_MARGIN an absolute one that may be left out
# (the smallest gain worth having); REQUIRED_MARGIN exactly one of an absolute or a relative margin,
# and a reference contrast that shows the claim's control works in the run.
NO_MARGIN, OPTIONAL_MARGIN, REQUIRED_MARGIN = "none", "optional", "required"


@dataclass(frozen=True)
class Needs:
    """One test's row."""

    margin: Literal["none", "optional", "required"]
    bounds: bool = False  # needs 'min' and/or 'max' (the bounds of a ratio)
    ratio: bool = False  # reads per-pair treatment / control ratios instead of differences

    @property
    def reference(self) -> bool:
        """A required margin is read against a reference contrast (assay sensitivity)."""
        return self.margin == REQUIRED_MARGIN


CLAIM_TEST_NEEDS: dict[str, Needs] = {
    "superior": Needs(OPTIONAL_MARGIN),
    "non_inferior": Needs(REQUIRED_MARGIN),
    "equivalent": Needs(REQUIRED_MARGIN),
    "equal": Needs(NO_MARGIN),
    "ratio": Needs(NO_MARGIN, bounds=True, ratio=True),
}


def reads_ratios(test: object) -> bool:
    """Whether a test of this name (as a stored document writes it) reads ratios; False for an unknown name."""
    needs = CLAIM_TEST_NEEDS.get(test) if isinstance(test, str) else None
    return needs is not None and needs.ratio


def needs_problem(test: str, margin: float | None, relative_margin: float | None, reference: str | None,
                  low: float | None, high: float | None) -> str | None:
    """Why a claim of this (known) test does not give what the test needs, or None when it does."""
    needs = CLAIM_TEST_NEEDS[test]
    if needs.margin == OPTIONAL_MARGIN and (relative_margin is not None or reference):
        return (f"test {test!r} takes an absolute 'margin' only (better by more than it), "
                "no 'relative_margin' or 'reference'")
    if needs.margin == REQUIRED_MARGIN and (margin is None) == (relative_margin is None):
        return (f"test {test!r} needs exactly one of 'margin' (absolute, >= 0) or "
                "'relative_margin' (a fraction in (0, 1) of the reference effect)")
    if needs.margin == REQUIRED_MARGIN and not reference:
        return (f"test {test!r} needs a 'reference': a contrast whose treatment is this claim's control "
                "(e.g. raw-vs-none), showing the control works in this run; without it the claim passes "
                "even when neither arm works")
    if needs.margin == NO_MARGIN and (margin is not None or relative_margin is not None or reference):
        return f"test {test!r} takes no 'margin', 'relative_margin' or 'reference'"
    if needs.bounds and low is None and high is None:
        return f"test {test!r} needs 'min' and/or 'max'"
    return None
