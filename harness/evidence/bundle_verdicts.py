"""A bundle's verdicts: read from its sealed summary, and rebuilt from its trials by the report's own code.

The rebuild stores the bundle's ``suite.json`` and trial records in a scratch results folder through the
store and reads it back with ``load_results``, so the analysis sees exactly what ``harness report`` would
see in the run's folder. A verdict is named as the claim's MLflow metric is (``claim/<contrast>/<metric>
[/<point>]``), beside ``validity`` and each premise; it is its result with the figures behind it.
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from harness.analysis.decide.run_decisions import analyse
from harness.analysis.present.stored_summary import ClaimSummary, RunSummary
from harness.analysis.present.summary_json import run_summary
from harness.analysis.run_results import ResultsError, load_results
from harness.evidence.bundle import Bundle, BundleError
from harness.store import SUITE_FILE, RunFolder, write_json_atomic
from harness.core.terminal import format_value
from harness.tracking.claim_metrics import CLAIM_PREFIX, metric_path

VALIDITY = "validity"
PREMISE_PREFIX = "premise"
_RELATIVE = 1e-9  # figures agree to nine significant digits: libraries may differ in the last bit


@dataclass(frozen=True)
class Verdict:
    """One decision and the figures it rests on (None where it has none)."""

    result: str
    estimate: float | None = None
    low: float | None = None
    high: float | None = None

    def agrees(self, other: Verdict) -> bool:
        return self.result == other.result and all(
            _same(a, b) for a, b in ((self.estimate, other.estimate), (self.low, other.low), (self.high, other.high)))

    def text(self) -> str:
        if self.estimate is None:
            return self.result
        return f"{self.result} {format_value(self.estimate)} [{format_value(self.low)}, {format_value(self.high)}]"


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=_RELATIVE, abs_tol=1e-12)


def verdicts_of(summary: RunSummary) -> dict[str, Verdict]:
    """Validity, every claim and every premise of a run summary, by name."""
    found = {VALIDITY: Verdict(summary.validity.status)}
    for claim in summary.claims:
        found[claim_name(claim)] = claim_verdict(claim)
    for premise in summary.premises:
        name = metric_path(f"{PREMISE_PREFIX}/{premise.name}", premise.subject, premise.key, premise.point)
        found[name] = Verdict(premise.status, _number(premise.estimate), _number(premise.low), _number(premise.high))
    return found


def claim_name(claim: ClaimSummary) -> str:
    """How verdicts, the programme and MLflow name a claim at its point (``claim/<contrast>/<metric>[/point]``)."""
    return metric_path(CLAIM_PREFIX, claim.variant, claim.key, claim.point)


def claim_verdict(claim: ClaimSummary) -> Verdict:
    """A claim's verdict: its result, estimate and interval."""
    return Verdict(claim.result, _number(claim.estimate), _number(claim.ci_low), _number(claim.ci_high))


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


def rebuilt_summary(bundle: Bundle) -> RunSummary:
    """The run summary ``harness report`` computes from the bundle's suite.json and trials alone."""
    with tempfile.TemporaryDirectory(prefix="harness-evidence-") as scratch:
        folder = RunFolder(Path(scratch), bundle.suite, bundle.profile)
        write_json_atomic(folder.path / SUITE_FILE, bundle.suite_json)
        for record in bundle.trials:
            folder.save_trial(record)
        try:
            results = load_results(folder.path)
        except ResultsError as exc:
            raise BundleError(f"{bundle.path}: {exc}") from None
        return run_summary(analyse(results), [], [])


def differences(sealed: Mapping[str, Verdict], rebuilt: Mapping[str, Verdict]) -> list[str]:
    """'name: sealed X, rebuilt Y' for every verdict that is not the same in both."""
    found = []
    for name in sorted(set(sealed) | set(rebuilt)):
        before, after = sealed.get(name), rebuilt.get(name)
        if before is None or after is None or not before.agrees(after):
            found.append(f"{name}: sealed {before.text() if before else 'nothing'}, "
                         f"rebuilt {after.text() if after else 'nothing'}")
    return found
