"""Stored results indexed for analysis: finished values by (arm label, point, seed), failures aside.

Everything downstream (contrasts, claims, plots, gating) reads results through ``RunResults``
so that failed or malformed trials are set aside in exactly one place.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from harness.analysis.stats.paired_stats import CONFIDENCE
from harness.core.metrics import Metric, metric_family
from harness.core.record import TrialRecord, trial_title
from harness.store import SUITE_FILE, CorruptTrial, incomplete_note, iter_trial_files, read_json, read_trial, stale_note
from harness.suite.points import point_label, sweep_points
from harness.suite.stored import StoredSuite, StoredSuiteError


class ResultsError(ValueError):
    """A results folder that cannot be read; the message names the folder and the problem."""


@dataclass(frozen=True)
class FailedTrial:
    arm_label: str
    seed: int | None
    point_label: str
    error: str
    status: str

    @classmethod
    def of(cls, record: TrialRecord) -> FailedTrial:
        return cls(record.arm_label, record.seed, record.point_label,
                   record.error or f"status {str(record.status)!r} without an error message", str(record.status))

    @property
    def title(self) -> str:
        return trial_title(self.arm_label, self.seed, self.point_label)

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm_label,
            "seed": self.seed,
            "point": self.point_label,
            "status": self.status,
            "error": self.error,
        }


@dataclass
class RunResults:
    """One ``<suite>/<profile>`` run: its stored suite and its finished trials, indexed."""

    run_dir: Path
    stored: StoredSuite
    finished: list[TrialRecord]
    failed: list[FailedTrial]
    stale: int = 0  # stored trials outside the suite's expansion and seeds, set aside (``StoredSuite.includes``)
    incomplete: str = ""  # the note on a folder whose last run ended before every trial was stored
    metric_specs: dict[str, Metric] = field(init=False)
    _cells: dict[tuple[str, str], list[TrialRecord]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cells = {}
        for trial in self.finished:  # one pass: analysis asks per (arm label, point) thousands of times
            self._cells.setdefault((trial.arm_label, trial.point_label), []).append(trial)
        self.metric_specs = dict(self.stored.metrics)

    @property
    def stale_note(self) -> str:
        """The warning every reader gives when stored trials were set aside; '' when none were."""
        return stale_note(self.stale, self.run_dir)

    @property
    def suite(self) -> str:
        return self.stored.suite or self.run_dir.parent.name

    @property
    def profile(self) -> str:
        return self.stored.profile or self.run_dir.name

    @property
    def confidence(self) -> float:
        """The suite's declared confidence level (results written before it was declared: 0.95)."""
        return float(self.stored.confidence or CONFIDENCE)

    @property
    def seeds(self) -> list[int]:
        """The seeds the run was meant to have: a missing one is a dropped pair, not a smaller n."""
        return list(self.stored.seeds)

    def first_seeds(self, n: int) -> RunResults:
        """The run as it stood after its first n seeds: what a sequential design saw at that look."""
        keep = self.seeds[:n]
        return RunResults(self.run_dir, replace(self.stored, seeds=tuple(keep)),
                          [t for t in self.finished if t.seed in keep], [f for f in self.failed if f.seed in keep])

    @property
    def speed_under_load(self) -> int:
        """Most trials that ran at once while speed was measured (Ray); 0 when every trial ran alone."""
        return max((int(t.details.get("concurrent_trials") or 0) for t in self.finished
                    if t.details.get("speed_measured_under_load")), default=0)

    @property
    def device_class(self) -> str:
        return self.stored.device_class or "cpu"

    def spec_for(self, key: str) -> Metric:
        """The declared family of a key; an undeclared key is informational (no verdict)."""
        family = metric_family(key)
        return self.metric_specs.get(family) or Metric.undeclared(family)

    def is_key_metric(self, key: str) -> bool:
        """Declared key metrics and those the suite's claims and validity name; every directed
        metric when the task flags none as key."""
        spec = self.spec_for(key)
        if spec.direction == "none" or spec.kind == "info":
            return False
        named = self.stored.named_metrics
        if key in named or spec.name in named:
            return True
        return spec.key or not any(s.key for s in self.metric_specs.values())

    def arm_labels(self, arm: str | None = None) -> list[str]:
        """Labels in suite order (then any only seen in trials), optionally of one arm."""
        labels = self.stored.arm_labels(arm)
        for trial in self.finished:
            if (arm is None or trial.arm == arm) and trial.arm_label not in labels:
                labels.append(trial.arm_label)
        return labels

    def point_labels(self) -> list[str]:
        """Sweep points in declaration order, labelled as the trials label them (the stored suite
        may list the axes of a multi-axis sweep in another order); without a sweep the single ''."""
        trial_labels = {_point_key(t.point): t.point_label for t in self.finished}
        declared = sweep_points(self.stored.sweep)
        labels = [trial_labels.get(_point_key(p), point_label(p)) for p in declared]
        seen = set(labels)
        for _, point in self._cells:
            if point not in seen:
                labels.append(point)
                seen.add(point)
        return labels

    def point_of(self, label: str) -> dict[str, Any]:
        for point in sweep_points(self.stored.sweep):
            if point_label(point) == label:
                return point
        for trial in self.finished:
            if trial.point_label == label:
                return dict(trial.point)
        return {}

    def trials_of(self, arm_label: str, point: str) -> list[TrialRecord]:
        return list(self._cells.get((arm_label, point), ()))

    def values(self, arm_label: str, point: str, key: str) -> dict[int, float]:
        """Finite values of one metric key by seed."""
        out: dict[int, float] = {}
        for trial in self.trials_of(arm_label, point):
            value = trial.metrics.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[trial.seed] = float(value)
        return out

    def identical_arms(self, treatment_label: str, control_label: str, point: str) -> bool:
        """The two arms reported bit-identical metrics (speed aside: timings always differ) on every
        seed both finished, and on at least one: a mechanism that changed nothing, or was never on."""
        def by_seed(label: str) -> dict[int, dict[str, Any]]:
            return {t.seed: {k: v for k, v in t.metrics.items() if self.spec_for(k).kind != "speed"}
                    for t in self.trials_of(label, point)}

        treated, controls = by_seed(treatment_label), by_seed(control_label)
        common = set(treated) & set(controls)
        return bool(common) and all(treated[seed] == controls[seed] for seed in common)

    def metric_keys(self, arm_label: str | None = None, point: str | None = None) -> list[str]:
        keys: set[str] = set()
        for (label, where), trials in self._cells.items():
            if (arm_label is None or label == arm_label) and (point is None or where == point):
                for trial in trials:
                    keys.update(trial.metrics)
        return sorted(keys, key=metric_order)


