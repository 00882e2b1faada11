"""Exploratory verdicts per contrast x metric x sweep point, and the validity of a suite.

A verdict reads the Student-t interval of the mean paired difference in the metric's direction:
entirely on the better side -> better; entirely on the worse side -> worse; inside the declared
margin -> equivalent; anything else -> inconclusive; fewer than two pairs -> insufficient pairs.
Each row is a test at the run's confidence level and nothing more: a suite prints many rows, so
every row also carries a Benjamini–Hochberg q-value over all directed rows of the run, and the
table is labelled exploratory. The pre-declared claims (``claims.py``) are the primary hypotheses.

A suite whose positive control surely does not beat the control on the declared end-to-end metric
(its interval lies on the worse side of 0, or at 0), or whose negative control beats it, cannot tell
mechanisms apart: it is INVALID and its claims do not count. A positive control whose interval still
reaches both sides leaves validity UNDETERMINED (more seeds can tell; a sequential design adds them),
and the claims do not count either, unless the design's futility rule (the one claims stop by) says
it cannot plausibly be shown to beat the control by ``max_seeds``: then the suite is INVALID, its
positive control too weak. The controls' intervals are read at the look's spent level
(``looks.py``): a sequential design reads validity at every look, and an unadjusted reading would
show a positive control that does nothing as beating its control far more often than the claim level.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from harness.analysis.decide.looks import power_by_last_look, spent_level
from harness.analysis.run_results import RunResults, metric_order
from harness.analysis.stats.number_format import fmt
from harness.analysis.stats.paired_stats import Interval, PairedDifference, benjamini_hochberg, paired_difference
from harness.core.metrics import Metric, better_sign, metric_family

BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
INSUFFICIENT = "insufficient pairs"
INFO = "info"

VALID, INVALID, UNDETERMINED, UNDECLARED = "valid", "invalid", "undetermined", "undeclared"


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
    spec: Metric
    difference: PairedDifference
    margin: float
    verdict: str
    q_value: float | None = None  # Benjamini–Hochberg over every directed row of the run


@dataclass(frozen=True)
class ValidityCheck:
    role: str  # "positive" or "negative"
    arm_label: str
    point: str
    difference: PairedDifference | None
    beats_control: bool | None  # None: too few pairs to tell
    ok: bool | None
    reason: str
    cannot_fail: bool = False  # a positive control at its metric's ceiling on every seed: it shows nothing
    too_weak: str = ""  # a positive control the design cannot plausibly show to beat the control: the figures


@dataclass(frozen=True)
class Validity:
    status: str  # valid / invalid / undetermined / undeclared
    metric: str
    control: str
    checks: tuple[ValidityCheck, ...]
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool | None:
        """True / False when decided; None when undeclared or undetermined."""
        return {VALID: True, INVALID: False}.get(self.status)

    @property
    def cannot_fail(self) -> tuple[ValidityCheck, ...]:
        """Positive controls that beat the control by construction (at the metric's ceiling, no spread)."""
        return tuple(check for check in self.checks if check.cannot_fail)

    @property
    def claims_count(self) -> bool:
        """Claims count only in a valid suite, or one that declares no controls."""
        return self.status in (VALID, UNDECLARED)


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
    """Better / worse / equivalent (within +-margin) / inconclusive / insufficient pairs, or info."""
    sign = better_sign(direction)
    if sign == 0:
        return INFO
    if difference.interval is None:
        return INSUFFICIENT
    low, high = oriented(difference.interval, sign)
    if low > 0:
        return BETTER
    if high < 0:
        return WORSE
    if -margin <= difference.interval.low and difference.interval.high <= margin:
        return EQUIVALENT
    return INCONCLUSIVE


def beats(interval: Interval | None, sign: int) -> bool | None:
    """Whole interval on the better side; None with too few pairs to say."""
    if interval is None:
        return None
    return sign != 0 and oriented(interval, sign)[0] > 0


def contrast_variants(results: RunResults) -> list[ContrastVariant]:
    """Every declared contrast expanded over the labels of its (possibly swept) arms."""
    variants = []
    for contrast in results.stored.contrasts:
        treatment, control, declared = contrast.treatment, contrast.control, contrast.label
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
                        margins=dict(contrast.margins),
                    )
                )
    return variants


def variants_named(variants: list[ContrastVariant], name: str) -> list[ContrastVariant]:
    """The variants a claim or premise naming ``name`` (a declared contrast or a variant) reads. The
    ``<treatment>-vs-<control>`` alias reads a named contrast only where no contrast bears ``name`` itself:
    a suite that names the same pair twice (a second test of it) reads each name's claims once."""
    named = [v for v in variants if name in (v.name, v.declared_name)]
    return named or [v for v in variants if name == f"{v.treatment_arm}-vs-{v.control_arm}"]


