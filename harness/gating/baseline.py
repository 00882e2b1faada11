"""The committed baseline file: saved only from a complete run, loaded only when every entry checks out."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from harness.analysis.run_results import RunResults, load_results
from harness.gating import DEFAULT_BASELINES_DIR
from harness.gating.numeric_modes import refuse_baseline_mode
from harness.gating.values import (
    CHECKS,
    CLAIM,
    CONTRAST,
    MEMORY,
    QUALITY,
    SPEED_RATIO,
    GatedValue,
    GateError,
    TrialKey,
    baseline_values,
    check_name,
    declared_trials,
    finished_keys,
    numeric_environment,
    trial_name,
)
from harness.core.numeric import DETERMINISTIC
from harness.store import clean_stray_tmp, read_json, write_json_atomic

BASELINE_SCHEMA = 1
DIRECTIONS = {QUALITY: ("higher", "lower"), SPEED_RATIO: ("higher", "lower"), MEMORY: ("higher", "lower", "none"),
              CONTRAST: ("higher", "lower"), CLAIM: ("none",)}


def baseline_filename(suite: str, profile: str, device_class: str) -> str:
    return f"{suite}-{profile}-{device_class}.json"


@dataclass(frozen=True)
class Baseline:
    """A committed baseline: the run it was saved from (suite, profile, device class, seeds, sweep, its
    declared trials, task version, numeric environment) and the values the gate holds a run to. Fields a
    file written before they were recorded lacks are None (``sweep``, ``trials``)."""

    suite: str
    profile: str
    device_class: str
    seeds: tuple[int, ...]
    values: tuple[GatedValue, ...]
    sweep: Mapping[str, Any] | None = None
    trials: tuple[TrialKey, ...] | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    task: str | None = None
    task_version: Any = None
    device_name: str | None = None
    git_commit: str | None = None
    created_at: str | None = None

    @classmethod
    def of_run(cls, results: RunResults) -> Baseline:
        environments = [t.environment for t in results.finished]
        return cls(
            suite=results.suite, profile=results.profile, device_class=results.device_class,
            seeds=tuple(results.seeds), values=tuple(baseline_values(results)), sweep=dict(results.stored.sweep),
            trials=tuple(declared_trials(results)), environment=numeric_environment(results),
            task=results.stored.task, task_version=results.stored.task_version,
            device_name=results.stored.device_name,
            git_commit=next((e["git_commit"] for e in environments if e.get("git_commit")), None),
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Baseline:
        """A baseline file's content, every entry checked; GateError names what is wrong."""
        problem = _baseline_problem(data)
        if problem:
            raise GateError(problem)
        trials = data.get("trials")
        return cls(
            suite=data["suite"], profile=data["profile"], device_class=data["device_class"], seeds=tuple(data["seeds"]),
            values=tuple(GatedValue.from_stored(entry) for entry in data["values"]), sweep=data.get("sweep"),
            trials=tuple((t["arm"], t["point"], t["seed"]) for t in trials) if trials else None,
            environment=data.get("environment", {}), task=data.get("task"), task_version=data.get("task_version"),
            device_name=data.get("device_name"), git_commit=data.get("git_commit"), created_at=data.get("created_at"),
        )

    def as_stored(self) -> dict[str, Any]:
        return {
            "schema": BASELINE_SCHEMA, "suite": self.suite, "profile": self.profile, "device_class": self.device_class,
            "device_name": self.device_name, "task": self.task, "task_version": self.task_version,
            "seeds": list(self.seeds), "sweep": dict(self.sweep or {}),
            "trials": [{"arm": label, "point": point, "seed": seed} for label, point, seed in self.trials or ()],
            "git_commit": self.git_commit, "environment": dict(self.environment), "created_at": self.created_at,
            "values": [value.as_stored() for value in self.values],
        }

    def trial_keys(self) -> list[TrialKey]:
        """The trials the baseline was saved from; for a baseline written before they were listed, every
        arm and point its quality and memory values name, at every seed."""
        if self.trials:
            return list(self.trials)
        cells = dict.fromkeys((v.subject, v.point) for v in self.values if v.check in (QUALITY, MEMORY))
        return [(label, point, seed) for seed in self.seeds for label, point in cells]


