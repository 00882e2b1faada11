"""A suite's primary claims and key contrasts as metrics and tags of its parent MLflow run.

MLflow's compare and chart views plot metrics, so each claim's numbers are metrics whose names
stay the same from run to run (a mechanism's effect can be charted across commits and machines):

- ``claim/<contrast>/<metric>[/<point>]/estimate``, ``.../ci_low``, ``.../ci_high`` (the paired
  difference treatment - control and its t interval; a ratio claim's mean ratio),
  ``.../p_value`` (one-sided, for the claim's pass hypothesis) and ``.../p_holm`` (Holm-adjusted);
- ``.../interval_low`` and ``.../interval_high``: the interval the claim was decided on, the one every
  report shows (a sequential claim's repeated interval), named by the tag ``harness.interval/<contrast>
  /<metric>[/<point>]`` ("repeated 95%" or "95%");
- ``contrast/<contrast>/<metric>[/<point>]/estimate`` for every contrast on a key metric;
- the tag ``harness.claim/<contrast>/<metric>[/<point>]`` holds the claim's result (PASS, FAIL,
  INCONCLUSIVE, VACUOUS, INSUFFICIENT PAIRS; a premise that made it vacuous is named:
  ``VACUOUS (premise <name> not met: ...)``); whether it counts is ``harness.validity``.

MLflow keys allow letters, digits, ``_ - . /`` and spaces (and ``:``), so each part goes through
``mlflow_key``: ``@`` becomes ``_at_`` (``nmse@512`` -> ``nmse_at_512``), every other character
(``=`` and ``,`` of a sweep point such as ``bank_size=256``) becomes ``_``, and a ``/`` inside a
part becomes ``_`` too, so ``/`` only ever separates parts.

MLflow draws a scalar metric as one bar, so an estimate and its bounds would be three unrelated bars.
Each claimed metric's claims are also one series: ``claims/<metric>/estimate``, ``.../ci_low`` and
``.../ci_high`` with one step per claim (contrast and point, in the suite's order, named by the tag
``harness.claims/<metric>/steps``), so a line chart of the three over steps is that metric's forest plot;
its bounds are the intervals the claims were decided on.

The parent run's name ends with the suite's answer (``for 1 · against 2 · not shown 3``, the tag
``harness.verdict``), so the runs table says it without opening a run.

``tracking_tags`` adds what the statistics were (``harness.stats.*``: method, confidence, seeds,
the primary and secondary procedures) and the run's outcome (``harness.validity``,
``harness.claims``), so a run in the MLflow UI says how its verdicts were reached, and the run's
description: the summary in Markdown (``run_description``), the first thing its page shows.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.analysis.decide.verdicts import INFO
from harness.analysis.present.claim_interval import decided_interval, shown_interval
from harness.analysis.present.run_summary import SuiteSummary, suite_verdict
from harness.analysis.stats.paired_stats import METHOD
from harness.tracking.mlflow_names import mlflow_key
from harness.tracking.mlflow_tracker import NOTE_TAG
from harness.tracking.run_description import run_description

if TYPE_CHECKING:
    from harness.analysis.decide.run_decisions import RunAnalysis

CLAIM_PREFIX = "claim"
CONTRAST_PREFIX = "contrast"
CLAIM_TAG_PREFIX = "harness.claim"
SERIES_PREFIX = "claims"
SERIES_TAG_PREFIX = "harness.claims"
INTERVAL_TAG_PREFIX = "harness.interval"
VERDICT_TAG = "harness.verdict"


def metric_path(prefix: str, contrast: str, key: str, point: str) -> str:
    """``prefix/contrast/metric[/point]`` with each part made a valid MLflow key."""
    parts = [contrast, key, *([point] if point else [])]
    return "/".join([prefix, *(mlflow_key(part).replace("/", "_") for part in parts)])


def parent_metrics(analysis: RunAnalysis) -> dict[str, float | list[float]]:
    """Every claim's estimate, interval and p-values, every key contrast's estimate, and each claimed
    metric's series (a list: one value per step)."""
    metrics: dict[str, float | list[float]] = {}
    confidence = analysis.results.confidence
    for claim in analysis.claims:
        base = metric_path(CLAIM_PREFIX, claim.contrast, claim.key, claim.point)
        interval = claim.interval
        shown = shown_interval(claim, confidence)
        values = {
            "estimate": claim.estimate,
            "ci_low": None if interval is None else interval.low,
            "ci_high": None if interval is None else interval.high,
            "p_value": claim.p_value,
            "p_holm": claim.p_adjusted,
            "seeds": float(claim.n),
            "look": float(claim.look) if claim.sequential else None,
            "repeated_ci_low": claim.decision_interval.low if claim.sequential and claim.decision_interval else None,
            "repeated_ci_high": claim.decision_interval.high if claim.sequential and claim.decision_interval else None,
            "interval_low": None if shown is None else shown.low,
            "interval_high": None if shown is None else shown.high,
        }
        metrics.update({f"{base}/{name}": float(v) for name, v in values.items() if _finite(v)})
    results = analysis.results
    for row in analysis.rows:
        if row.verdict != INFO and results.is_key_metric(row.key) and _finite(row.difference.mean_difference):
            name = metric_path(CONTRAST_PREFIX, row.variant.name, row.key, row.point) + "/estimate"
            metrics[name] = float(row.difference.mean_difference)
    for key, claims in _series_claims(analysis).items():
        base = f"{SERIES_PREFIX}/{mlflow_key(key).replace('/', '_')}"
        metrics[f"{base}/estimate"] = [float(c.estimate) for c in claims]
        shown = [shown_interval(c, confidence) for c in claims]
        metrics[f"{base}/ci_low"] = [float(s.low) for s in shown if s is not None]
        metrics[f"{base}/ci_high"] = [float(s.high) for s in shown if s is not None]
    return metrics