def compare(results: RunResults, treatment_label: str, control_label: str, point: str, key: str) -> PairedDifference | None:
    """Paired by seed within one sweep point; None when no seed finished on both sides."""
    return paired_difference(
        results.values(treatment_label, point, key),
        results.values(control_label, point, key),
        confidence=results.confidence,
        expected=results.seeds,
    )


def evaluate_contrasts(results: RunResults) -> list[ContrastRow]:
    """A row per contrast variant x sweep point x metric key both arms reported, with BH q-values."""
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
    tested = [i for i, row in enumerate(rows) if row.verdict not in (INFO, INSUFFICIENT)]
    q_values = benjamini_hochberg([rows[i].difference.estimate.p_value for i in tested])
    for i, q in zip(tested, q_values):
        rows[i] = replace(rows[i], q_value=q)
    return rows


def evaluate_validity(results: RunResults) -> Validity:
    """Positive control must beat the control at every point; the negative control must not."""
    section = results.stored.validity
    if section is None:
        return Validity(UNDECLARED, "", "", (), ())
    metric, control = section.metric, section.control
    sign = results.spec_for(metric).better_sign
    problems: list[str] = []
    if sign == 0:
        problems.append(f"validity metric {metric!r} has no direction (higher/lower), so nothing can beat anything")
    control_labels = results.arm_labels(control)
    if len(control_labels) != 1:
        problems.append(f"validity control {control!r} must have exactly one variant, found {control_labels}")
    checks: list[ValidityCheck] = []
    if not problems:
        level = spent_level(results)
        for role, arm in (("positive", section.positive), ("negative", section.negative)):
            if arm:
                checks.extend(_role_checks(results, role, arm, control_labels[0], metric, sign, level))
    problems.extend(check.reason for check in checks if check.ok is False)
    if problems:
        status = INVALID
    elif any(check.ok is None for check in checks):
        status = UNDETERMINED
    else:
        status = VALID
    return Validity(status, metric, control, tuple(checks), tuple(problems))


def _at_ceiling(results: RunResults, label: str, point: str, metric: str) -> bool:
    """Every seed's value sits at the metric's best possible value: a positive control that wins by
    construction (an oracle that ranks the answer first), so its win proves nothing about the testbed."""
    ceiling = results.spec_for(metric).ceiling
    values = list(results.values(label, point, metric).values())
    return ceiling is not None and len(values) >= 2 and all(v == ceiling for v in values)


def _role_checks(
    results: RunResults, role: str, arm: str, control_label: str, metric: str, sign: int, level: float
) -> list[ValidityCheck]:
    checks = []
    for label in results.arm_labels(arm):
        for point in results.point_labels():
            difference = compare(results, label, control_label, point, metric)
            where = f" at {point}" if point else ""
            if difference is None:
                reason = f"{role} control {label!r} has no finished pair with {control_label!r} on {metric}{where}"
                checks.append(ValidityCheck(role, label, point, None, None, False, reason))
                continue
            interval = None if difference.interval is None else difference.estimate.interval_at(level)
            won = beats(interval, sign)
            if won is None:
                ok = None
                outcome = f"cannot be shown to beat or not beat (n={difference.n}, insufficient pairs)"
            elif role == "positive" and not won and oriented(interval, sign)[1] > 0:
                weak = _too_weak(results, difference, interval, sign)
                if weak:
                    reason = f"positive control too weak: {label!r} over {control_label!r} on {metric}{where} {weak}"
                    checks.append(ValidityCheck(role, label, point, difference, won, False, reason, too_weak=weak))
                    continue
                ok = None  # not yet shown to beat, nor shown not to: more seeds can tell
                outcome = f"is not yet shown to beat (n={difference.n}, interval reaches the better side)"
            else:
                ok = won if role == "positive" else not won
                outcome = "beats" if won else "does not beat"
            reason = f"{role} control {label!r} {outcome} {control_label!r} on {metric}{where}"
            stuck = role == "positive" and _at_ceiling(results, label, point, metric)
            if stuck:
                reason += (f"; it cannot fail: {metric} is at its ceiling "
                           f"({results.spec_for(metric).ceiling:g}) on every seed, with no spread")
            checks.append(ValidityCheck(role, label, point, difference, won, ok, reason, stuck))
    return checks


def _too_weak(results: RunResults, difference: PairedDifference, interval: Interval, sign: int) -> str:
    """The figures of a positive control that cannot plausibly be shown to beat the control by the
    design's last look (conditional power below its futility threshold); '' while it still can."""
    estimate = difference.estimate
    p_beats = estimate.p_above(0.0) if sign > 0 else estimate.p_below(0.0)
    futility = None if p_beats is None else power_by_last_look(results, p_beats)
    if futility is None or not futility.futile:
        return ""
    return (f"{fmt(estimate.mean, signed=True)} [{fmt(interval.low, signed=True)}, {fmt(interval.high, signed=True)}] "
            f"at n={difference.n}, conditional power "
            f"{futility.power:.2f} < {futility.threshold:g} to beat it by {futility.max_seeds} seeds")
