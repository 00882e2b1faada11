"""What the gate compares, computed the same way from a baseline's run and from the run being gated:
arm means and paired differences over the declared seeds, speed ratios within a run, claim results,
the numeric environment. The identity of a value (check, subject, point, metric) names it in both.

Everything the gate does by kind of check is one row of ``CHECK_KINDS`` (at the end): the metrics it gates,
the directions its baseline entries may declare, what its entries store, whether it is a timing, how the
gated run measures a baseline entry, and how the two are judged. The gate, the baseline file and the
report read the row; none of them compares check names."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness.analysis.compare.claim_moves import SPREAD_Z, ClaimEvidence, claim_evidence, round_off, suite_tolerance
from harness.analysis.compare.claim_moves import judge as judge_claim_move
from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.verdicts import ContrastVariant, contrast_variants
from harness.analysis.run_results import RunResults
from harness.analysis.stats.paired_stats import mean_estimate
from harness.core.metrics import Metric, better_sign
from harness.core.trial_environment import NumericEnvironment, TrialEnvironment
from harness.core.stored_fields import (
    INTEGER,
    NON_NEGATIVE,
    NUMBER,
    STRING,
    TEXT,
    Shape,
    list_of,
    one_of,
    optional,
    read_keys,
    stored,
    stored_rest,
)
from harness.suite.points import point_label, sweep_points
from harness.suite.schema import GateSpec

QUALITY, MEMORY, SPEED_RATIO, CONTRAST, CLAIM = "quality", "memory", "speed_ratio", "contrast", "claim"
CHECKS = (QUALITY, MEMORY, SPEED_RATIO, CONTRAST, CLAIM)


class GateError(ValueError):
    """The gate cannot compare (missing, malformed or mismatched baseline): a usage error, not a regression."""


def _is_mapping(value: Any) -> bool:
    return isinstance(value, dict)


TrialKey = tuple[str, str, int]  # (arm label, point label, seed)
Identity = tuple[str, str, str, str]  # (check, subject, point, metric)


# a claim entry's result and evidence (``analysis.compare.claim_moves``), stored beside its value fields;
# a baseline saved before claims stored their evidence holds the result only
CLAIM_EVIDENCE = {"result": TEXT, "estimate": optional(NUMBER), "standard_error": optional(NON_NEGATIVE),
                  "boundary_t": optional(NON_NEGATIVE),
                  "bounds": list_of(NUMBER, "a list of finite numbers")}


def _claim_evidence(entry: Mapping[str, Any], where: str) -> ClaimEvidence | None:
    """A claim entry's evidence; None for an entry without a result (only a claim's has one)."""
    if "result" not in entry:
        return None
    return ClaimEvidence(**read_keys(CLAIM_EVIDENCE, entry, where, optional_keys=set(CLAIM_EVIDENCE) - {"result"}))


def _claim_fields(claim: ClaimEvidence | None) -> dict[str, Any]:
    """The keys a claim entry stores its result and evidence under (none for another entry)."""
    return {} if claim is None else {"result": claim.result, **claim.entry_fields()}


@dataclass(frozen=True)
class GatedValue:
    """One gated value, of a baseline or of the run being gated: what it is (``identity``), its
    direction, value and the seeds it averages; a quality mean's or a contrast's spread over seeds; a
    claim's result and evidence. Each field is its key in a baseline's entry (``stored``)."""

    check: str = stored(one_of(*CHECKS))
    subject: str = stored(TEXT)  # arm label, or "<treatment>-vs-<control>" for contrasts, speed ratios and claims
    point: str = stored(STRING, missing="")
    metric: str = stored(TEXT)
    direction: str = stored(one_of("higher", "lower", "none"))
    value: float = stored(Shape(NUMBER.expected, NUMBER.test, lambda value, where: float(value)))
    # None: a baseline entry saved without them (the baseline's seeds)
    seeds: tuple[int, ...] | None = stored(list_of(INTEGER, "a non-empty list of integers", non_empty=True),
                                           missing=None, omit_missing=True)
    # written for the check kinds that keep one (null below two seeds), and for no other
    spread: float | None = stored(optional(NON_NEGATIVE), missing=None,
                                  written_if=lambda entry: CHECK_KINDS[entry.check].spread)
    claim: ClaimEvidence | None = stored(Shape("a claim's result and evidence", _is_mapping, _claim_evidence,
                                               _claim_fields), flat=True)

    @property
    def identity(self) -> Identity:
        return (self.check, self.subject, self.point, self.metric)


def declared_seeds(results: RunResults) -> set[int] | None:
    return set(results.seeds) or None  # a folder without declared seeds: every stored seed counts


def seed_values(results: RunResults, label: str, point: str, key: str) -> dict[int, float]:
    """Finite values by seed, of the seeds the run declares (stale trials of other seeds aside)."""
    declared = declared_seeds(results)
    return {s: v for s, v in results.values(label, point, key).items() if declared is None or s in declared}


def _entry(check: str, subject: str, point: str, key: str, direction: str, value: float, seeds: Iterable[int],
           spread: float | None = None, claim: ClaimEvidence | None = None) -> GatedValue:
    return GatedValue(check, subject, point, key, direction, value, tuple(sorted(seeds)), spread, claim)


def seed_spread(values: Iterable[float]) -> float | None:
    """Standard error of the mean over seeds; None below two seeds (no spread measured)."""
    values = list(values)
    return mean_estimate(values).standard_error if values else None


def paired_differences(results: RunResults, treatment: str, control: str, point: str, key: str,
                 seeds: Iterable[int] | None = None) -> dict[int, float]:
    """Per-seed treatment - control over the seeds both have (of ``seeds`` when given)."""
    treated = seed_values(results, treatment, point, key)
    controlled = seed_values(results, control, point, key)
    wanted = None if seeds is None else set(seeds)
    return {s: treated[s] - controlled[s] for s in treated if s in controlled and (wanted is None or s in wanted)}


def speed_gated(results: RunResults) -> bool:
    """Whether this run's timings are gated: the profile asks for it and no trials ran concurrently."""
    return results.stored.gate.speed and not results.speed_under_load


