"""A run against its baseline: every value the baseline holds, within its tolerance, or named as a regression."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analysis.decide.verdicts import contrast_variants
from harness.analysis.present.markdown_tables import plain
from harness.analysis.run_results import RunResults, load_results
from harness.execution.registry import BUILTIN_EXECUTORS
from harness.gating.baseline import DEFAULT_BASELINES_DIR, Baseline, baseline_filename, load_baseline
from harness.gating.numeric_modes import refuse_other_mode
from harness.gating.values import (
    CHECK_KINDS,
    BaselineEnvironment,
    GatedRun,
    GatedValue,
    GateError,
    Identity,
    baseline_values,
    check_name,
    finished_keys,
    sizes_text,
    speed_gated,
    trial_name,
)


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
    near_boundary: bool = False  # a claim whose result changed within the tolerance of its boundary: a warning

    def describe(self) -> str:
        """One line; the names come from a results folder, so they are printed plain."""
        subject, metric = plain(self.subject), plain(self.metric)
        where = f" @ {plain(self.point)}" if self.point else ""
        if CHECK_KINDS[self.check].holds_claim:
            return f"{self.check:<11} {subject}{where}  {metric}: {self.rule}"
        return f"{self.check:<11} {subject}{where}  {metric}: {self.baseline:.6g} -> {self.current:.6g}  ({self.rule})"


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
    stale_note: str = ""  # stored trials outside the run's expansion and seeds, set aside
    incomplete: str = ""  # the run ended before every trial was stored (``store.incomplete_note``)

    @property
    def regressions(self) -> tuple[GateCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def warnings(self) -> tuple[GateCheck, ...]:
        """Claims whose result changed near their boundary: reported, not failed."""
        return tuple(c for c in self.checks if c.near_boundary)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and not (
            self.regressions or self.missing_in_run or self.failed_trials or self.missing_trials or self.dropped_seeds
            or self.incomplete
        )

    def render(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"gate {plain(f'{self.suite}/{self.profile}/{self.device_class}')} vs {plain(self.baseline_path)}: {verdict} "
            f"({len(self.checks) - len(self.regressions)} of {len(self.checks)} checks within tolerance"
            f"{f', {len(self.warnings)} near the boundary' if self.warnings else ''})"
        ]
        if self.stale_note:
            lines.append(f"  {self.stale_note}")
        if self.incomplete:
            lines.append(f"  {plain(self.incomplete)}")
        if not self.checks:
            lines.append("  NO CHECKS: nothing in this run could be compared with the baseline; a gate that compares "
                         "nothing fails")
        lines += [f"  REGRESSION {c.describe()}" for c in self.regressions]
        lines += [f"  NEAR THE BOUNDARY (warning, not a regression) {c.describe()}" for c in self.warnings]
        lines += [f"  FAILED TRIAL {plain(t)}" for t in self.failed_trials]
        lines += [f"  MISSING TRIAL (in the baseline, not in this run): {plain(t)}" for t in self.missing_trials]
        lines += [f"  MISSING in this run (present in the baseline): {plain(m)}" for m in self.missing_in_run]
        lines += [f"  DROPPED SEED (no finite value in this run; not compared): {plain(d)}" for d in self.dropped_seeds]
        lines += [f"  not in the baseline (not gated; save a new baseline to include): {plain(m)}" for m in self.missing_in_baseline]
        if self.environment_differences:
            differences = "; ".join(self.environment_differences)
            if any(CHECK_KINDS[c.check].float_result for c in self.regressions):
                lines.append(f"  POSSIBLE CAUSE: the baseline was saved on another machine ({differences}); float "
                             "results can change with the CPU's vector ISA, the thread count or the torch build. "
                             "Rerun with the baseline's thread count (--threads) or save a baseline on this machine "
                             "kind before suspecting the code")
            else:
                lines.append(f"  note: baseline from another machine ({differences}); its values held here")
        return "\n".join(lines)


def environment_differences(baseline: Baseline, results: RunResults) -> list[str]:
    """``key 'baseline' vs 'run'`` for each numeric-environment value both record and that differs."""
    return [f"{key} {theirs!r} vs {ours!r}"
            for key, theirs, ours in baseline.environment.differences(BaselineEnvironment.of_run(results))]


def gate(run_dir: Path, baseline_path: Path | None = None, baselines_dir: Path = DEFAULT_BASELINES_DIR) -> GateResult:
    """Compare one run with its baseline (by default the matching file in ``baselines_dir``)."""
    results = load_results(run_dir)
    path = Path(baseline_path) if baseline_path else Path(baselines_dir) / baseline_filename(
        results.suite, results.profile, results.device_class
    )
    baseline = load_baseline(path)
    _refuse_mismatch(baseline, results, path)
    _refuse_other_task_version(baseline, results, path)
    refuse_other_mode(baseline.environment, results, path)
    _refuse_other_executor(baseline, results, path)
    _refuse_other_seed_batch(baseline, results, path)
    tolerances = results.stored.gate
    speed = speed_gated(results)
    stored = {v.identity: v for v in baseline.values}
    not_gated = {identity for identity, v in stored.items() if not speed and _speed_value(results, v)}
    reference = {identity: v for identity, v in stored.items() if identity not in not_gated}
    entries = baseline_values(results)  # evaluates the claims once: their results are in the CLAIM entries
    current = {v.identity for v in entries if speed or not _speed_value(results, v)}

    finished = finished_keys(results)
    failed = {(f.arm_label, f.point_label, f.seed) for f in results.failed}
    expected = baseline.trial_keys()
    missing_trials = [key for key in expected if key not in finished and key not in failed]
    named_trials = failed | set(missing_trials)
    pairs = {f"{v.treatment_label}-vs-{v.control_label}": (v.treatment_label, v.control_label)
             for v in contrast_variants(results)}
    run = GatedRun(results, pairs, {(v.subject, v.point, v.metric): v for v in entries
                                    if CHECK_KINDS[v.check].holds_claim})
    checks: list[GateCheck] = []
    missing_in_run: list[str] = []
    dropped: list[str] = []
    named: set[Identity] = set()  # the values reported as missing or dropped
    explained: set[Identity] = set()  # values lacking only seeds whose trials are named as failed or missing

    def missing(identity: Identity, why: str = "") -> None:
        missing_in_run.append(check_name(identity) + why)
        named.add(identity)

    def drop(identity: Identity, why: str) -> None:
        dropped.append(f"{check_name(identity)}: {why}")
        named.add(identity)

    for identity, entry in reference.items():
        kind = CHECK_KINDS[entry.check]
        seeds = list(entry.seeds or baseline.seeds)
        measured = kind.measure(run, entry, seeds)
        if measured is None:
            missing(identity)
            continue
        lacking = [s for s in seeds if s not in measured.seeds]
        # a seed whose trial is named as missing or failed is not named again per value
        unexplained = [s for s in lacking if not any((label, entry.point, s) in named_trials
                                                     for label in measured.labels)]
        if not lacking and measured.value is not None:
            judged = kind.judge(entry, measured, tolerances)
            checks.append(GateCheck(entry.check, entry.subject, entry.point, entry.metric, entry.value,
                                    measured.value, judged.passed, judged.rule, judged.near_boundary))
        elif not lacking:
            drop(identity, "the control's mean is 0 in this run, no ratio")
        elif not measured.seeds and unexplained:
            missing(identity)
        elif unexplained:
            drop(identity, f"seed(s) {', '.join(map(str, unexplained))} missing or not finite")
        else:
            explained.add(identity)
    # Every baseline value the profile gates ends as a check, a named problem or a value of a trial named as
    # failed or missing; one that got none (a check skipped by mistake) fails the gate instead of shrinking
    # it quietly.
    accounted = {(c.check, c.subject, c.point, c.metric) for c in checks} | named | explained
    for identity in [i for i in reference if i not in accounted]:
        missing(identity, ": in the baseline, but the gate made no check of it")
    return GateResult(
        suite=results.suite,
        profile=results.profile,
        device_class=results.device_class,
        baseline_path=path,
        checks=tuple(checks),
        missing_in_run=tuple(missing_in_run),
        missing_in_baseline=tuple(check_name(key) for key in sorted(current) if key not in reference),
        failed_trials=tuple(f"{f.title}: {f.error}" for f in results.failed),
        missing_trials=tuple(trial_name(key) for key in missing_trials),
        dropped_seeds=tuple(dropped),
        environment_differences=tuple(environment_differences(baseline, results)),
        stale_note=results.stale_note,
        incomplete=results.incomplete,
    )


def _refuse_other_executor(baseline: Baseline, results: RunResults, path: Path) -> None:
    """GateError when a trial ran under another package's executor that the baseline's run did not use: its
    values come from code the baseline never ran. The built-in executors give the same answers bit for bit,
    so any of them gates against any other, and against a baseline saved before executors were recorded."""
    used = set(filter(None, baseline.environment.executor or ()))
    ran = set(filter(None, BaselineEnvironment.of_run(results).executor or ()))
    foreign = sorted(ran - BUILTIN_EXECUTORS - used)
    if foreign:
        raise GateError(
            f"refusing to gate: trials of these results ran under executor {', '.join(map(repr, foreign))}, another "
            f"package's, which baseline {path} did not use (it used {', '.join(sorted(used)) or 'the built-in ones'}); "
            "rerun the suite with a built-in --executor, or save a baseline of this executor"
        )


def _refuse_other_seed_batch(baseline: Baseline, results: RunResults, path: Path) -> None:
    """GateError when the run's trials were trained in seed batches of another size than the baseline's (a
    baseline saved before batches were recorded trained every seed alone): batched kernels reduce in another
    order, so the values may differ in the last bits for that reason alone."""
    theirs = baseline.environment.seed_batch_size or (1,)
    ours = BaselineEnvironment.of_run(results).seed_batch_size or theirs
    if ours != theirs:
        raise GateError(
            f"refusing to gate: these results' trials were trained in seed batches of {sizes_text(ours)}, baseline "
            f"{path}'s in {sizes_text(theirs)}; rerun with the baseline's seed_batch (the suite's or profile's key) "
            "or save a baseline of this one"
        )


def _speed_value(results: RunResults, value: GatedValue) -> bool:
    """A speed ratio, or a claim on a speed metric: what a profile that does not gate speed leaves out."""
    return CHECK_KINDS[value.check].timing(results, value)


def _refuse_mismatch(baseline: Baseline, results: RunResults, path: Path) -> None:
    ours: dict[str, Any] = {"suite": results.suite, "profile": results.profile, "device class": results.device_class,
                            "seeds": sorted(results.seeds)}
    theirs: dict[str, Any] = {"suite": baseline.suite, "profile": baseline.profile,
                              "device class": baseline.device_class, "seeds": sorted(baseline.seeds)}
    if baseline.sweep is not None:  # baselines written before the sweep was recorded name their points in values
        ours["sweep"], theirs["sweep"] = dict(results.stored.sweep), baseline.sweep
    differing = [f"{k} {theirs[k]!r} vs {ours[k]!r}" for k in ours if theirs[k] != ours[k]]
    if differing:
        raise GateError(
            f"refusing to gate: baseline {path} is for another run ({', '.join(differing)} in these results); "
            "use the baseline of the same suite, profile, device class, seeds and sweep"
        )


def _refuse_other_task_version(baseline: Baseline, results: RunResults, path: Path) -> None:
    """A task's version changes when its metrics change meaning: its old values are no yardstick."""
    theirs, ours = baseline.task_version, results.stored.task_version
    if theirs is not None and str(theirs) != str(ours):
        raise GateError(
            f"refusing to gate: baseline {path} was saved with task {baseline.task!r} version {theirs}, these "
            f"results ran version {ours}; save a new baseline from a run of this version"
        )
