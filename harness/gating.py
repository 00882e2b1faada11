"""Baselines and the CI gate: did this run regress against the committed reference?

What is compared, and how, follows what is stable across runs of the same code:
- quality metrics (with a direction): arm mean over seeds, and each contrast's mean paired
  difference (treatment - control, the mechanism's own effect), each allowed to worsen by at most
  SPREAD_Z standard errors of the difference between the baseline's and this run's means, the
  standard errors measured over seeds and stored with the baseline; with one seed there is no
  spread, and the suite's tolerance applies (``gate.tolerances`` by key or family, else
  ``gate.default_tolerance``), absolute, in the metric's unit; improvements always pass;
- claims: each claim's result (pass, fail, inconclusive, ...) must not change; a claim on a speed
  metric is gated only where speed is, and where it is not, speed claims also leave the Holm family
  of the claims the gate reads (else timing noise moves their adjusted p-values, and their results);
- memory metrics (bytes and other deterministic sizes): exactly equal;
- speed metrics: never absolute (timings move with machine load), only as the ratio of a
  contrast's treatment mean to its control's mean measured in the same run, allowed to worsen by
  a relative tolerance (the suite's tolerance when it names the key or family, else the suite's
  ``gate.speed_tolerance``, else ``SPEED_RATIO_TOLERANCE``); a profile whose timings are too small
  to mean anything (smoke) sets ``gate.speed: false`` and its speed ratios are not gated; neither
  are those of a run whose trials ran concurrently (Ray), in the baseline or in the gated run.
A baseline belongs to one suite, profile, device class, seed set and sweep: gating across them
is refused (exit 2), as is a baseline that is empty or malformed (an unknown check, a value that
is not a finite number). The gate cannot pass vacuously: comparing zero checks fails, and so does
a trial of the baseline missing from the run, a value missing, or a seed dropped from a value
because its metric is missing or NaN in this run; each is named in the output. A baseline is
saved only from a complete run (every declared trial finished) that holds something to gate.

Baselines travel between machines (saved on one CPU, gated on another), so each records the numeric
environment its values came from (``NUMERIC_ENVIRONMENT``: CPU model, the vector ISA torch dispatched
to, thread count, torch build, kernel determinism). When a check fails and that environment differs
from the run's, the gate names the differences as a possible cause instead of leaving a reader to
suspect the code.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.analysis.claims import evaluate_claims
from harness.analysis.results import RunResults, load_results
from harness.analysis.stats import mean_estimate
from harness.analysis.verdicts import contrast_variants
from harness.metrics import metric_family
from harness.store import clean_stray_tmp, read_json, write_json_atomic
from harness.suite.points import point_label, sweep_points

BASELINE_SCHEMA = 1
DEFAULT_BASELINES_DIR = Path("baselines")
SPEED_RATIO_TOLERANCE = 0.25
QUALITY, MEMORY, SPEED_RATIO, CONTRAST, CLAIM = "quality", "memory", "speed_ratio", "contrast", "claim"
SPREAD_Z = 3.0  # a worsening beyond 3 standard errors of the difference of two means is not seed noise
# trial environment keys that can change a float result on the same code and data: the CPU (and the
# vector width torch's kernels dispatch to), the intra-op threads (how reductions are split), the
# torch build and its kernels' determinism
NUMERIC_ENVIRONMENT = ("cpu_model", "cpu_capability", "torch_threads", "torch", "deterministic_algorithms",
                       "machine", "device_name")


class GateError(ValueError):
    """The gate cannot compare (missing, malformed or mismatched baseline): a usage error, not a regression."""


CHECKS = (QUALITY, MEMORY, SPEED_RATIO, CONTRAST, CLAIM)
DIRECTIONS = {QUALITY: ("higher", "lower"), SPEED_RATIO: ("higher", "lower"), MEMORY: ("higher", "lower", "none"),
              CONTRAST: ("higher", "lower"), CLAIM: ("none",)}
TrialKey = tuple[str, str, int]  # (arm label, point label, seed)


@dataclass(frozen=True)
class GateCheck:
    check: str
    subject: str  # arm label, or "<treatment>-vs-<control>" for contrasts, speed ratios and claims
    point: str
    metric: str
    baseline: float
    current: float
    passed: bool
    rule: str

    def describe(self) -> str:
        where = f" @ {self.point}" if self.point else ""
        if self.check == CLAIM:
            return f"{self.check:<11} {self.subject}{where}  {self.metric}: {self.rule}"
        return f"{self.check:<11} {self.subject}{where}  {self.metric}: {self.baseline:.6g} -> {self.current:.6g}  ({self.rule})"


@dataclass(frozen=True)
class GateResult:
    """One run against its baseline. It passes only when something was compared and nothing the
    baseline holds went missing: every trial, every value, every seed of every value."""

    suite: str
    profile: str
    device_class: str
    baseline_path: Path
    checks: tuple[GateCheck, ...]
    missing_in_run: tuple[str, ...]
    missing_in_baseline: tuple[str, ...]
    failed_trials: tuple[str, ...]
    missing_trials: tuple[str, ...] = ()
    dropped_seeds: tuple[str, ...] = ()
    environment_differences: tuple[str, ...] = ()  # numeric environment, baseline vs this run

    @property
    def regressions(self) -> tuple[GateCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and not (
            self.regressions or self.missing_in_run or self.failed_trials or self.missing_trials or self.dropped_seeds
        )

    def render(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"gate {self.suite}/{self.profile}/{self.device_class} vs {self.baseline_path}: {verdict} "
            f"({len(self.checks) - len(self.regressions)} of {len(self.checks)} checks within tolerance)"
        ]
        if not self.checks:
            lines.append("  NO CHECKS: nothing in this run could be compared with the baseline; a gate that compares "
                         "nothing fails")
        lines += [f"  REGRESSION {c.describe()}" for c in self.regressions]
        lines += [f"  FAILED TRIAL {t}" for t in self.failed_trials]
        lines += [f"  MISSING TRIAL (in the baseline, not in this run): {t}" for t in self.missing_trials]
        lines += [f"  MISSING in this run (present in the baseline): {m}" for m in self.missing_in_run]
        lines += [f"  DROPPED SEED (no finite value in this run; not compared): {d}" for d in self.dropped_seeds]
        lines += [f"  not in the baseline (not gated; save a new baseline to include): {m}" for m in self.missing_in_baseline]
        if self.environment_differences:
            differences = "; ".join(self.environment_differences)
            if any(c.check != SPEED_RATIO for c in self.regressions):
                lines.append(f"  POSSIBLE CAUSE: the baseline was saved on another machine ({differences}); float "
                             "results can change with the CPU's vector ISA, the thread count or the torch build. "
                             "Rerun with the baseline's thread count (--threads) or save a baseline on this machine "
                             "kind before suspecting the code")
            else:
                lines.append(f"  note: baseline from another machine ({differences}); its values held here")
        return "\n".join(lines)


def baseline_filename(suite: str, profile: str, device_class: str) -> str:
    return f"{suite}-{profile}-{device_class}.json"


def _declared_seeds(results: RunResults) -> set[int] | None:
    return set(results.seeds) or None  # a folder without declared seeds: every stored seed counts


def _seed_values(results: RunResults, label: str, point: str, key: str) -> dict[int, float]:
    """Finite values by seed, of the seeds the run declares (stale trials of other seeds aside)."""
    declared = _declared_seeds(results)
    return {s: v for s, v in results.values(label, point, key).items() if declared is None or s in declared}


def _entry(check: str, subject: str, point: str, key: str, direction: str, value: float, seeds,
           **extra: Any) -> dict[str, Any]:
    return {"check": check, "subject": subject, "point": point, "metric": key, "direction": direction,
            "value": value, "seeds": sorted(seeds), **extra}


def _spread(values: Iterable[float]) -> float | None:
    """Standard error of the mean over seeds; None below two seeds (no spread measured)."""
    values = list(values)
    return mean_estimate(values).standard_error if values else None


def _differences(results: RunResults, treatment: str, control: str, point: str, key: str,
                 seeds: Iterable[int] | None = None) -> dict[int, float]:
    """Per-seed treatment - control over the seeds both have (of ``seeds`` when given)."""
    treated = _seed_values(results, treatment, point, key)
    controlled = _seed_values(results, control, point, key)
    wanted = None if seeds is None else set(seeds)
    return {s: treated[s] - controlled[s] for s in treated if s in controlled and (wanted is None or s in wanted)}


def speed_gated(results: RunResults) -> bool:
    """Whether this run's timings are gated: the profile asks for it and no trials ran concurrently."""
    return bool((results.meta.get("gate") or {}).get("speed", True)) and not results.speed_under_load