def _distinct_pairs(variants: list[ContrastVariant]) -> list[ContrastVariant]:
    """One variant per treatment/control pair: a suite may name the same pair twice (one claim per contrast
    and metric, so a second test of the pair gets its own name), and the pair's values are the same."""
    seen: set[tuple[str, str]] = set()
    distinct = []
    for variant in variants:
        pair = (variant.treatment_label, variant.control_label)
        if pair not in seen:
            seen.add(pair)
            distinct.append(variant)
    return distinct


def baseline_values(results: RunResults) -> list[GatedValue]:
    """The gated values of a run: quality and memory means per arm, speed ratios per contrast,
    each with the seeds it averages (a seed without a finite value is not in it)."""
    entries: list[GatedValue] = []
    for label in results.arm_labels():
        for point in results.point_labels():
            for key in results.metric_keys(label, point):
                spec = results.spec_for(key)
                kind = next((k for k in CHECK_KINDS.values() if k.per_arm and k.gates(spec)), None)
                values = seed_values(results, label, point, key)
                if kind and values:
                    spread = seed_spread(values.values()) if kind.spread else None
                    entries.append(_entry(kind.name, label, point, key, spec.direction, seed_mean(values.values()),
                                          values, spread))
    for variant in _distinct_pairs(contrast_variants(results)):
        subject = f"{variant.treatment_label}-vs-{variant.control_label}"
        for point in results.point_labels():
            for key in results.metric_keys(variant.treatment_label, point):
                spec = results.spec_for(key)
                differences = paired_differences(results, variant.treatment_label, variant.control_label, point, key)
                if CHECK_KINDS[CONTRAST].gates(spec) and differences:
                    entries.append(_entry(CONTRAST, subject, point, key, spec.direction, seed_mean(differences.values()),
                                          differences, spread=seed_spread(differences.values())))
    for claim in evaluate_claims(results, include_speed=speed_gated(results)):
        estimate = claim.estimate if claim.estimate is not None and math.isfinite(claim.estimate) else 0.0
        evidence = claim_evidence(claim, results.spec_for(claim.key).better_sign)
        entries.append(_entry(CLAIM, claim.contrast, claim.point, claim.key, "none", estimate,
                              results.seeds or [], claim=evidence))
    if results.speed_under_load:  # timings of concurrent trials say nothing about the code
        return entries
    for variant in _distinct_pairs(contrast_variants(results)):
        for point in results.point_labels():
            for key in results.metric_keys(variant.treatment_label, point):
                spec = results.spec_for(key)
                if not CHECK_KINDS[SPEED_RATIO].gates(spec):
                    continue
                ratio, seeds = speed_ratio(results, variant.treatment_label, variant.control_label, point, key, None)
                if ratio is not None:
                    entries.append(_entry(SPEED_RATIO, f"{variant.treatment_label}-vs-{variant.control_label}", point,
                                          key, spec.direction, ratio, seeds))
    return entries


