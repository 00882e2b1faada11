"""From stored trial results to decisions: paired contrasts, verdicts, claims, plots, report."""
from __future__ import annotations

from harness.analysis.report import RunAnalysis, RunReport, analyse, build_report, render_verdict_table
from harness.analysis.results import ResultsError, RunResults, load_results

__all__ = [
    "ResultsError",
    "RunAnalysis",
    "RunReport",
    "RunResults",
    "analyse",
    "build_report",
    "load_results",
    "render_verdict_table",
]