def baseline_values(results: RunResults) -> list[dict[str, Any]]:
    """The gated values of a run: quality and memory means per arm, speed ratios per contrast,
    each with the seeds it averages (a seed without a finite value is not in it)."""
    entries: list[dict[str, Any]] = []
    for label in results.arm_labels():
        for point in results.point_labels():
            for key in results.metric_keys(label, point):
                spec = results.spec_for(key)
                check = MEMORY if spec.kind == "memory" else QUALITY if spec.kind == "quality" and spec.better_sign else None
                values = _seed_values(results, label, point, key)
                if check and values:
                    extra = {"spread": _spread(values.values())} if check == QUALITY else {}
                    entries.append(_entry(check, label, point, key, spec.direction, _mean(values.values()), values,
                                          **extra))
    for variant in contrast_variants(results):
        subject = f"{variant.treatment_label}-vs-{variant.control_label}"
        for point in results.point_labels():
            for key in results.metric_keys(variant.treatment_label, point):
                spec = results.spec_for(key)
                differences = _differences(results, variant.treatment_label, variant.control_label, point, key)
                if spec.kind == "quality" and spec.better_sign and differences:
                    entries.append(_entry(CONTRAST, subject, point, key, spec.direction, _mean(differences.values()),
                                          differences, spread=_spread(differences.values())))
    for claim in evaluate_claims(results, include_speed=speed_gated(results)):
        estimate = claim.estimate if claim.estimate is not None and math.isfinite(claim.estimate) else 0.0
        entries.append(_entry(CLAIM, claim.contrast, claim.point, claim.key, "none", estimate,
                              results.seeds or [], result=claim.status))
    if results.speed_under_load:  # timings of concurrent trials say nothing about the code
        return entries
    for variant in contrast_variants(results):
        for point in results.point_labels():
            for key in results.metric_keys(variant.treatment_label, point):
                spec = results.spec_for(key)
                if spec.kind != "speed" or not spec.better_sign:
                    continue
                ratio, seeds = _ratio(results, variant.treatment_label, variant.control_label, point, key, None)
                if ratio is not None:
                    entries.append(_entry(SPEED_RATIO, f"{variant.treatment_label}-vs-{variant.control_label}", point,
                                          key, spec.direction, ratio, seeds))
    return entries