STRAY_TMP_AGE_S = 60  # a temporary file older than this is no concurrent save's: a killed one left it


def save_baselines(run_dirs: list[Path], out_dir: Path = DEFAULT_BASELINES_DIR,
                   numeric: str = DETERMINISTIC) -> list[Path]:
    """Every run's baseline, all checked before the first file is replaced: one refused run leaves
    every baseline as it was, as does a run of another numeric mode than ``numeric`` (``numeric_modes``).
    Temporary files of a save killed mid-write are removed first."""
    made = [_checked_baseline(run_dir, numeric) for run_dir in run_dirs]
    clean_stray_tmp(Path(out_dir), min_age=STRAY_TMP_AGE_S)
    paths = []
    for name, baseline in made:
        path = Path(out_dir) / name
        write_json_atomic(path, baseline.as_stored())
        paths.append(path)
    return paths


def _checked_baseline(run_dir: Path, numeric: str = DETERMINISTIC) -> tuple[str, Baseline]:
    """(file name, baseline) of a complete run with something to gate, else GateError."""
    results = load_results(run_dir)
    if results.incomplete:
        raise GateError(f"{results.incomplete}; a baseline must come from a complete run")
    if results.failed:
        raise GateError(
            f"{results.run_dir}: {len(results.failed)} failed trial(s); a baseline must come from a complete run"
        )
    if not results.finished:
        raise GateError(f"{results.run_dir}: no finished trials; a baseline must come from a complete run (run the suite first)")
    finished = finished_keys(results)
    expected = declared_trials(results)
    missing = [key for key in expected if key not in finished]
    if not expected or missing:
        example = f" (first: {trial_name(missing[0])})" if missing else ""
        raise GateError(
            f"{results.run_dir}: {len(missing)} of {len(expected)} declared trials have no result{example}; "
            "a baseline must come from a complete run (rerun the suite to finish them)"
        )
    refuse_baseline_mode(results, numeric)
    baseline = Baseline.of_run(results)
    if not baseline.values:
        raise GateError(f"{results.run_dir}: no quality, memory or speed-ratio values to gate; a baseline of nothing "
                        "would pass every run")
    return baseline_filename(results.suite, results.profile, results.device_class), baseline


def load_baseline(path: Path) -> Baseline:
    try:
        data = read_json(path)
    except FileNotFoundError as exc:
        raise GateError(f"no baseline at {path}; create one with `harness baseline save RESULTS`") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GateError(f"baseline {path} cannot be read ({' '.join(str(exc).split())})") from exc
    if not isinstance(data, dict) or data.get("schema") != BASELINE_SCHEMA or "values" not in data:
        raise GateError(f"{path} is not a harness baseline (schema {BASELINE_SCHEMA})")
    try:
        return Baseline.from_stored(data)
    except GateError as exc:
        raise GateError(f"baseline {path} is malformed: {exc}; save it again with `harness baseline save RESULTS`") from None


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
        if check == CLAIM and _evidence_problem(entry):
            return f"{where}: {_evidence_problem(entry)}"
        entry_seeds = entry.get("seeds", seeds)
        if (not isinstance(entry_seeds, list) or not entry_seeds or not all(_is_int(s) and s in seeds for s in entry_seeds)):
            return f"{where}: 'seeds' must be a non-empty list of the baseline's seeds, not {entry_seeds!r}"
        identity = (check, entry["subject"], entry.get("point", ""), entry["metric"])
        if identity in seen:
            return f"{where}: {check_name(identity)} appears twice"
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


def _evidence_problem(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with a claim entry's evidence (each field optional: older baselines hold none)."""
    for key, least in (("estimate", -math.inf), ("standard_error", 0.0), ("boundary_t", 0.0)):
        value = entry.get(key)
        if value is not None and not (_is_number(value) and value >= least):
            return f"{key} {value!r} is not a {'finite' if key == 'estimate' else 'non-negative'} number"
    bounds = entry.get("bounds", [])
    if not isinstance(bounds, list) or not all(_is_number(b) for b in bounds):
        return f"'bounds' must be a list of finite numbers, not {bounds!r}"
    return None
