"""``report/summary.json``: the run's decisions and every arm's figures, machine-readable, with the
statistics used."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Sequence

from harness.analysis.decide.claims import ClaimResult, claim_alpha
from harness.analysis.decide.premises import PremiseResult
from harness.analysis.decide.run_decisions import RunAnalysis
from harness.analysis.present.claim_interval import shown_interval
from harness.analysis.present.stored_summary import (
    ClaimSummary,
    ContrastSummary,
    PremiseSummary,
    RunSummary,
    ValiditySummary,
)
from harness.analysis.run_results import RunResults
from harness.analysis.stats.paired_stats import METHOD, MIN_PAIRS, POWER, Interval, PairedDifference, summarize
from harness.core.stored_fields import as_stored


def statistics_summary(confidence: float) -> dict[str, Any]:
    """How every number in the report was computed (summary.json and MLflow)."""
    return {
        "method": METHOD,
        "confidence": confidence,
        "min_pairs": MIN_PAIRS,
        "pairing": "seed within sweep point",
        "difference": "treatment - control",
        "interval": "Student-t interval of the mean paired difference",
        "check": "exact two-sided sign-flip permutation test (Monte Carlo beyond 16 pairs)",
        "primary": f"claims: one-sided t at {claim_alpha(confidence):g}, Holm across the suite's sampled claims for "
                   "PASS and FAIL alike (wrong-direction rate at most twice the level; claims of zero observed spread outside "
                   "the family, untested ones in it at p = 1; superiority strict, other bounds inclusive; two-sided FAILs "
                   "Bonferroni over their sides); premises checked first; non-inferiority/equivalence vacuous "
                   "unless their reference effect is established (relative margins: the fixed-margin method on the "
                   "reference's conservative bound); sequential designs: Lan-DeMets spending on the t statistic",
        "secondary": "contrast rows: per-row verdict at the confidence level; Benjamini-Hochberg q over directed rows",
        "power": POWER,
    }


def summary_document(analysis: RunAnalysis, plots: Sequence[str], forest: Sequence[str] = ()) -> dict[str, Any]:
    """The machine-readable report as written: ``run_summary`` stored."""
    return as_stored(run_summary(analysis, plots, forest))


def run_summary(analysis: RunAnalysis, plots: Sequence[str], forest: Sequence[str] = ()) -> RunSummary:
    """The machine-readable report: every contrast row (informational ones too), claims, arms."""
    results = analysis.results
    validity = analysis.validity
    counts = validity.claims_count
    return RunSummary(
        suite=results.suite,
        profile=results.profile,
        validity=ValiditySummary(status=validity.status, rest={
            "metric": validity.metric,
            "control": validity.control,
            "problems": list(validity.problems),
            "cannot_fail": [c.arm_label for c in validity.cannot_fail],
            "checks": [
                {"role": c.role, "arm": c.arm_label, "point": c.point, "beats_control": c.beats_control, "ok": c.ok,
                 "cannot_fail": c.cannot_fail,
                 "reason": c.reason, **(_difference_json(c.difference) if c.difference else {})}
                for c in validity.checks
            ],
        }),
        claims=tuple(_claim_summary(claim, results, counts) for claim in analysis.claims),
        premises=tuple(premise_summary(p) for p in analysis.premises),
        contrasts=tuple(
            ContrastSummary(contrast=row.variant.name, metric=row.key, point=row.point,
                            differences=tuple(row.difference.differences), rest={
                                "role": "secondary",
                                "declared_contrast": row.variant.declared_name,
                                "treatment": row.variant.treatment_label,
                                "control": row.variant.control_label,
                                "direction": row.spec.direction,
                                "kind": row.spec.kind,
                                "unit": row.spec.unit,
                                "margin": row.margin,
                                "verdict": row.verdict,
                                "q_value": row.q_value,
                                "counts": counts,
                                **_difference_json(row.difference, with_differences=False),
                            })
            for row in analysis.rows
        ),
        rest={
            "task": results.stored.task,
            "mechanism": results.stored.mechanism,
            # confirmatory: a registered design's seeds (the ledger id); exploratory: any other run
            "study": "exploratory" if results.stored.registration is None else "confirmatory",
            "registration": results.stored.registration,
            "device_class": results.device_class,
            "device_name": results.stored.device_name,
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seeds": results.seeds,
            **({"tuned": as_stored(results.stored.tuned)} if results.stored.tuned else {}),
            "sequential": None if analysis.cost is None else _cost_json(analysis),
            "statistics": statistics_summary(results.confidence),
            "valid": validity.valid,
            "unequal_budgets": [{"key": b.key, "point": b.point, "seeds": list(b.seeds), "of_seeds": b.of_seeds,
                                 "example": dict(b.example), "text": b.text()} for b in analysis.unequal_budgets],
            "failed_trials": [f.as_dict() for f in results.failed],
            "stale_trials": results.stale,
            "incomplete": bool(results.incomplete),  # the last run ended before every trial was stored
            "arms": _arm_summaries(results),
            "forest_plots": list(forest),
            "plots": list(plots),
        },
    )


def _claim_summary(claim: ClaimResult, results: RunResults, counts: Any) -> ClaimSummary:
    """One claim's entry: its declaration, its verdict and every figure that decided it."""
    spec = claim.claim.model_dump(exclude_none=True)
    interval = _interval_json(claim.interval)
    return ClaimSummary(
        variant=claim.contrast, key=claim.key, point=claim.point, result=claim.status, estimate=claim.estimate,
        ci_low=interval["ci_low"], ci_high=interval["ci_high"], p_value=claim.p_value, p_holm=claim.p_adjusted,
        look=claim.look, test=spec.pop("test", None),
        rest={
            **spec,
            "role": "primary",
            "result_text": claim.result_text,
            "polarity": claim.polarity(results.stored.mechanism) or None,  # for / against the mechanism
            "skewness": claim.skewness,
            "skew_blocked": claim.skew_blocked,  # t alone would decide; the sign-flip test at the bound does not
            "premise": None if claim.premise is None else premise_json(claim.premise),
            "n": claim.n,
            "dropped": claim.dropped,
            "p_fail": claim.p_fail,
            "in_holm_family": claim.in_family,
            "level": claim.level,
            "nominal_level": claim.nominal_level,
            "decision_interval": _interval_json(claim.decision_interval),
            "interval_shown": _shown_json(claim, results.confidence),  # the one every report shows
            "mde_80": claim.mde,
            "looks_planned": claim.looks,
            "boundary_t": _finite_or_none(claim.boundary_t),
            "reference_effect": None if claim.reference is None else {
                "contrast": claim.reference.contrast, "estimate": claim.reference.estimate, "n": claim.reference.n,
                **_interval_json(claim.reference.interval), "margin": claim.reference.margin,
                "established": claim.reference.established,
            },
            "detail": claim.detail,
            "identical_arms": claim.identical_arms,
            "counts": counts,
        },
    )