def _ratio(results: RunResults, treatment: str, control: str, point: str, key: str,
           seeds: list[int] | None) -> tuple[float | None, list[int]]:
    """Treatment mean / control mean over the seeds both have (of ``seeds`` when given)."""
    treated = _seed_values(results, treatment, point, key)
    controlled = _seed_values(results, control, point, key)
    common = sorted(s for s in treated if s in controlled and (seeds is None or s in seeds))
    if not common:
        return None, []
    denominator = _mean(controlled[s] for s in common)
    return (_mean(treated[s] for s in common) / denominator if denominator else None), common


def declared_trials(results: RunResults) -> list[TrialKey]:
    """Every trial the run's suite.json declares: arm label x sweep point x seed."""
    labels: list[str] = []
    for name, entry in (results.meta.get("arms") or {}).items():
        labels.extend((entry or {}).get("labels") or [name])
    points = [point_label(p) for p in sweep_points(results.meta.get("sweep") or {})]
    return [(label, point, seed) for seed in results.seeds for point in points for label in labels]


def _trial_name(key: TrialKey) -> str:
    label, point, seed = key
    return f"{label} seed={seed}{f' @ {point}' if point else ''}"


def _finished_keys(results: RunResults) -> set[TrialKey]:
    return {(t["arm_label"], t["point_label"], t["seed"]) for t in results.finished}


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
        "sweep": results.meta.get("sweep") or {},
        "trials": [{"arm": label, "point": point, "seed": seed} for label, point, seed in declared_trials(results)],
        "git_commit": next((e["git_commit"] for e in environments if e.get("git_commit")), None),
        "environment": numeric_environment(results),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "values": baseline_values(results),
    }


