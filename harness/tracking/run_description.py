"""The suite run's description in MLflow (``mlflow.note.content``): the answer, at the top of its page.

MLflow renders a run's description as Markdown above its metrics, so a reader who opens the suite's run
sees first what the end-of-run summary says (validity, one row per primary claim with its estimate,
interval and result), which way each claim's metric is better, and the premises the claims rest on;
the metrics and tags below keep every figure for the chart and compare views.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from harness.analysis.present.markdown_tables import inline, plain, table
from harness.analysis.present.run_summary import SuiteSummary

if TYPE_CHECKING:
    from harness.analysis.decide.run_decisions import RunAnalysis

NOTE_CHARS = 8000  # MLflow cuts a run tag's value at this length
CUT_NOTE = "\n\n(cut to fit MLflow's description: every claim is in the run's tags and in report/verdicts.txt)\n"
PREMISE_HEADER = ("premise", "point", "on", "metric", "needs", "estimate", "status", "for")
_POLARITY = {1: "higher is better", -1: "lower is better"}


def run_description(analysis: RunAnalysis, wall_seconds: float | None = None) -> str:
    """The Markdown description of a suite's parent run."""
    parts = [SuiteSummary(analysis, wall_seconds).render().rstrip()]
    polarity = _polarity(analysis)
    if polarity:
        parts.append(polarity)
    if analysis.premises:
        rows = [[plain(p.name), inline(p.point or "-"), inline(p.subject), inline(p.key),
                 plain(p.requirement.removeprefix("needs ")), plain(p.figures), plain(p.status.upper()),
                 plain(", ".join(p.premise.claims or ["all claims"]))] for p in analysis.premises]
        parts.append("**Premises** (a claim whose premise is not met, or not yet established, is VACUOUS)\n\n"
                     + table(PREMISE_HEADER, rows))
    return fitted("\n\n".join(parts) + "\n")


def fitted(text: str, limit: int = NOTE_CHARS) -> str:
    """``text`` whole when it fits MLflow's tag, else its first whole lines and a note saying where the rest is."""
    if len(text) <= limit:
        return text
    kept = text[: limit - len(CUT_NOTE)].rsplit("\n", 1)[0]
    return kept + CUT_NOTE


def _polarity(analysis: RunAnalysis) -> str:
    """Which way each claimed metric is better, and what the estimate measures."""
    ways: dict[str, str] = {}
    for claim in analysis.claims:
        if claim.test.needs.ratio:
            ways.setdefault(claim.key, "a ratio treatment / control")
        else:
            ways.setdefault(claim.key, _POLARITY.get(claim.better_sign, "no better direction"))
    if not ways:
        return ""
    listed = "; ".join(f"{inline(key)}: {way}" for key, way in sorted(ways.items()))
    return f"**Polarity:** the estimate is treatment - control, the mean paired difference over seeds; {listed}."