def speed_ratio(results: RunResults, treatment: str, control: str, point: str, key: str,
           seeds: list[int] | None) -> tuple[float | None, list[int]]:
    """Treatment mean / control mean over the seeds both have (of ``seeds`` when given)."""
    treated = seed_values(results, treatment, point, key)
    controlled = seed_values(results, control, point, key)
    common = sorted(s for s in treated if s in controlled and (seeds is None or s in seeds))
    if not common:
        return None, []
    denominator = seed_mean(controlled[s] for s in common)
    return (seed_mean(treated[s] for s in common) / denominator if denominator else None), common


def declared_trials(results: RunResults) -> list[TrialKey]:
    """Every trial the run's suite.json declares: arm label x sweep point x seed."""
    labels = results.stored.arm_labels()
    points = [point_label(p) for p in sweep_points(results.stored.sweep)]
    return [(label, point, seed) for seed in results.seeds for point in points for label in labels]


def trial_name(key: TrialKey) -> str:
    label, point, seed = key
    return f"{label} seed={seed}{f' @ {point}' if point else ''}"


def finished_keys(results: RunResults) -> set[TrialKey]:
    return {(t.arm_label, t.point_label, t.seed) for t in results.finished}


def trial_environments(results: RunResults) -> list[TrialEnvironment]:
    """Each finished trial's environment, typed."""
    return [TrialEnvironment.of(t.environment) for t in results.finished]


_JOINED = " | "  # between the values a run's trials recorded, where they differ (a run resumed on another machine)


def _joined(values: Iterable[str | None]) -> str | None:
    """The distinct values recorded, in order, as one text; None where none is."""
    recorded = sorted({value for value in values if value is not None})
    return _JOINED.join(recorded) if recorded else None


def sizes_text(sizes: Sequence[int]) -> str:
    """Seed-batch sizes as a baseline stores them (``1 | 3``), for a line that names them."""
    return _JOINED.join(map(str, sizes))


# the executors a run's trials ran under, and the sizes of the seed batches they were trained in, as a
# baseline stores them: each joined by _JOINED (any text splits and joins back to itself; sizes only as the
# harness writes them, so that they do too)
_EXECUTORS = Shape(f"executor names joined by {_JOINED!r}", lambda value: isinstance(value, str),
                   lambda value, where: tuple(value.split(_JOINED)), _JOINED.join)
_SIZES = Shape(f"sizes joined by {_JOINED!r} (e.g. '1 | 3')",
               lambda value: isinstance(value, str) and re.fullmatch(r"[1-9]\d*( \| [1-9]\d*)*", value) is not None,
               lambda value, where: tuple(int(size) for size in value.split(_JOINED)), sizes_text)


@dataclass(frozen=True)
class BaselineEnvironment(NumericEnvironment):
    """The environment a baseline's values were computed in (its ``environment``), formed the same way of
    the run the gate compares with it (``of_run``): each key of the numeric environment with the values its
    run's trials recorded, the executors they ran under (saved so that the gate can tell whose code ran it),
    the sizes of the seed batches they were trained in (1: alone; batched kernels reduce in another order, so
    values of one size are not another's), None where not recorded; and every other key as written."""

    executor: tuple[str, ...] | None = stored(_EXECUTORS, missing=None, omit_missing=True, default=None)
    seed_batch_size: tuple[int, ...] | None = stored(_SIZES, missing=None, omit_missing=True, default=None)
    rest: Mapping[str, str] = stored_rest()

    @classmethod
    def of_run(cls, results: RunResults) -> BaselineEnvironment:
        """The environment of the run's finished trials."""
        numeric = [NumericEnvironment.of(t.environment) for t in results.finished]
        executors = sorted({env.executor for env in trial_environments(results) if env.executor is not None})
        sizes = sorted({len(t.seed_batch) or 1 for t in results.finished})
        return cls(**{f.name: _joined(getattr(env, f.name) for env in numeric)
                      for f in dataclasses.fields(NumericEnvironment)},
                   executor=tuple(executors) or None, seed_batch_size=tuple(sizes) or None)


def seed_mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)


def check_name(identity: Identity) -> str:
    check, subject, point, metric = identity
    return f"{check} {subject}{f' @ {point}' if point else ''} {metric}"