def numeric_environment(results: RunResults) -> dict[str, str]:
    """What, besides code and data, the run's float results depend on; where its trials disagree
    (a run resumed on another machine), each differing value is listed, joined by ' | '."""
    environments = [t.get("environment") or {} for t in results.finished]
    recorded: dict[str, str] = {}
    for key in NUMERIC_ENVIRONMENT:
        values = sorted({str(e[key]) for e in environments if key in e})
        if values:
            recorded[key] = " | ".join(values)
    return recorded


def environment_differences(baseline: Mapping[str, Any], results: RunResults) -> list[str]:
    """``key 'baseline' vs 'run'`` for each numeric-environment value both record and that differs."""
    theirs = baseline.get("environment")
    if not isinstance(theirs, dict):
        return []
    ours = numeric_environment(results)
    return [f"{key} {theirs[key]!r} vs {ours[key]!r}" for key in NUMERIC_ENVIRONMENT
            if key in theirs and key in ours and str(theirs[key]) != ours[key]]


STRAY_TMP_AGE_S = 60  # a temporary file older than this is no concurrent save's: a killed one left it


def save_baseline(run_dir: Path, out_dir: Path = DEFAULT_BASELINES_DIR) -> Path:
    """Write ``<out_dir>/<suite>-<profile>-<device class>.json``; refused unless the run is complete
    (every declared trial finished) and holds something to gate."""
    return save_baselines([run_dir], out_dir)[0]


def save_baselines(run_dirs: list[Path], out_dir: Path = DEFAULT_BASELINES_DIR) -> list[Path]:
    """Every run's baseline, all checked before the first file is replaced: one refused run leaves
    every baseline as it was. Temporary files of a save killed mid-write are removed first."""
    made = [_checked_baseline(run_dir) for run_dir in run_dirs]
    clean_stray_tmp(Path(out_dir), min_age=STRAY_TMP_AGE_S)
    paths = []
    for name, baseline in made:
        path = Path(out_dir) / name
        write_json_atomic(path, baseline)
        paths.append(path)
    return paths


