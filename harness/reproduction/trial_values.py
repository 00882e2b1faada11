"""Two runs of the same suites, trial by trial: every metric but speed must be bit-identical.

Trials are matched by (suite, arm, point, seed), not by id, so two commits whose trial ids differ
(a param default added, the trial's hash changed) still compare: what a refactor must leave alone
is each trial's values. Speed cannot repeat and is left out, as ``harness reproduce`` leaves it out.
Which metrics are speed is the registered task's own declaration, never a results folder's suite.json (a
folder that called its accuracy a speed would read "identical" whatever its accuracies): a task that is
not registered here has every metric compared, speed included, and the table says so. What is printed
comes from the folders, so control characters (a terminal escape in an arm label) are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from harness.analysis.compare.run_comparison import pair_runs
from harness.analysis.present.markdown_tables import printable
from harness.analysis.run_results import RunResults, load_results
from harness.core.metrics import metric_family
from harness.core.record import TrialRecord
from harness.reproduction.metric_checks import SPEED, MetricCheck, metric_number
from harness.tasks import UnknownTaskError, load_received_task

TrialKey = tuple[str, str, int]  # (arm label, point label, seed)


@dataclass(frozen=True)
class SuiteValues:
    """One suite's trials compared: every non-speed value of the trials both runs finished, and the
    finished trials only one of them has."""

    suite: str
    checks: tuple[MetricCheck, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    other_params: tuple[str, ...] = ()  # matched trials that ran with other params (a design change, not code)
    unregistered_task: str | None = None  # the suite's task when it is not registered here: speed compared too

    @property
    def differing(self) -> list[MetricCheck]:
        return [check for check in self.checks if not check.identical]

    @property
    def trials(self) -> int:
        return len({check.trial for check in self.checks})

    @property
    def identical(self) -> bool:
        return not self.differing and not self.only_a and not self.only_b


def compare_trial_values(a: Path, b: Path) -> list[SuiteValues]:
    """Each suite A and B both hold (``pair_runs``: a <suite>/<profile> folder or a results root each),
    compared trial by trial; CompareError or ResultsError when they hold different suites."""
    return [suite_values(load_results(path_a), load_results(path_b)) for path_a, path_b in pair_runs(a, b)]


def declared_kinds(task: str) -> Mapping[str, str] | None:
    """Each metric family's kind as the registered task ``task`` declares it; None when no installed package
    registers it (a task path a record names is never imported)."""
    try:
        return {family: spec.kind for family, spec in load_received_task(task).metric_specs().items()}
    except UnknownTaskError:
        return None


def suite_values(a: RunResults, b: RunResults) -> SuiteValues:
    trials_a, trials_b = _by_key(a), _by_key(b)
    kinds = declared_kinds(a.stored.task)
    checks = []
    for key in sorted(trials_a.keys() & trials_b.keys()):
        before, after = trials_a[key].metrics, trials_b[key].metrics
        for metric in sorted(before.keys() | after.keys()):
            kind = (kinds or {}).get(metric_family(metric), "info")
            if kind != SPEED:
                checks.append(MetricCheck(_title(key), trials_b[key].trial_id, metric, kind,
                                          metric_number(before.get(metric)), metric_number(after.get(metric))))
    other_params = tuple(_title(key) for key in sorted(trials_a.keys() & trials_b.keys())
                         if trials_a[key].trial.params != trials_b[key].trial.params)
    return SuiteValues(b.suite, tuple(checks), tuple(_title(k) for k in sorted(trials_a.keys() - trials_b.keys())),
                       tuple(_title(k) for k in sorted(trials_b.keys() - trials_a.keys())), other_params,
                       None if kinds is not None else a.stored.task)


def _by_key(results: RunResults) -> dict[TrialKey, TrialRecord]:
    return {(r.arm_label, r.point_label, r.seed): r for r in results.finished}


def _title(key: TrialKey) -> str:
    label, point, seed = key
    return f"{label} seed={seed}{f' @ {point}' if point else ''}"


def render_trial_values(suites: list[SuiteValues], shown: int = 20) -> str:
    """One row per suite (trials matched, values compared, how many differ, trials on one side only, matched
    trials run with other params), then the first ``shown`` differing values, each saying whether its trial's
    params differ (a design change explains it) or not (the code changed a result)."""
    rows = [f"{'suite':<24} {'trials':>6} {'values':>7} {'differ':>6} {'only A':>6} {'only B':>6} {'params':>6}"]
    rows += [f"{s.suite:<24} {s.trials:>6} {len(s.checks):>7} {len(s.differing):>6} {len(s.only_a):>6} "
             f"{len(s.only_b):>6} {len(s.other_params):>6}" for s in suites]
    differing = [(s.suite, check, check.trial in s.other_params) for s in suites for check in s.differing]
    rows += [f"differs: [{suite}] {c.trial} {c.key}: {c.recorded!r} -> {c.reproduced!r}"
             f"{' (the trial ran with other params)' if moved else ''}" for suite, c, moved in differing[:shown]]
    if len(differing) > shown:
        rows.append(f"... and {len(differing) - shown} more differing values")
    rows += [f"only in {side}: [{s.suite}] {title}" for s in suites
             for side, titles in (("A", s.only_a), ("B", s.only_b)) for title in titles[:shown]]
    rows += [f"note: [{s.suite}] task {s.unregistered_task!r} is not registered here, so which of its metrics are "
             "speed is unknown: every metric was compared, speed included (install the package that registers it)"
             for s in suites if s.unregistered_task]
    return "\n".join(printable(row).replace("\n", " ") for row in rows)  # no folder's text steers the terminal