def premise_summary(premise: PremiseResult) -> PremiseSummary:
    """One premise at one point on one arm label or contrast variant, with the figures that decided it."""
    return PremiseSummary(
        name=premise.name, subject=premise.subject, key=premise.key, point=premise.point, status=premise.status,
        estimate=premise.estimate, low=premise.low, high=premise.high,
        rest={**premise.premise.model_dump(include={"arm", "contrast", "at_least", "at_most"}),
              "claims": premise.premise.claims, "n": premise.n, "exact": premise.exact, "text": premise.text()})


def premise_json(premise: PremiseResult) -> dict[str, Any]:
    """A premise's entry as written (beside its claim, too)."""
    return as_stored(premise_summary(premise))


def _arm_summaries(results: RunResults) -> dict[str, dict[str, dict[str, Any]]]:
    """Per arm label and point: n, mean, sd and the mean's t interval of every metric key."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label in results.arm_labels():
        for point in results.point_labels():
            metrics = {}
            for key in results.metric_keys(label, point):
                stats = summarize(list(results.values(label, point, key).values()), results.confidence)
                if stats is not None:
                    metrics[key] = {"n": stats.n, "mean": stats.mean, "sd": stats.sd,
                                    "ci_low": stats.interval.low, "ci_high": stats.interval.high}
            if metrics:
                out.setdefault(label, {})[point] = metrics
    return out


def _difference_json(difference: PairedDifference, with_differences: bool = True) -> dict[str, Any]:
    """A paired difference's figures; its per-seed ``differences`` left out where the entry types them."""
    estimate = difference.estimate
    return {
        "n": difference.n,
        "seeds": list(difference.pair_keys),
        "dropped": len(difference.dropped),
        "dropped_seeds": list(difference.dropped),
        "control_mean": difference.control_mean,
        "treatment_mean": difference.treatment_mean,
        **({"differences": list(difference.differences)} if with_differences else {}),
        "mean_difference": difference.mean_difference,
        "sd": estimate.sd,
        "relative_change": difference.relative_change,
        "method": METHOD,
        "confidence": estimate.confidence,
        **_interval_json(estimate.interval),
        "insufficient_pairs": estimate.insufficient,
        "p_value": estimate.p_value,
        "sign_flip_p": difference.sign_flip_p,
        "t_only": difference.t_only,
    }


def _shown_json(claim: ClaimResult, confidence: float) -> dict[str, Any] | None:
    """The interval every report shows for the claim and its name; ci_low and ci_high stay the plain t
    interval, which sealed summaries hold under those keys."""
    shown = shown_interval(claim, confidence)
    return None if shown is None else {"name": shown.name, "ci_low": shown.low, "ci_high": shown.high}


def _interval_json(interval: Interval | None) -> dict[str, float | None]:
    return {"ci_low": None if interval is None else interval.low, "ci_high": None if interval is None else interval.high}


def _cost_json(analysis: RunAnalysis) -> dict[str, Any]:
    cost = analysis.cost
    return {**cost.design.describe(), "looks_planned": list(cost.design.looks), "looks_taken": cost.looks,
            "seeds_used": cost.seeds_used, "trial_seconds": cost.trial_seconds, "fixed_design_seeds": cost.fixed_seeds,
            "fixed_design_trial_seconds": cost.fixed_trial_seconds}


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
