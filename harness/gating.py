"""Baselines and the CI gate: did this run regress against the committed reference?

What is compared, and how, follows what is stable across runs of the same code:
- quality metrics (with a direction): arm mean over seeds, allowed to worsen by at most the
  suite's tolerance (``gate.tolerances`` by key or family, else ``gate.default_tolerance``),
  absolute, in the metric's unit; improvements always pass;
- memory metrics (bytes and other deterministic sizes): exactly equal;
- speed metrics: never absolute (timings move with machine load), only as the ratio of a
  contrast's treatment mean to its control's mean measured in the same run, allowed to worsen by
  a relative tolerance (the suite's tolerance when it names the key or family, else the suite's
  ``gate.speed_tolerance``, else ``SPEED_RATIO_TOLERANCE``); a profile whose timings are too small
  to mean anything (smoke) sets ``gate.speed: false`` and its speed ratios are not gated; neither
  are those of a run whose trials ran concurrently (Ray), in the baseline or in the gated run.
A baseline belongs to one suite, profile and device class: gating across them is refused.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from harness.analysis.results import RunResults, load_results
from harness.analysis.verdicts import contrast_variants
from harness.store import read_json, write_json_atomic
from harness.tasks.base import metric_family

BASELINE_SCHEMA = 1
DEFAULT_BASELINES_DIR = Path("baselines")
SPEED_RATIO_TOLERANCE = 0.25
QUALITY, MEMORY, SPEED_RATIO = "quality", "memory", "speed_ratio"


class GateError(ValueError):
    """The gate cannot compare (missing or mismatched baseline): a usage error, not a regression."""


@dataclass(frozen=True)
class GateCheck:
    check: str
    subject: str  # arm label, or "<treatment>-vs-<control>" for speed ratios
    point: str
    metric: str
    baseline: float
    current: float
    passed: bool
    rule: str

    def describe(self) -> str:
        where = f" @ {self.point}" if self.point else ""
        return f"{self.check:<11} {self.subject}{where}  {self.metric}: {self.baseline:.6g} -> {self.current:.6g}  ({self.rule})"


@dataclass(frozen=True)
class GateResult:
    suite: str
    profile: str
    device_class: str
    baseline_path: Path
    checks: tuple[GateCheck, ...]
    missing_in_run: tuple[str, ...]
    missing_in_baseline: tuple[str, ...]
    failed_trials: tuple[str, ...]

    @property
    def regressions(self) -> tuple[GateCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def passed(self) -> bool:
        return not (self.regressions or self.missing_in_run or self.failed_trials)

    def render(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"gate {self.suite}/{self.profile}/{self.device_class} vs {self.baseline_path}: {verdict} "
            f"({len(self.checks) - len(self.regressions)} of {len(self.checks)} checks within tolerance)"
        ]
        lines += [f"  REGRESSION {c.describe()}" for c in self.regressions]
        lines += [f"  FAILED TRIAL {t}" for t in self.failed_trials]
        lines += [f"  MISSING in this run (present in the baseline): {m}" for m in self.missing_in_run]
        lines += [f"  not in the baseline (not gated; save a new baseline to include): {m}" for m in self.missing_in_baseline]
        return "\n".join(lines)


def baseline_filename(suite: str, profile: str, device_class: str) -> str:
    return f"{suite}-{profile}-{device_class}.json"


def baseline_values(results: RunResults) -> list[dict[str, Any]]:
    """The gated values of a run: quality and memory means per arm, speed ratios per contrast."""
    entries: list[dict[str, Any]] = []
    for label in results.arm_labels():
        for point in results.point_labels():
            for key in results.metric_keys(label, point):
                spec = results.spec_for(key)
                check = MEMORY if spec.kind == "memory" else QUALITY if spec.kind == "quality" and spec.better_sign else None
                mean = _mean(results, label, point, key)
                if check and mean is not None:
                    entries.append({"check": check, "subject": label, "point": point, "metric": key,
                                    "direction": spec.direction, "value": mean})
    if results.speed_under_load:  # timings of concurrent trials say nothing about the code
        return entries
    for variant in contrast_variants(results):
        for point in results.point_labels():
            for key in results.metric_keys(variant.treatment_label, point):
                spec = results.spec_for(key)
                if spec.kind != "speed" or not spec.better_sign:
                    continue
                treated = _mean(results, variant.treatment_label, point, key)
                controlled = _mean(results, variant.control_label, point, key)
                if treated is not None and controlled:
                    entries.append({"check": SPEED_RATIO, "subject": f"{variant.treatment_label}-vs-{variant.control_label}",
                                    "point": point, "metric": key, "direction": spec.direction,
                                    "value": treated / controlled})
    return entries


def make_baseline(results: RunResults) -> dict[str, Any]:
    environments = [t.get("environment") or {} for t in results.finished]
    return {
        "schema": BASELINE_SCHEMA,
        "suite": results.suite,
        "profile": results.profile,
        "device_class": results.device_class,
        "device_name": results.meta.get("device_name"),
        "task": results.meta.get("task"),
        "task_version": results.meta.get("task_version"),
        "seeds": results.meta.get("seeds"),
        "git_commit": next((e["git_commit"] for e in environments if e.get("git_commit")), None),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "values": baseline_values(results),
    }


def save_baseline(run_dir: Path, out_dir: Path = DEFAULT_BASELINES_DIR) -> Path:
    """Write ``<out_dir>/<suite>-<profile>-<device class>.json``; refused when trials failed."""
    results = load_results(run_dir)
    if results.failed:
        raise GateError(
            f"{results.run_dir}: {len(results.failed)} failed trial(s); a baseline must come from a complete run"
        )
    path = Path(out_dir) / baseline_filename(results.suite, results.profile, results.device_class)
    write_json_atomic(path, make_baseline(results))
    return path


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        baseline = read_json(path)
    except FileNotFoundError as exc:
        raise GateError(f"no baseline at {path}; create one with `harness baseline save RESULTS`") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise GateError(f"baseline {path} cannot be read ({exc})") from exc
    if not isinstance(baseline, dict) or baseline.get("schema") != BASELINE_SCHEMA or "values" not in baseline:
        raise GateError(f"{path} is not a harness baseline (schema {BASELINE_SCHEMA})")
    return baseline


def gate(run_dir: Path, baseline_path: Path | None = None, baselines_dir: Path = DEFAULT_BASELINES_DIR) -> GateResult:
    """Compare one run with its baseline (by default the matching file in ``baselines_dir``)."""
    results = load_results(run_dir)
    path = Path(baseline_path) if baseline_path else Path(baselines_dir) / baseline_filename(
        results.suite, results.profile, results.device_class
    )
    baseline = load_baseline(path)
    _refuse_mismatch(baseline, results, path)
    tolerances = results.meta.get("gate") or {}
    speed = tolerances.get("speed", True) and not results.speed_under_load
    gated = (QUALITY, MEMORY, SPEED_RATIO) if speed else (QUALITY, MEMORY)
    reference = {_identity(e): e for e in baseline["values"] if e["check"] in gated}
    current = {_identity(e): e for e in baseline_values(results) if e["check"] in gated}
    checks = tuple(
        _check(reference[key], current[key]["value"], tolerances) for key in reference if key in current
    )
    return GateResult(
        suite=results.suite,
        profile=results.profile,
        device_class=results.device_class,
        baseline_path=path,
        checks=checks,
        missing_in_run=tuple(_name(key) for key in reference if key not in current),
        missing_in_baseline=tuple(_name(key) for key in current if key not in reference),
        failed_trials=tuple(
            f"{f.arm_label} seed={f.seed}{f' {f.point_label}' if f.point_label else ''}: {f.error}" for f in results.failed
        ),
    )


def _refuse_mismatch(baseline: Mapping[str, Any], results: RunResults, path: Path) -> None:
    ours = {"suite": results.suite, "profile": results.profile, "device class": results.device_class}
    theirs = {
        "suite": baseline.get("suite"), "profile": baseline.get("profile"), "device class": baseline.get("device_class")
    }
    differing = [f"{k} {theirs[k]!r} vs {ours[k]!r}" for k in ours if theirs[k] != ours[k]]
    if differing:
        raise GateError(
            f"refusing to gate: baseline {path} is for another run ({', '.join(differing)} in these results); "
            "use the baseline of the same suite, profile and device class"
        )


def _check(reference: Mapping[str, Any], current: float, tolerances: Mapping[str, Any]) -> GateCheck:
    check, key, value = reference["check"], reference["metric"], float(reference["value"])
    sign = {"higher": 1, "lower": -1}.get(reference.get("direction", ""), 0)
    if check == MEMORY:
        passed, rule = current == value, "must be equal"
    elif check == QUALITY:
        tolerance = _tolerance(tolerances, key, float(tolerances.get("default_tolerance", 0.05)))
        passed = sign * (current - value) >= -tolerance
        rule = f"{reference['direction']} is better, may worsen by {tolerance:g}"
    else:
        tolerance = _tolerance(tolerances, key, float(tolerances.get("speed_tolerance", SPEED_RATIO_TOLERANCE)))
        # symmetric in log space: a higher-is-better ratio may shrink by (1 - tol), a lower one grow by 1 / (1 - tol)
        passed = current >= value * (1 - tolerance) if sign > 0 else current <= value / (1 - tolerance)
        rule = f"ratio to control, {reference['direction']} is better, may worsen by {tolerance:.0%}"
    return GateCheck(check, reference["subject"], reference["point"], key, value, current, passed, rule)


def _tolerance(tolerances: Mapping[str, Any], key: str, default: float) -> float:
    named = tolerances.get("tolerances") or {}
    if key in named:
        return float(named[key])
    return float(named.get(metric_family(key), default))


def _mean(results: RunResults, label: str, point: str, key: str) -> float | None:
    values = list(results.values(label, point, key).values())
    return sum(values) / len(values) if values else None


def _identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (entry["check"], entry["subject"], entry["point"], entry["metric"])


def _name(identity: tuple[str, str, str, str]) -> str:
    check, subject, point, metric = identity
    return f"{check} {subject}{f' @ {point}' if point else ''} {metric}"
