"""What the gate compares, computed the same way from a baseline's run and from the run being gated:
arm means and paired differences over the declared seeds, speed ratios within a run, claim results,
the numeric environment. The identity of a value (check, subject, point, metric) names it in both."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.analysis.compare.claim_moves import ClaimEvidence, claim_evidence
from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.verdicts import ContrastVariant, contrast_variants
from harness.analysis.run_results import RunResults
from harness.analysis.stats.paired_stats import mean_estimate
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
)
from harness.suite.points import point_label, sweep_points

QUALITY, MEMORY, SPEED_RATIO, CONTRAST, CLAIM = "quality", "memory", "speed_ratio", "contrast", "claim"
CHECKS = (QUALITY, MEMORY, SPEED_RATIO, CONTRAST, CLAIM)
# trial environment keys that can change a float result on the same code and data: the CPU (and the
# vector width torch's kernels dispatch to), the intra-op threads (how reductions are split), the
# torch build and its kernels' determinism
NUMERIC_ENVIRONMENT = ("cpu_model", "cpu_capability", "torch_threads", "torch", "deterministic_algorithms",
                       "machine", "device_name", "numeric_mode")


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
                                           missing=None)
    spread: float | None = stored(optional(NON_NEGATIVE), missing=None)
    claim: ClaimEvidence | None = stored(Shape("a claim's result and evidence", _is_mapping, _claim_evidence),
                                         flat=True)

    @property
    def identity(self) -> Identity:
        return (self.check, self.subject, self.point, self.metric)

    def as_stored(self) -> dict[str, Any]:
        stored: dict[str, Any] = {"check": self.check, "subject": self.subject, "point": self.point,
                                  "metric": self.metric, "direction": self.direction, "value": self.value}
        if self.seeds is not None:
            stored["seeds"] = list(self.seeds)
        if self.check in (QUALITY, CONTRAST):
            stored["spread"] = self.spread
        if self.claim is not None:
            stored.update(result=self.claim.result, **self.claim.entry_fields())
        return stored


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
                check = MEMORY if spec.kind == "memory" else QUALITY if spec.kind == "quality" and spec.better_sign else None
                values = seed_values(results, label, point, key)
                if check and values:
                    spread = seed_spread(values.values()) if check == QUALITY else None
                    entries.append(_entry(check, label, point, key, spec.direction, seed_mean(values.values()), values,
                                          spread))
    for variant in _distinct_pairs(contrast_variants(results)):
        subject = f"{variant.treatment_label}-vs-{variant.control_label}"
        for point in results.point_labels():
            for key in results.metric_keys(variant.treatment_label, point):
                spec = results.spec_for(key)
                differences = paired_differences(results, variant.treatment_label, variant.control_label, point, key)
                if spec.kind == "quality" and spec.better_sign and differences:
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
                if spec.kind != "speed" or not spec.better_sign:
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


def numeric_environment(results: RunResults) -> dict[str, str]:
    """What, besides code and data, the run's float results depend on; where its trials disagree
    (a run resumed on another machine), each differing value is listed, joined by ' | '."""
    environments = [t.environment for t in results.finished]
    recorded: dict[str, str] = {}
    for key in NUMERIC_ENVIRONMENT:
        values = sorted({str(e[key]) for e in environments if key in e})
        if values:
            recorded[key] = " | ".join(values)
    return recorded


EXECUTOR_KEY = "executor"  # in each trial's environment, and in a baseline's environment since it was recorded


def executors_used(results: RunResults) -> dict[str, str]:
    """``{executor: names}``, the executors the run's finished trials ran under joined by ' | ' (nothing for a
    run made before they were recorded): saved with a baseline, so that the gate can tell whose code ran it."""
    names = sorted({t.environment[EXECUTOR_KEY] for t in results.finished if EXECUTOR_KEY in t.environment})
    return {EXECUTOR_KEY: " | ".join(names)} if names else {}


SEED_BATCH_SIZE_KEY = "seed_batch_size"  # in a baseline's environment: the seed-batch sizes its trials were trained in


def seed_batch_sizes(results: RunResults) -> dict[str, str]:
    """``{seed_batch_size: sizes}``, the sizes of the seed batches the run's finished trials were trained in (1:
    alone) joined by ' | ': batched kernels reduce in another order, so values of one size are not another's."""
    sizes = sorted({len(t.seed_batch) or 1 for t in results.finished})
    return {SEED_BATCH_SIZE_KEY: " | ".join(map(str, sizes))} if sizes else {}


def seed_mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)


def check_name(identity: Identity) -> str:
    check, subject, point, metric = identity
    return f"{check} {subject}{f' @ {point}' if point else ''} {metric}"
