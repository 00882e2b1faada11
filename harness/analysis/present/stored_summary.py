"""``report/summary.json`` as a typed document (``RunSummary``): what a run decided, written by
``summary_json.run_summary`` and read back (from a results folder or a sealed bundle) by the evidence audit,
the seal and the programme, which read its fields instead of indexing the JSON. The keys they read are typed;
every other key is kept as written (``stored_rest``), so a summary reads back to the same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from harness.core.stored_fields import (
    COUNT,
    NUMBER,
    STRING,
    TEXT,
    Schema,
    document,
    list_of,
    optional,
    stored,
    stored_rest,
)

FIGURE = optional(NUMBER)  # an estimate, an interval end or a p-value: null where there is none


@dataclass(frozen=True)
class ValiditySummary:
    """The run's validity check: its status (VALID, INVALID, ...) and how it was reached."""

    status: str = stored(TEXT)
    rest: Mapping[str, Any] = stored_rest()


@dataclass(frozen=True)
class ClaimSummary:
    """One claim at one point: its verdict (``result``) and the figures that decided it."""

    variant: str = stored(TEXT)  # the contrast it compares
    key: str = stored(TEXT)  # the metric key
    point: str = stored(STRING)  # the sweep point
    result: str = stored(TEXT)
    estimate: float | None = stored(FIGURE)
    ci_low: float | None = stored(FIGURE)
    ci_high: float | None = stored(FIGURE)
    p_value: float | None = stored(FIGURE)
    p_holm: float | None = stored(FIGURE)  # None outside the Holm family
    look: int = stored(COUNT)  # the look that decided it (1 for a fixed design)
    test: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)  # the claim test
    rest: Mapping[str, Any] = stored_rest()


@dataclass(frozen=True)
class PremiseSummary:
    """One premise at one point on one arm or contrast (``subject``), with its status and figures."""

    name: str = stored(TEXT)
    subject: str = stored(TEXT)
    key: str = stored(TEXT)
    point: str = stored(STRING)
    status: str = stored(TEXT)
    estimate: float | None = stored(FIGURE)
    low: float | None = stored(FIGURE)
    high: float | None = stored(FIGURE)
    rest: Mapping[str, Any] = stored_rest()


@dataclass(frozen=True)
class ContrastSummary:
    """One contrast row (a secondary, per-row verdict) with its per-seed differences."""

    contrast: str = stored(TEXT)
    metric: str = stored(TEXT)
    point: str = stored(STRING)
    differences: tuple[float | None, ...] = stored(list_of(FIGURE))
    rest: Mapping[str, Any] = stored_rest()


@dataclass(frozen=True)
class RunSummary:
    """A run's ``report/summary.json``: the suite and profile it is of, validity, claims, premises and contrast
    rows (the rest of it, such as the arms' figures and the statistics used, kept as written)."""

    stored_schema = Schema(2)
    suite: str = stored(TEXT)
    profile: str = stored(TEXT)
    validity: ValiditySummary = stored(document(ValiditySummary))
    claims: tuple[ClaimSummary, ...] = stored(list_of(document(ClaimSummary)))
    premises: tuple[PremiseSummary, ...] = stored(list_of(document(PremiseSummary)))
    contrasts: tuple[ContrastSummary, ...] = stored(list_of(document(ContrastSummary)))
    rest: Mapping[str, Any] = stored_rest()

    def contrast_row(self, claim: ClaimSummary) -> ContrastSummary | None:
        """The contrast row of a claim's contrast, metric key and point (None where the summary has none)."""
        return next((row for row in self.contrasts if (row.contrast, row.metric, row.point) ==
                     (claim.variant, claim.key, claim.point)), None)