def _series_claims(analysis: RunAnalysis) -> dict[str, list]:
    """Per claimed metric, its claims with an estimate and a finite interval, in the suite's order (a
    claim without them would shift every later step)."""
    series: dict[str, list] = {}
    for claim in analysis.claims:
        interval = decided_interval(claim)
        if _finite(claim.estimate) and interval is not None and _finite(interval.low) and _finite(interval.high):
            series.setdefault(claim.key, []).append(claim)
    return series


def series_tags(analysis: RunAnalysis) -> dict[str, str]:
    """What each step of each claimed metric's series is: 'step: contrast point'."""
    return {
        f"{SERIES_TAG_PREFIX}/{mlflow_key(key).replace('/', '_')}/steps":
            "; ".join(f"{step}: {c.contrast}" + (f" {c.point}" if c.point else "") for step, c in enumerate(claims))
        for key, claims in _series_claims(analysis).items()
    }


def claim_tags(analysis: RunAnalysis) -> dict[str, str]:
    """Each claim's result, under a tag named like its metrics, and the name and figures of its interval."""
    tags = {}
    for claim in analysis.claims:
        tags[metric_path(CLAIM_TAG_PREFIX, claim.contrast, claim.key, claim.point)] = claim.result_text
        shown = shown_interval(claim, analysis.results.confidence)
        if shown is not None:
            tags[metric_path(INTERVAL_TAG_PREFIX, claim.contrast, claim.key, claim.point)] = \
                f"{shown.name} {shown.text(not claim.test.needs.ratio)}"
    return tags


def verdict_tag(analysis: RunAnalysis) -> str:
    """The suite's answer: 'for 1 · against 2 · not shown 3'."""
    return suite_verdict(SuiteSummary(analysis))


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def tracking_tags(analysis: RunAnalysis) -> dict[str, str]:
    """What the parent MLflow run says about the statistics and the outcome."""
    results = analysis.results
    outcomes: dict[str, int] = {}
    for claim in analysis.claims:
        outcomes[claim.status] = outcomes.get(claim.status, 0) + 1
    return {
        "harness.stats.method": METHOD,
        "harness.stats.confidence": f"{results.confidence:g}",
        "harness.stats.seeds": str(len(results.seeds)),
        "harness.stats.primary": "one-sided t, Holm across sampled claims (PASS and FAIL)",
        "harness.stats.secondary": "per-row t, Benjamini-Hochberg q",
        "harness.validity": analysis.validity.status,
        "harness.claims": ", ".join(f"{n} {status}" for status, n in sorted(outcomes.items())) or "none",
        VERDICT_TAG: verdict_tag(analysis),
        **_design_tags(analysis),
        **series_tags(analysis),
        NOTE_TAG: run_description(analysis),
    }


def _design_tags(analysis: RunAnalysis) -> dict[str, str]:
    """A sequential run's design and what it cost against the fixed design of the same power."""
    cost = analysis.cost
    if cost is None:
        return {"harness.design": "fixed"}
    tags = {
        "harness.design": f"sequential {cost.design.spending}, looks {','.join(map(str, cost.design.looks))}",
        "harness.design.seeds_used": str(cost.seeds_used),
        "harness.design.looks_taken": str(cost.looks),
    }
    if cost.fixed_seeds is not None:
        tags["harness.design.fixed_equivalent_seeds"] = str(cost.fixed_seeds)
    return tags
