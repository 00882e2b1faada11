"""The committed baseline file: saved only from a complete run, loaded only when every entry checks out."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from harness.analysis.run_results import RunResults, load_results
from harness.gating import DEFAULT_BASELINES_DIR
from harness.gating.numeric_modes import refuse_baseline_mode
from harness.gating.values import (
    CHECK_KINDS,
    BaselineEnvironment,
    GatedValue,
    GateError,
    Identity,
    TrialKey,
    baseline_values,
    check_name,
    declared_trials,
    finished_keys,
    trial_environments,
    trial_name,
)
from harness.core.numeric import DETERMINISTIC
from harness.core.stored_fields import (
    ANY,
    INTEGER,
    MAPPING,
    PRESENT,
    STRING,
    TEXT,
    TEXT_MAPPING,
    Schema,
    Shape,
    StoredFieldError,
    as_stored,
    document,
    from_stored,
    list_of,
    mapping_of,
    stored,
)
from harness.store import clean_stray_tmp, read_json, write_json_atomic


def baseline_filename(suite: str, profile: str, device_class: str) -> str:
    return f"{suite}-{profile}-{device_class}.json"


@dataclass(frozen=True)
class _TrialEntry:
    """One declared trial of a baseline's run, as ``trials`` lists it."""

    arm: str = stored(STRING)
    point: str = stored(STRING)
    seed: int = stored(INTEGER)


def _trial_keys(entries: list[Any], where: str) -> tuple[TrialKey, ...] | None:
    trials = list_of(document(_TrialEntry)).load(entries, where)
    return tuple((t.arm, t.point, t.seed) for t in trials) or None  # none listed: a baseline saved before they were


def _trial_entries(trials: tuple[TrialKey, ...] | None) -> list[dict[str, Any]]:
    return [as_stored(_TrialEntry(*key)) for key in trials or ()]


def _environment(environment: dict[str, Any], where: str) -> BaselineEnvironment:
    """A baseline's environment, read into its fields once every value is checked to be a string, as its run's
    trials recorded it (those no field reads too): the first that is not is named by its key."""
    mapping_of(STRING, TEXT_MAPPING.expected).load(environment, where)
    return from_stored(BaselineEnvironment, environment, f"{where}.")


_ENVIRONMENT = Shape(TEXT_MAPPING.expected, MAPPING.test, _environment, as_stored)
_VALUES = list_of(document(GatedValue), "a non-empty list of entries (a baseline of nothing would pass every run)",
                  non_empty=True)


