"""A suite's primary claims and key contrasts as metrics and tags of its parent MLflow run.

MLflow's compare and chart views plot metrics, so each claim's numbers are metrics whose names
stay the same from run to run (a mechanism's effect can be charted across commits and machines):

- ``claim/<contrast>/<metric>[/<point>]/estimate``, ``.../ci_low``, ``.../ci_high`` (the paired
  difference treatment - control and its t interval; a ratio claim's mean ratio),
  ``.../p_value`` (one-sided, for the claim's pass hypothesis) and ``.../p_holm`` (Holm-adjusted);
- ``contrast/<contrast>/<metric>[/<point>]/estimate`` for every contrast on a key metric;
- the tag ``harness.claim/<contrast>/<metric>[/<point>]`` holds the claim's result (PASS, FAIL,
  INCONCLUSIVE, VACUOUS, INSUFFICIENT PAIRS; a premise that made it vacuous is named:
  ``VACUOUS (premise <name> not met: ...)``); whether it counts is ``harness.validity``.

MLflow keys allow letters, digits, ``_ - . /`` and spaces (and ``:``), so each part goes through
``mlflow_key``: ``@`` becomes ``_at_`` (``nmse@512`` -> ``nmse_at_512``), every other character
(``=`` and ``,`` of a sweep point such as ``bank_size=256``) becomes ``_``, and a ``/`` inside a
part becomes ``_`` too, so ``/`` only ever separates parts.

``tracking_tags`` adds what the statistics were (``harness.stats.*``: method, confidence, seeds,
the primary and secondary procedures) and the run's outcome (``harness.validity``,
``harness.claims``), so a run in the MLflow UI says how its verdicts were reached.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.analysis.decide.verdicts import INFO
from harness.analysis.stats.paired_stats import METHOD
from harness.tracking.mlflow_tracker import mlflow_key

if TYPE_CHECKING:
    from harness.analysis.decide.run_decisions import RunAnalysis

CLAIM_PREFIX = "claim"
CONTRAST_PREFIX = "contrast"
CLAIM_TAG_PREFIX = "harness.claim"


def metric_path(prefix: str, contrast: str, key: str, point: str) -> str:
    """``prefix/contrast/metric[/point]`` with each part made a valid MLflow key."""
    parts = [contrast, key, *([point] if point else [])]
    return "/".join([prefix, *(mlflow_key(part).replace("/", "_") for part in parts)])


def parent_metrics(analysis: RunAnalysis) -> dict[str, float]:
    """Every claim's estimate, interval and p-values, and every key contrast's estimate."""
    metrics: dict[str, float] = {}
    for claim in analysis.claims:
        base = metric_path(CLAIM_PREFIX, claim.contrast, claim.key, claim.point)
        interval = claim.interval
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
        }
        metrics.update({f"{base}/{name}": float(v) for name, v in values.items() if _finite(v)})
    results = analysis.results
    for row in analysis.rows:
        if row.verdict != INFO and results.is_key_metric(row.key) and _finite(row.difference.mean_difference):
            name = metric_path(CONTRAST_PREFIX, row.variant.name, row.key, row.point) + "/estimate"
            metrics[name] = float(row.difference.mean_difference)
    return metrics


def claim_tags(analysis: RunAnalysis) -> dict[str, str]:
    """Each claim's result, under a tag named like its metrics."""
    return {
        metric_path(CLAIM_TAG_PREFIX, claim.contrast, claim.key, claim.point): claim.result_text
        for claim in analysis.claims
    }


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
        **_design_tags(analysis),
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