# -- the check kinds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatedRun:
    """The run being gated, as a check kind measures it: its results, the (treatment, control) labels of each
    contrast subject ``<treatment>-vs-<control>``, and its claim entries by (subject, point, metric), evaluated
    once with its other values."""

    results: RunResults
    pairs: Mapping[str, tuple[str, str]]
    claims: Mapping[tuple[str, str, str], GatedValue]


@dataclass(frozen=True)
class Measured:
    """What the gated run holds of one baseline value: the arm labels whose trials it reads, those of the
    value's seeds it has, its value over them (None where none can be formed though the seeds are there),
    its spread over them and, for a claim, its evidence."""

    labels: tuple[str, ...]
    seeds: tuple[int, ...]
    value: float | None
    spread: float | None = None
    claim: ClaimEvidence | None = None


@dataclass(frozen=True)
class Judged:
    """A gated value against its baseline: whether it holds, the rule it was held to, and (a claim) whether a
    changed result lies near its decision boundary: a warning, not a regression."""

    passed: bool
    rule: str
    near_boundary: bool = False


def _never(results: RunResults, value: GatedValue) -> bool:
    return False


def _always(results: RunResults, value: GatedValue) -> bool:
    return True


@dataclass(frozen=True)
class CheckKind:
    """One kind of gated value: its row of ``CHECK_KINDS``."""

    name: str
    metric_kind: str | None  # the kind of metric whose values it gates (None: a claim, on any metric)
    directional: bool  # it gates only metrics with a better direction
    directions: tuple[str, ...]  # the directions a baseline entry of it may declare
    measure: Callable[[GatedRun, GatedValue, Sequence[int]], Measured | None]  # None: no such subject in the run
    judge: Callable[[GatedValue, Measured, GateSpec], Judged]
    per_arm: bool = False  # its subject is an arm label: a cell of the baseline run's trials
    spread: bool = False  # its entries store their standard error over seeds
    holds_claim: bool = False  # its entries hold a claim's result and evidence; its line states the rule alone
    timing: Callable[[RunResults, GatedValue], bool] = _never  # a timing: gated only where the run's speed is
    float_result: bool = True  # computed from float results: another machine's numeric environment may move it

    def gates(self, metric: Metric) -> bool:
        """Whether this kind gates values of ``metric``."""
        return metric.kind == self.metric_kind and (metric.better_sign != 0 or not self.directional)


def _arm_mean(run: GatedRun, entry: GatedValue, seeds: Sequence[int]) -> Measured:
    values = seed_values(run.results, entry.subject, entry.point, entry.metric)
    present = tuple(s for s in seeds if s in values)
    return Measured((entry.subject,), present, seed_mean(values[s] for s in present) if present else None,
                    seed_spread(values[s] for s in present))


def _contrast_mean(run: GatedRun, entry: GatedValue, seeds: Sequence[int]) -> Measured | None:
    labels = run.pairs.get(entry.subject)
    if labels is None:
        return None
    differences = paired_differences(run.results, labels[0], labels[1], entry.point, entry.metric, seeds)
    present = tuple(sorted(differences))
    return Measured(labels, present, seed_mean(differences.values()) if present else None,
                    seed_spread(differences.values()))


def _speed_ratio(run: GatedRun, entry: GatedValue, seeds: Sequence[int]) -> Measured | None:
    labels = run.pairs.get(entry.subject)
    if labels is None:
        return None
    value, present = speed_ratio(run.results, labels[0], labels[1], entry.point, entry.metric, list(seeds))
    return Measured(labels, tuple(present), value)


def _claim_now(run: GatedRun, entry: GatedValue, seeds: Sequence[int]) -> Measured | None:
    now = run.claims.get((entry.subject, entry.point, entry.metric))
    return None if now is None else Measured((), tuple(seeds), now.value, claim=now.claim)


def _equal(reference: GatedValue, current: Measured, tolerances: GateSpec) -> Judged:
    """Bytes and other deterministic sizes: exactly the baseline's."""
    return Judged(current.value == reference.value, "must be equal")


def _noise(reference: GatedValue, current: Measured, tolerances: GateSpec) -> tuple[float, str]:
    """How far a mean over seeds may move by chance, and why: SPREAD_Z standard errors of the difference between
    the baseline's mean and this run's, or the suite's tolerance where one seed measured no spread."""
    baseline_spread, current_spread = reference.spread, current.spread
    if baseline_spread is not None and current_spread is not None:
        # a floor for float round-off, where every seed gave the same value (zero spread)
        tolerance = max(SPREAD_Z * math.hypot(baseline_spread, current_spread), round_off(reference.value))
        return tolerance, f"{SPREAD_Z:g} standard errors over seeds"
    return (suite_tolerance(tolerances, reference.metric, tolerances.default_tolerance),
            "the suite's tolerance (one seed: no spread)")


