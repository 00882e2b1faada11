"""The terminal text of a reproduction: what differs before the rerun, what came back after it."""
from __future__ import annotations

from collections import defaultdict

from harness.analysis.compare.environment_diff import Difference
from harness.reproduction.metric_checks import MetricComparison, geometric_mean
from harness.reproduction.reproduce import Plan, ReproductionOutcome, differing_keys, regressed, result_word
from harness.core.terminal import format_table
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.tracking.mlflow_tracker import redacted


def render_plan(plan: Plan) -> str:
    """The target, the device, and every recorded-vs-here difference of environment and packages."""
    original = plan.original
    threads = sorted(set(plan.threads.values()))
    lines = [
        f"reproduce: {original.description}",
        f"  suite {original.suite}, profile {original.profile}, {len(plan.trials)} trial(s); "
        f"device {plan.device} (recorded {plan.recorded_device}), torch threads {', '.join(map(str, threads))} (as recorded)",
    ]
    lines.append(_code_line(original.records[0].environment, plan.here))
    if original.stale:
        lines.append(f"  warning: {original.stale} stored trial(s) are not of the suite's expansion and seeds (a param, "
                     "sweep, arm or seed changed since they ran): set aside, not rerun")
    if original.incomplete:
        lines.append(f"  warning: {original.incomplete}; only the trials it stored are rerun")
    if original.skipped:
        lines.append(f"  {original.skipped} failed trial(s) in the record are not rerun (they have no result)")
    if plan.device_note:
        lines.append(f"  note: {plan.device_note}; metrics are compared but cannot fail across device classes")
    lines.append(_differences("environment", plan.environment_differences, "same as recorded"))
    lines.append(_differences("packages", plan.package_differences, "same versions as recorded"))
    lines.append(f"rerunning into {plan.out_root}")
    lines.append(_logging_to(plan))
    lines += [f"note: {note}" for note in plan.notes]
    return "\n".join(lines)


def _code_line(recorded: dict[str, str], here: dict[str, str]) -> str:
    """The harness's commit and the task checkout's, as recorded and here."""
    return (f"  code: harness {_harness_revision(recorded)} (here {_harness_revision(here)}), "
            f"task {_task_revision(recorded)} (here {_task_revision(here)})")


def _harness_revision(environment: dict[str, str]) -> str:
    harness = TrialEnvironment.of(environment)
    return _revision(harness.git_commit, harness.git_dirty)


def _task_revision(environment: dict[str, str]) -> str:
    task = TaskEnvironment.of(environment)
    return _revision(task.task_git_commit, task.task_git_dirty)


def _revision(commit: str, dirty: bool | None) -> str:
    """'<commit[:10]>[+dirty]' of a checkout ('none' outside git, 'unknown' unrecorded)."""
    commit = commit or "unknown"
    short = commit if commit in ("unknown", "none") else commit[:10]
    return short + ("+dirty" if dirty else "")


def _logging_to(plan: Plan) -> str:
    """Where the reproduction (with this checkout's git diff) will be logged, and where it will not."""
    if plan.tracker is None:
        return "logging to MLflow: no (--no-mlflow)"
    line = f"logging to MLflow at {redacted(plan.tracker.uri)}"
    recorded = plan.original.tracking_uri
    if recorded and redacted(recorded) != redacted(plan.tracker.uri):
        line += f" (the original was logged to {redacted(recorded)}; give --tracking-uri to log there)"
    return line


def render_outcome(plan: Plan, outcome: ReproductionOutcome) -> str:
    """Each differing metric, speed ratios, then one verdict line."""
    comparison = outcome.comparison
    lines = [_exact(comparison), *_speed(comparison)]
    if outcome.parent_run_id and plan.tracker is not None:
        link = plan.original.linked_runs or "(the original was never logged to MLflow)"
        lines.append(f"logged: MLflow run {outcome.parent_run_id} in {redacted(plan.tracker.uri)}, "
                     f"harness.reproduction_of = {link}")
    lines.append(f"results: {outcome.run_dir}\nsummary: {outcome.summary_path}")
    lines.append(verdict(plan, outcome))
    return "\n".join(lines)


def verdict(plan: Plan, outcome: ReproductionOutcome) -> str:
    seconds = f"{outcome.seconds:.1f}s"
    comparison = outcome.comparison
    word = result_word(plan, outcome)
    if word == "interrupted":
        return f"INTERRUPTED after {seconds}: {len(outcome.records)} of {len(plan.trials)} trial(s) rerun"
    if word == "identical" and not outcome.failed:
        return (f"REPRODUCED: {len(comparison.exact)} metric values of {len(plan.trials)} trial(s) bit-identical "
                f"({seconds})")
    problems = []
    if comparison.differing:
        problems.append(f"{len(comparison.differing)} metric value(s) differ: {', '.join(differing_keys(comparison))}")
    if comparison.status_changes:
        problems.append(f"{len(comparison.status_changes)} trial(s) failed here")
    head = "NOT REPRODUCED" if regressed(plan, outcome) else "DIFFERENT DEVICE CLASS (not a failure)"
    return f"{head}: {'; '.join(problems)} ({seconds})"


def _differences(what: str, differences: list[Difference], same: str) -> str:
    if not differences:
        return f"{what}: {same}"
    rows = [[d.key, d.recorded, d.here] for d in differences]
    table = format_table([what, "recorded", "here"], rows)
    return f"{what}: {len(differences)} difference(s)\n" + _indent(table)


def _exact(comparison: MetricComparison) -> str:
    trials = len({c.trial_id for c in comparison.exact})
    head = f"metrics other than speed, bit for bit: {len(comparison.exact)} value(s) of {trials} trial(s)"
    parts = []
    if comparison.differing:
        rows = [[c.trial, c.key, c.kind, repr(c.recorded), repr(c.reproduced), _signed(c)] for c in comparison.differing]
        parts.append(f"{head}, {len(comparison.differing)} DIFFER\n"
                     + _indent(format_table(["trial", "metric", "kind", "recorded", "reproduced", "difference"], rows)))
    else:
        parts.append(f"{head}, all identical")
    if comparison.status_changes:
        rows = [[d.key, d.recorded, d.here] for d in comparison.status_changes]
        parts.append("trials whose status changed:\n" + _indent(format_table(["trial", "recorded", "reproduced"], rows)))
    if comparison.not_rerun:
        parts.append(f"not rerun: {', '.join(comparison.not_rerun)}")
    return "\n".join(parts)


def _speed(comparison: MetricComparison) -> list[str]:
    """Per speed key: the reproduced / recorded ratio over trials (geometric mean, range)."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for check in comparison.speed:
        if check.ratio is not None:
            ratios[check.key].append(check.ratio)
    if not ratios:
        return []
    rows = []
    for key, values in ratios.items():
        mean = geometric_mean(values)
        rows.append([key, str(len(values)), "-" if mean is None else f"{mean:.3f}", f"{min(values):.3f}", f"{max(values):.3f}"])
    return ["speed, reproduced / recorded (no pass or fail; per trial in the summary):\n"
            + _indent(format_table(["metric", "trials", "ratio (geo. mean)", "min", "max"], rows))]


def _signed(check) -> str:
    if check.recorded is None or check.reproduced is None:
        return "-"
    return f"{check.reproduced - check.recorded:+.6g}"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
