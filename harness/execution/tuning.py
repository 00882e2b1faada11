"""One suite's tuning, end to end: run every tuned arm's grid on the tuning seeds through ``run_suite``
(content-hashed, resumable, on any executor; the caller's MLflow mirror tags its runs ``tune``), choose each arm's
best grid point, and write the lock beside the suite file with its figure."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import torch

from harness.analysis.decide.tune_grid import ArmGrid, edge_axes, score_grid
from harness.analysis.present.tuning_plots import write_grid_plot
from harness.execution.executor import Executor
from harness.execution.runner import SuiteOutcome, run_suite
from harness.listeners import RunListener
from harness.store import write_json_atomic
from harness.suite.resolved_suite import Suite
from harness.suite.tuning_plan import ArmTuning, grid_points, tune_hash, tune_plan, tuning_suite
from harness.suite.tuning_lock import LockedArm, LockedPoint, TuningLock, lock_path
from harness.core.terminal import Console
from harness.tracking.environment import code_checkout, git_state

TUNE_TAGS = {"tune": "true"}
PLOT_SUFFIX = ".tuned.png"


@dataclass
class TuneOutcome:
    suite: Suite  # the suite as written (its profile applied, no lock)
    run: SuiteOutcome  # the tuning run (every grid point x tuning seed)
    grids: dict[str, ArmGrid] = field(default_factory=dict)
    kept: dict[str, dict] = field(default_factory=dict)  # arm -> tuned keys it sets itself
    lock: Path | None = None  # None: interrupted, or an arm had no grid point finish on every seed
    plot: Path | None = None

    @property
    def unchosen(self) -> list[str]:
        return [arm for arm, grid in self.grids.items() if grid.chosen is None]

    @property
    def edges(self) -> dict[str, list[str]]:
        """Each arm whose choice sits on an edge of its grid, with the axes (``tune_grid.edge_axes``)."""
        found = {arm: edge_axes([p.params for p in grid.points], grid.chosen.params)
                 for arm, grid in self.grids.items() if grid.chosen is not None}
        return {arm: axes for arm, axes in found.items() if axes}


def tune_suite(suite: Suite, results_root: Path, device: torch.device, console: Console, resume: bool,
               executor: Executor, trial_timeout: float | None, listeners: Sequence[RunListener] = ()) -> TuneOutcome:
    """Run the suite's tuning grids and write its lock (and figure) when every tuned arm has a choice;
    ``listeners`` follow the tuning run (its MLflow mirror tags its runs ``TUNE_TAGS``)."""
    spec = suite.tune
    if spec is None:
        raise ValueError(f"suite {suite.name!r} has no tune: block")
    plan = tune_plan(spec, suite.arms)
    tuning = tuning_suite(suite, spec)
    run = run_suite(tuning, results_root, device, console, resume, executor, trial_timeout, listeners)
    outcome = TuneOutcome(suite, run, kept={name: t.kept for name, t in plan.items()})
    if run.interrupted:
        return outcome
    metric = suite.task.metric_for(spec.metric)
    for name, arm_tuning in plan.items():
        if arm_tuning.space:
            points = grid_points(suite, name, arm_tuning)
            outcome.grids[name] = score_grid(name, points, run.records, spec.metric, metric.direction, spec.seeds)
    if outcome.unchosen:
        return outcome
    lock = lock_path(suite.source)
    title = (f"{suite.name}: {spec.metric} over each arm's tuning grid, tuning seeds "
             f"{', '.join(map(str, spec.seeds))} ({suite.profile} profile)")
    outcome.plot = write_grid_plot(list(outcome.grids.values()), spec.metric, metric.direction, title,
                                   suite.source.with_name(suite.source.stem + PLOT_SUFFIX))
    write_json_atomic(lock, _lock(outcome, plan, run.run_dir).as_stored())
    outcome.lock = lock
    return outcome


def _lock(outcome: TuneOutcome, plan: dict[str, ArmTuning], run_dir: Path) -> TuningLock:
    suite, spec = outcome.suite, outcome.suite.tune
    assert spec is not None
    commit, dirty = git_state(code_checkout())  # the code that tuned; a suite's own tree is never read
    arms = {}
    for name, arm_tuning in plan.items():
        grid = outcome.grids.get(name)
        arms[name] = LockedArm(  # kept: tuned keys the arm sets itself, it keeps its own value
            dict(grid.chosen.params) if grid else {}, arm_tuning.kept,
            tuple(LockedPoint(point.params, dict(point.values), point.failed, point.mean) for point in grid.points)
            if grid else ())
    provenance = {
        "suite": suite.name, "suite_file": suite.source.name, "task": suite.task_name, "profile": suite.profile,
        "tune": spec.model_dump(mode="json"), "metric": spec.metric,
        "direction": suite.task.metric_for(spec.metric).direction, "commit": commit, "dirty": dirty,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "trials": str(run_dir),
        "wall_seconds": round(outcome.run.wall_seconds, 3),
    }
    return TuningLock(tune_hash(spec), suite.task.version, tuple(spec.seeds), arms, provenance)