def _mean(reference: GatedValue, current: Measured, tolerances: GateSpec, what: str = "mean") -> Judged:
    """A quality mean: it may worsen by its noise; an improvement always passes."""
    tolerance, source = _noise(reference, current, tolerances)
    sign, value = better_sign(reference.direction), reference.value
    passed = sign * (current.value - value) >= -tolerance
    return Judged(passed, f"{what}, {reference.direction} is better, may worsen by {tolerance:.3g} = {source}")


def _same_sign(a: float, b: float) -> bool:
    """Both above 0 or both below it (compared, not multiplied: a product of two tiny values underflows to 0)."""
    return (a > 0 and b > 0) or (a < 0 and b < 0)


def _difference(reference: GatedValue, current: Measured, tolerances: GateSpec) -> Judged:
    """A contrast's mean paired difference: a mean, unless the baseline is sure which arm is ahead. Then a
    change either way beyond the noise means the mechanism (or its control) now computes something else, and
    the sign must hold."""
    if not _direction_certain(reference.value, reference.spread):
        return _mean(reference, current, tolerances, "difference to control")
    tolerance, source = _noise(reference, current, tolerances)
    passed = abs(current.value - reference.value) <= tolerance and _same_sign(current.value, reference.value)
    return Judged(passed, f"difference to control, baseline sure of its sign: must keep it and move by at most "
                          f"{tolerance:.3g} either way = {source}")


def _direction_certain(value: float, spread: float | None) -> bool:
    """Whether a baseline difference is beyond its noise (SPREAD_Z standard errors, or any nonzero
    value when every seed agreed): one seed measures no spread and is never certain."""
    return spread is not None and value != 0 and abs(value) > SPREAD_Z * spread


def _ratio(reference: GatedValue, current: Measured, tolerances: GateSpec) -> Judged:
    """A speed ratio to the control: it may worsen by the suite's relative speed tolerance."""
    tolerance = suite_tolerance(tolerances, reference.metric, tolerances.speed_tolerance)
    value = reference.value
    # symmetric in log space: a higher-is-better ratio may shrink by (1 - tol), a lower one grow by 1 / (1 - tol)
    passed = current.value >= value * (1 - tolerance) if better_sign(reference.direction) > 0 \
        else current.value <= value / (1 - tolerance)
    return Judged(passed, f"ratio to control, {reference.direction} is better, may worsen by {tolerance:.0%}")


def _claim_moved(reference: GatedValue, current: Measured, tolerances: GateSpec) -> Judged:
    """A claim's evidence against the baseline's (``claim_moves``): a headline that flips far from its
    boundary, or an estimate that moves beyond its tolerance, is what CI exists to catch; a flip on the
    boundary is float or seed noise, reported as a warning. A baseline saved before claims stored their
    evidence compares results only. The suite's tolerance serves where a run measured no spread."""
    assert reference.claim is not None and current.claim is not None  # a claim entry always holds one
    move = judge_claim_move(reference.claim, current.claim,
                            suite_tolerance(tolerances, reference.metric, tolerances.default_tolerance))
    return Judged(not move.regression, move.rule, move.near_boundary)


def _on_speed_metric(results: RunResults, value: GatedValue) -> bool:
    """A claim on a speed metric: a timing (its Holm family is the timing one)."""
    return results.spec_for(value.metric).kind == "speed"


CHECK_KINDS: dict[str, CheckKind] = {kind.name: kind for kind in (
    CheckKind(QUALITY, "quality", True, ("higher", "lower"), _arm_mean, _mean, per_arm=True, spread=True),
    CheckKind(MEMORY, "memory", False, ("higher", "lower", "none"), _arm_mean, _equal, per_arm=True),
    CheckKind(SPEED_RATIO, "speed", True, ("higher", "lower"), _speed_ratio, _ratio, timing=_always,
              float_result=False),
    CheckKind(CONTRAST, "quality", True, ("higher", "lower"), _contrast_mean, _difference, spread=True),
    CheckKind(CLAIM, None, False, ("none",), _claim_now, _claim_moved, holds_claim=True, timing=_on_speed_metric),
)}
assert tuple(CHECK_KINDS) == CHECKS