def metric_order(key: str) -> tuple[str, int, float, str]:
    """Family first, then numeric qualifiers by value (nmse@64 before nmse@256), then the rest."""
    family, _, qualifier = key.partition("@")
    try:
        value = float(qualifier)
    except ValueError:
        return (family, 1, 0.0, qualifier)
    return (family, 0, value, qualifier) if math.isfinite(value) else (family, 1, 0.0, qualifier)


def index_results(run_dir: Path, stored: StoredSuite, trials: list[TrialRecord | FailedTrial],
                  stale: int = 0, incomplete: str = "") -> RunResults:
    """Split trial records into finished ones and failures to report (a file that could not be read
    comes as a FailedTrial); ``stale`` counts the stored trials set aside as not of the current
    expansion, ``incomplete`` is ``store.incomplete_note``."""
    finished: list[TrialRecord] = []
    failed: list[FailedTrial] = []
    for trial in trials:
        if isinstance(trial, FailedTrial):
            failed.append(trial)
        elif trial.finished:
            finished.append(trial)
        else:
            failed.append(FailedTrial.of(trial))
    return RunResults(Path(run_dir), stored, finished, failed, stale=stale, incomplete=incomplete)


def load_results(run_dir: Path) -> RunResults:
    """Read one run folder through the store; an unreadable trial file is reported as failed."""
    run_dir = Path(run_dir)
    try:
        meta = read_json(run_dir / SUITE_FILE)
    except FileNotFoundError as exc:
        raise ResultsError(f"{run_dir}: no results here ({SUITE_FILE} is missing)") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{run_dir / SUITE_FILE}: cannot be read ({exc})") from exc
    try:
        stored = StoredSuite.read(run_dir / SUITE_FILE, meta)
    except StoredSuiteError as exc:
        raise ResultsError(str(exc)) from None
    trials: list[TrialRecord | FailedTrial] = []
    stale = 0
    for path in iter_trial_files(run_dir):
        try:
            trial = read_trial(path)
        except (OSError, CorruptTrial) as exc:
            trials.append(FailedTrial("?", None, "", f"{path.name}: {exc}", "unreadable"))
            continue
        if stored.includes(trial.trial_id, trial.seed):
            trials.append(trial)
        else:
            stale += 1
    return index_results(run_dir, stored, trials, stale, incomplete_note(run_dir))


def _point_key(point: Mapping[str, Any]) -> str:
    """A sweep point's identity whatever the order of its axes."""
    return json.dumps(point, sort_keys=True, default=str)