@dataclass(frozen=True)
class Baseline:
    """A committed baseline: the run it was saved from (suite, profile, device class, seeds, sweep, its
    declared trials, task version, numeric environment) and the values the gate holds a run to. Each field
    is its key in the file (``stored``); fields a file written before they were recorded lacks are None
    (``sweep``, ``trials``)."""

    stored_schema = Schema(1)
    suite: str = stored(TEXT)
    profile: str = stored(TEXT)
    device_class: str = stored(TEXT)
    seeds: tuple[int, ...] = stored(list_of(INTEGER, "a non-empty list of distinct integers", non_empty=True))
    values: tuple[GatedValue, ...] = stored(_VALUES)
    sweep: Mapping[str, Any] | None = stored(replace(MAPPING, dump=lambda sweep: dict(sweep or {})), missing=None,
                                             default=None)
    trials: tuple[TrialKey, ...] | None = stored(Shape("a list of {arm, point, seed} entries",
                                                       lambda value: isinstance(value, list), _trial_keys, _trial_entries),
                                                 missing=None, default=None)
    environment: BaselineEnvironment = stored(_ENVIRONMENT, missing=BaselineEnvironment(),
                                              default_factory=BaselineEnvironment)
    task: str | None = stored(ANY, missing=None, default=None)
    task_version: Any = stored(ANY, missing=None, default=None)
    device_name: str | None = stored(ANY, missing=None, default=None)
    git_commit: str | None = stored(ANY, missing=None, default=None)
    created_at: str | None = stored(ANY, missing=None, default=None)

    @classmethod
    def of_run(cls, results: RunResults) -> Baseline:
        commits = [env.git_commit for env in trial_environments(results)]
        return cls(
            suite=results.suite, profile=results.profile, device_class=results.device_class,
            seeds=tuple(results.seeds), values=tuple(baseline_values(results)), sweep=dict(results.stored.sweep),
            trials=tuple(declared_trials(results)),
            environment=BaselineEnvironment.of_run(results),
            task=results.stored.task, task_version=results.stored.task_version,
            device_name=results.stored.device_name,
            git_commit=next(filter(None, commits), None),
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    @classmethod
    def from_stored(cls, data: Any) -> Baseline:
        """A baseline file's content, every entry checked; GateError names what is wrong."""
        try:
            baseline = from_stored(cls, data)
        except StoredFieldError as exc:
            raise GateError(str(exc)) from None
        problem = _baseline_problem(baseline)
        if problem:
            raise GateError(problem)
        return baseline

    def trial_keys(self) -> list[TrialKey]:
        """The trials the baseline was saved from; for a baseline written before they were listed, every
        arm and point its quality and memory values name, at every seed."""
        if self.trials:
            return list(self.trials)
        cells = dict.fromkeys((v.subject, v.point) for v in self.values if CHECK_KINDS[v.check].per_arm)
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
        write_json_atomic(path, as_stored(baseline))
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


@dataclass(frozen=True)
class _BaselineMark:
    """What says a file is a harness baseline before any field is read: its schema version, and that it holds
    values (of whatever shape: ``Baseline`` checks them)."""

    schema: Any = stored(ANY, missing=None)
    values: bool = stored(PRESENT, missing=False)


def load_baseline(path: Path) -> Baseline:
    try:
        data = read_json(path)
    except FileNotFoundError as exc:
        raise GateError(f"no baseline at {path}; create one with `harness baseline save RESULTS`") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GateError(f"baseline {path} cannot be read ({' '.join(str(exc).split())})") from exc
    schema = Baseline.stored_schema
    mark = from_stored(_BaselineMark, data) if isinstance(data, dict) else None
    if mark is None or mark.schema != schema.version or not mark.values:
        raise GateError(f"{path} is not a harness baseline (schema {schema.version})")
    try:
        return Baseline.from_stored(data)
    except GateError as exc:
        raise GateError(f"baseline {path} is malformed: {exc}; save it again with `harness baseline save RESULTS`") from None


def _baseline_problem(baseline: Baseline) -> str | None:
    """What is wrong across a baseline's fields, each already of its shape (None when nothing is): every
    entry is checked, so a corrupt one is a usage error here instead of a crash or a silent pass later."""
    seeds = set(baseline.seeds)
    if len(seeds) != len(baseline.seeds):
        return f"seeds: expected a non-empty list of distinct integers, got {list(baseline.seeds)!r}"
    seen: set[Identity] = set()
    for i, value in enumerate(baseline.values):
        where = f"values[{i}]"
        kind = CHECK_KINDS[value.check]
        if value.direction not in kind.directions:
            return f"{where}.direction: expected one of {', '.join(kind.directions)}, got {value.direction!r}"
        if kind.holds_claim != (value.claim is not None):
            return f"{where}: {'a claim entry needs its' if kind.holds_claim else 'only a claim entry holds a'} " \
                   "'result' (e.g. 'pass')"
        if value.seeds is not None and not seeds.issuperset(value.seeds):
            return f"{where}.seeds: expected a non-empty list of the baseline's seeds, got {list(value.seeds)!r}"
        if value.identity in seen:
            return f"{where}: {check_name(value.identity)} appears twice"
        seen.add(value.identity)
    if any(seed not in seeds for _, _, seed in baseline.trials or ()):
        return "trials: expected {arm, point, seed} entries with the baseline's seeds"
    return None
