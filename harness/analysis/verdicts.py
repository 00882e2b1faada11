"""Verdicts per contrast x metric x sweep point, and the validity of a suite from its controls.

A verdict reads the bootstrap interval of the paired difference in the metric's direction:
entirely on the better side -> better; entirely on the worse side -> worse; inside the declared
margin -> equivalent; anything else -> inconclusive. A single pair gives no interval, so it is
always inconclusive. A suite whose positive control does not beat the control, or whose negative
control does, cannot tell mechanisms apart: all its verdicts are marked invalid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from harness.analysis.results import MetricSpec, RunResults, metric_order
from harness.analysis.stats import Interval, PairedDifference, paired_difference
from harness.tasks.base import metric_family

BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
INFO = "info"


@dataclass(frozen=True)
class ContrastVariant:
    """One treatment label against one control label (a swept arm gives one variant per label)."""

    name: str
    declared_name: str
    treatment_arm: str
    control_arm: str
    treatment_label: str
    control_label: str
    margins: Mapping[str, float]


@dataclass(frozen=True)
class ContrastRow:
    variant: ContrastVariant
    point: str
    key: str
    spec: MetricSpec
    difference: PairedDifference
    margin: float
    verdict: str


@dataclass(frozen=True)
class ValidityCheck:
    role: str  # "positive" or "negative"
    arm_label: str
    point: str
    difference: PairedDifference | None
    beats_control: bool
    ok: bool
    reason: str


@dataclass(frozen=True)
class Validity:
    """``valid`` is None when the suite declares no validity section."""

    valid: bool | None
    metric: str
    control: str
    checks: tuple[ValidityCheck, ...]
    problems: tuple[str, ...]


def oriented(interval: Interval, sign: int) -> tuple[float, float]:
    """The interval in 'better is positive' units."""
    if sign >= 0:
        return interval.low, interval.high
    return -interval.high, -interval.low


def margin_for(margins: Mapping[str, float], key: str) -> float:
    """The contrast's margin for a key: by exact key, then by family; 0 when none is declared."""
    if key in margins:
        return float(margins[key])
    return float(margins.get(metric_family(key), 0.0))


def verdict(difference: PairedDifference, direction: str, margin: float = 0.0) -> str:
    """Better / worse / equivalent (within +-margin) / inconclusive, or info without a direction."""
    sign = {"higher": 1, "lower": -1}.get(direction, 0)
    if sign == 0:
        return INFO
    if difference.interval.degenerate:
        return INCONCLUSIVE
    low, high = oriented(difference.interval, sign)
    if low > 0:
        return BETTER
    if high < 0:
        return WORSE
    if -margin <= difference.interval.low and difference.interval.high <= margin:
        return EQUIVALENT
    return INCONCLUSIVE


def beats(difference: PairedDifference, sign: int) -> bool:
    """Mean strictly better and, with two or more pairs, the whole interval on the better side."""
    if sign == 0 or sign * difference.mean_difference <= 0:
        return False
    return difference.interval.degenerate or oriented(difference.interval, sign)[0] > 0


def contrast_variants(results: RunResults) -> list[ContrastVariant]:
    """Every declared contrast expanded over the labels of its (possibly swept) arms."""
    variants = []
    for contrast in results.meta.get("contrasts") or []:
        treatment, control = contrast["treatment"], contrast["control"]
        declared = contrast.get("name") or f"{treatment}-vs-{control}"
        treatment_labels = results.arm_labels(treatment)
        control_labels = results.arm_labels(control)
        plain = treatment_labels == [treatment] and control_labels == [control]
        for treatment_label in treatment_labels:
            for control_label in control_labels:
                variants.append(
                    ContrastVariant(
                        name=declared if plain else f"{treatment_label}-vs-{control_label}",
                        declared_name=declared,
                        treatment_arm=treatment,
                        control_arm=control,
                        treatment_label=treatment_label,
                        control_label=control_label,
                        margins=dict(contrast.get("margins") or {}),
                    )
                )
    return variants


def compare(results: RunResults, treatment_label: str, control_label: str, point: str, key: str) -> PairedDifference | None:
    """Paired by seed within one sweep point; None when no seed finished on both sides."""
    return paired_difference(
        results.values(treatment_label, point, key), results.values(control_label, point, key)
    )


def evaluate_contrasts(results: RunResults) -> list[ContrastRow]:
    """A row per contrast variant x sweep point x metric key both arms reported."""
    rows = []
    for variant in contrast_variants(results):
        for point in results.point_labels():
            keys = set(results.metric_keys(variant.treatment_label, point)) & set(
                results.metric_keys(variant.control_label, point)
            )
            for key in sorted(keys, key=metric_order):
                difference = compare(results, variant.treatment_label, variant.control_label, point, key)
                if difference is None:
                    continue
                spec = results.spec_for(key)
                margin = margin_for(variant.margins, key)
                rows.append(
                    ContrastRow(variant, point, key, spec, difference, margin, verdict(difference, spec.direction, margin))
                )
    return rows


def evaluate_validity(results: RunResults) -> Validity:
    """Positive control must beat the control at every point; the negative control must not."""
    section: Mapping[str, Any] | None = results.meta.get("validity")
    if not section:
        return Validity(None, "", "", (), ())
    metric, control = section["metric"], section["control"]
    sign = results.spec_for(metric).better_sign
    problems: list[str] = []
    if sign == 0:
        problems.append(f"validity metric {metric!r} has no direction (higher/lower), so nothing can beat anything")
    control_labels = results.arm_labels(control)
    if len(control_labels) != 1:
        problems.append(f"validity control {control!r} must have exactly one variant, found {control_labels}")
    checks: list[ValidityCheck] = []
    if not problems:
        for role in ("positive", "negative"):
            arm = section.get(role)
            if arm:
                checks.extend(_role_checks(results, role, arm, control_labels[0], metric, sign))
    problems.extend(check.reason for check in checks if not check.ok)
    return Validity(not problems, metric, control, tuple(checks), tuple(problems))


def _role_checks(
    results: RunResults, role: str, arm: str, control_label: str, metric: str, sign: int
) -> list[ValidityCheck]:
    checks = []
    for label in results.arm_labels(arm):
        for point in results.point_labels():
            difference = compare(results, label, control_label, point, metric)
            where = f" at {point}" if point else ""
            if difference is None:
                reason = f"{role} control {label!r} has no finished pair with {control_label!r} on {metric}{where}"
                checks.append(ValidityCheck(role, label, point, None, False, False, reason))
                continue
            won = beats(difference, sign)
            ok = won if role == "positive" else not won
            reason = f"{role} control {label!r} {'beats' if won else 'does not beat'} {control_label!r} on {metric}{where}"
            checks.append(ValidityCheck(role, label, point, difference, won, ok, reason))
    return checks