def _checked_baseline(run_dir: Path) -> tuple[str, dict[str, Any]]:
    """(file name, baseline) of a complete run with something to gate, else GateError."""
    results = load_results(run_dir)
    if results.failed:
        raise GateError(
            f"{results.run_dir}: {len(results.failed)} failed trial(s); a baseline must come from a complete run"
        )
    if not results.finished:
        raise GateError(f"{results.run_dir}: no finished trials; a baseline must come from a complete run (run the suite first)")
    finished = _finished_keys(results)
    expected = declared_trials(results)
    missing = [key for key in expected if key not in finished]
    if not expected or missing:
        example = f" (first: {_trial_name(missing[0])})" if missing else ""
        raise GateError(
            f"{results.run_dir}: {len(missing)} of {len(expected)} declared trials have no result{example}; "
            "a baseline must come from a complete run (rerun the suite to finish them)"
        )
    baseline = make_baseline(results)
    if not baseline["values"]:
        raise GateError(f"{results.run_dir}: no quality, memory or speed-ratio values to gate; a baseline of nothing "
                        "would pass every run")
    return baseline_filename(results.suite, results.profile, results.device_class), baseline


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        baseline = read_json(path)
    except FileNotFoundError as exc:
        raise GateError(f"no baseline at {path}; create one with `harness baseline save RESULTS`") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GateError(f"baseline {path} cannot be read ({' '.join(str(exc).split())})") from exc
    if not isinstance(baseline, dict) or baseline.get("schema") != BASELINE_SCHEMA or "values" not in baseline:
        raise GateError(f"{path} is not a harness baseline (schema {BASELINE_SCHEMA})")
    problem = _baseline_problem(baseline)
    if problem:
        raise GateError(f"baseline {path} is malformed: {problem}; save it again with `harness baseline save RESULTS`")
    return baseline


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _baseline_problem(baseline: Mapping[str, Any]) -> str | None:
    """What is wrong with a loaded baseline (None when nothing is): every entry is checked, so a
    corrupt one is a usage error here instead of a crash or a silent pass later."""
    for key in ("suite", "profile", "device_class"):
        if not isinstance(baseline.get(key), str) or not baseline[key]:
            return f"{key!r} must be a non-empty string"
    seeds = baseline.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(_is_int(s) for s in seeds) or len(set(seeds)) != len(seeds):
        return f"'seeds' must be a non-empty list of distinct integers, not {seeds!r}"
    values = baseline["values"]
    if not isinstance(values, list) or not values:
        return "'values' holds no entries (a baseline of nothing would pass every run)"
    seen: set[tuple[str, str, str, str]] = set()
    for i, entry in enumerate(values):
        where = f"values[{i}]"
        if not isinstance(entry, dict):
            return f"{where} is not an entry: {str(entry)[:60]}"
        check = entry.get("check")
        if check not in CHECKS:
            return f"{where}: unknown check {check!r} (expected {', '.join(CHECKS)})"
        for key in ("subject", "metric"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                return f"{where}: {key!r} must be a non-empty string"
        if not isinstance(entry.get("point", ""), str):
            return f"{where}: 'point' must be a string"
        if entry.get("direction") not in DIRECTIONS[check]:
            return f"{where}: direction {entry.get('direction')!r} is not one of {', '.join(DIRECTIONS[check])}"
        if not _is_number(entry.get("value")):
            return f"{where}: value {entry.get('value')!r} is not a finite number"
        spread = entry.get("spread")
        if spread is not None and not (_is_number(spread) and spread >= 0):
            return f"{where}: spread {spread!r} is not a non-negative number"
        if check == CLAIM and (not isinstance(entry.get("result"), str) or not entry["result"]):
            return f"{where}: a claim entry needs its 'result' (e.g. 'pass')"
        entry_seeds = entry.get("seeds", seeds)
        if (not isinstance(entry_seeds, list) or not entry_seeds or not all(_is_int(s) and s in seeds for s in entry_seeds)):
            return f"{where}: 'seeds' must be a non-empty list of the baseline's seeds, not {entry_seeds!r}"
        identity = _identity(entry)
        if identity in seen:
            return f"{where}: {_name(identity)} appears twice"
        seen.add(identity)
    trials = baseline.get("trials", [])
    if not isinstance(trials, list) or not all(
        isinstance(t, dict) and isinstance(t.get("arm"), str) and isinstance(t.get("point"), str) and t.get("seed") in seeds
        and _is_int(t.get("seed")) for t in trials
    ):
        return "'trials' must list {arm, point, seed} entries with the baseline's seeds"
    if not isinstance(baseline.get("sweep", {}), dict):
        return "'sweep' must be a mapping"
    environment = baseline.get("environment", {})
    if not isinstance(environment, dict) or not all(isinstance(v, str) for v in environment.values()):
        return "'environment' must be a mapping of strings"
    return None


def gate(run_dir: Path, baseline_path: Path | None = None, baselines_dir: Path = DEFAULT_BASELINES_DIR) -> GateResult:
    """Compare one run with its baseline (by default the matching file in ``baselines_dir``)."""
    results = load_results(run_dir)
    path = Path(baseline_path) if baseline_path else Path(baselines_dir) / baseline_filename(
        results.suite, results.profile, results.device_class
    )
    baseline = load_baseline(path)
    _refuse_mismatch(baseline, results, path)
    _refuse_other_task_version(baseline, results, path)
    tolerances = results.meta.get("gate") or {}
    speed = speed_gated(results)
    gated = (QUALITY, MEMORY, CONTRAST, CLAIM, SPEED_RATIO) if speed else (QUALITY, MEMORY, CONTRAST, CLAIM)
    reference = {_identity(e): e for e in baseline["values"] if e["check"] in gated}
    entries = baseline_values(results)  # evaluates the claims once: their results are in the CLAIM entries
    current = {_identity(e) for e in entries if e["check"] in gated}

    finished = _finished_keys(results)
    failed = {(f.arm_label, f.point_label, f.seed) for f in results.failed}
    expected = _baseline_trials(baseline)
    missing_trials = [key for key in expected if key not in finished and key not in failed]
    named_trials = failed | set(missing_trials)
    ratios = {f"{v.treatment_label}-vs-{v.control_label}": (v.treatment_label, v.control_label)
              for v in contrast_variants(results)}

    claim_results = {(e["subject"], e["point"], e["metric"]): e["result"] for e in entries if e["check"] == CLAIM}
    checks: list[GateCheck] = []
    missing_in_run: list[str] = []
    dropped: list[str] = []
    for identity, entry in reference.items():
        check, subject, point, key = identity
        if check == CLAIM:
            if results.spec_for(key).kind == "speed" and not speed:
                continue
            result = claim_results.get((subject, point, key))
            if result is None:
                missing_in_run.append(_name(identity))
            else:
                checks.append(_claim_check(entry, result))
            continue
        seeds = list(entry.get("seeds") or baseline["seeds"])
        labels = ratios.get(subject) if check in (SPEED_RATIO, CONTRAST) else (subject,)
        if labels is None:
            missing_in_run.append(_name(identity))
            continue
        spread = None
        if check == SPEED_RATIO:
            value, present = _ratio(results, labels[0], labels[1], point, key, seeds)
        elif check == CONTRAST:
            differences = _differences(results, labels[0], labels[1], point, key, seeds)
            present = sorted(differences)
            value = _mean(differences.values()) if present else None
            spread = _spread(differences.values())
        else:
            values = _seed_values(results, subject, point, key)
            present = [s for s in seeds if s in values]
            value = _mean(values[s] for s in present) if present else None
            spread = _spread(values[s] for s in present)
        lacking = [s for s in seeds if s not in present]
        # a seed whose trial is named as missing or failed is not named again per value
        unexplained = [s for s in lacking if not any((label, point, s) in named_trials for label in labels)]
        if not lacking and value is not None:
            checks.append(_check(entry, value, tolerances, spread))
        elif not lacking:
            dropped.append(f"{_name(identity)}: the control's mean is 0 in this run, no ratio")
        elif not present and unexplained:
            missing_in_run.append(_name(identity))
        elif unexplained:
            dropped.append(f"{_name(identity)}: seed(s) {', '.join(map(str, unexplained))} missing or not finite")
    return GateResult(
        suite=results.suite,
        profile=results.profile,
        device_class=results.device_class,
        baseline_path=path,
        checks=tuple(checks),
        missing_in_run=tuple(missing_in_run),
        missing_in_baseline=tuple(_name(key) for key in sorted(current) if key not in reference),
        failed_trials=tuple(
            f"{f.arm_label} seed={f.seed}{f' {f.point_label}' if f.point_label else ''}: {f.error}" for f in results.failed
        ),
        missing_trials=tuple(_trial_name(key) for key in missing_trials),
        dropped_seeds=tuple(dropped),
        environment_differences=tuple(environment_differences(baseline, results)),
    )


def _baseline_trials(baseline: Mapping[str, Any]) -> list[TrialKey]:
    """The trials a baseline was saved from; for a baseline written before they were listed, every
    arm and point its quality and memory values name, at every seed."""
    if baseline.get("trials"):
        return [(t["arm"], t["point"], t["seed"]) for t in baseline["trials"]]
    cells = dict.fromkeys((e["subject"], e["point"]) for e in baseline["values"] if e["check"] in (QUALITY, MEMORY))
    return [(label, point, seed) for seed in baseline["seeds"] for label, point in cells]


def _refuse_mismatch(baseline: Mapping[str, Any], results: RunResults, path: Path) -> None:
    ours = {"suite": results.suite, "profile": results.profile, "device class": results.device_class,
            "seeds": sorted(results.seeds)}
    theirs = {
        "suite": baseline.get("suite"), "profile": baseline.get("profile"), "device class": baseline.get("device_class"),
        "seeds": sorted(baseline["seeds"]),
    }
    if "sweep" in baseline:  # baselines written before the sweep was recorded name their points in values
        ours["sweep"], theirs["sweep"] = results.meta.get("sweep") or {}, baseline["sweep"]
    differing = [f"{k} {theirs[k]!r} vs {ours[k]!r}" for k in ours if theirs[k] != ours[k]]
    if differing:
        raise GateError(
            f"refusing to gate: baseline {path} is for another run ({', '.join(differing)} in these results); "
            "use the baseline of the same suite, profile, device class, seeds and sweep"
        )


def _refuse_other_task_version(baseline: Mapping[str, Any], results: RunResults, path: Path) -> None:
    """A task's version changes when its metrics change meaning: its old values are no yardstick."""
    theirs, ours = baseline.get("task_version"), results.meta.get("task_version")
    if theirs is not None and str(theirs) != str(ours):
        raise GateError(
            f"refusing to gate: baseline {path} was saved with task {baseline.get('task')!r} version {theirs}, these "
            f"results ran version {ours}; save a new baseline from a run of this version"
        )


def _check(reference: Mapping[str, Any], current: float, tolerances: Mapping[str, Any],
           current_spread: float | None = None) -> GateCheck:
    check, key, value = reference["check"], reference["metric"], float(reference["value"])
    sign = {"higher": 1, "lower": -1}.get(reference.get("direction", ""), 0)
    if check == MEMORY:
        passed, rule = current == value, "must be equal"
    elif check in (QUALITY, CONTRAST):
        what = "difference to control" if check == CONTRAST else "mean"
        baseline_spread = reference.get("spread")
        if baseline_spread is not None and current_spread is not None:
            # a floor for float round-off, where every seed gave the same value (zero spread)
            tolerance = max(SPREAD_Z * math.hypot(baseline_spread, current_spread), 1e-9 * max(1.0, abs(value)))
            source = f"{SPREAD_Z:g} standard errors over seeds"
        else:
            tolerance = _tolerance(tolerances, key, float(tolerances.get("default_tolerance", 0.05)))
            source = "the suite's tolerance (one seed: no spread)"
        passed = sign * (current - value) >= -tolerance
        rule = f"{what}, {reference['direction']} is better, may worsen by {tolerance:.3g} = {source}"
    else:
        tolerance = _tolerance(tolerances, key, float(tolerances.get("speed_tolerance", SPEED_RATIO_TOLERANCE)))
        # symmetric in log space: a higher-is-better ratio may shrink by (1 - tol), a lower one grow by 1 / (1 - tol)
        passed = current >= value * (1 - tolerance) if sign > 0 else current <= value / (1 - tolerance)
        rule = f"ratio to control, {reference['direction']} is better, may worsen by {tolerance:.0%}"
    return GateCheck(check, reference["subject"], reference["point"], key, value, current, passed, rule)


def _claim_check(reference: Mapping[str, Any], result: str) -> GateCheck:
    """A claim's result must not change: a headline that flips is what CI exists to catch."""
    before = reference["result"]
    rule = f"result {before.upper()} -> {result.upper()}" + ("" if result == before else " (changed)")
    value = float(reference["value"])
    return GateCheck(CLAIM, reference["subject"], reference["point"], reference["metric"], value, value,
                     result == before, rule)


def _tolerance(tolerances: Mapping[str, Any], key: str, default: float) -> float:
    named = tolerances.get("tolerances") or {}
    if key in named:
        return float(named[key])
    return float(named.get(metric_family(key), default))


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)


def _identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (entry["check"], entry["subject"], entry["point"], entry["metric"])


def _name(identity: tuple[str, str, str, str]) -> str:
    check, subject, point, metric = identity
    return f"{check} {subject}{f' @ {point}' if point else ''} {metric}"
