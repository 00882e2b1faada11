"""The committed baseline file: saved only from a complete run, loaded only when every entry checks out."""
from __future__ import annotations

import json
import math
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
    GateError,
    TrialKey,
    baseline_values,
    check_name,
    declared_trials,
    finished_keys,
    numeric_environment,
    trial_name,
    value_identity,
)
from harness.numeric import DETERMINISTIC
from harness.store import clean_stray_tmp, read_json, write_json_atomic

BASELINE_SCHEMA = 1
DIRECTIONS = {QUALITY: ("higher", "lower"), SPEED_RATIO: ("higher", "lower"), MEMORY: ("higher", "lower", "none"),
              CONTRAST: ("higher", "lower"), CLAIM: ("none",)}


def baseline_filename(suite: str, profile: str, device_class: str) -> str:
    return f"{suite}-{profile}-{device_class}.json"


def make_baseline(results: RunResults) -> dict[str, Any]:
    environments = [t.environment for t in results.finished]
    return {
        "schema": BASELINE_SCHEMA,
        "suite": results.suite,
        "profile": results.profile,
        "device_class": results.device_class,
        "device_name": results.stored.device_name,
        "task": results.stored.task,
        "task_version": results.stored.task_version,
        "seeds": results.seeds,
        "sweep": dict(results.stored.sweep),
        "trials": [{"arm": label, "point": point, "seed": seed} for label, point, seed in declared_trials(results)],
        "git_commit": next((e["git_commit"] for e in environments if e.get("git_commit")), None),
        "environment": numeric_environment(results),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "values": baseline_values(results),
    }


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
        write_json_atomic(path, baseline)
        paths.append(path)
    return paths


def _checked_baseline(run_dir: Path, numeric: str = DETERMINISTIC) -> tuple[str, dict[str, Any]]:
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
        if check == CLAIM and _evidence_problem(entry):
            return f"{where}: {_evidence_problem(entry)}"
        entry_seeds = entry.get("seeds", seeds)
        if (not isinstance(entry_seeds, list) or not entry_seeds or not all(_is_int(s) and s in seeds for s in entry_seeds)):
            return f"{where}: 'seeds' must be a non-empty list of the baseline's seeds, not {entry_seeds!r}"
        identity = value_identity(entry)
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


def baseline_trials(baseline: Mapping[str, Any]) -> list[TrialKey]:
    """The trials a baseline was saved from; for a baseline written before they were listed, every
    arm and point its quality and memory values name, at every seed."""
    if baseline.get("trials"):
        return [(t["arm"], t["point"], t["seed"]) for t in baseline["trials"]]
    cells = dict.fromkeys((e["subject"], e["point"]) for e in baseline["values"] if e["check"] in (QUALITY, MEMORY))
    return [(label, point, seed) for seed in baseline["seeds"] for label, point in cells]
