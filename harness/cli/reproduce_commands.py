"""``harness reproduce`` and ``harness compare``: prove a logged result here, and see what moves.

Exit codes: 0 reproduced / no primary claim changed, 1 a metric differs on the same device
class, a trial failed, or a primary claim's result changed; 2 a usage error (unknown run id,
not a harness run, missing artifact, different suites), one line on stderr, nothing written.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import NoReturn

import click

from harness.core import numeric

USAGE_ERROR = 2
DIFFERS = 1


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(USAGE_ERROR)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


@click.command()
@click.argument("target")
@click.option("--tracking-uri", help="MLflow store holding a run id TARGET, and where the reproduction is logged "
              "[default: where the results folder says it was logged, else sqlite:///RESULTS/mlflow.db].")
@click.option("--results", "results_root", type=click.Path(file_okay=False, path_type=Path),
              help="Results root [default: the one TARGET lies in, else ./results].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="New folder for the rerun [default: RESULTS/reproductions/<suite>-<profile>-<UTC time>].")
@click.option("--device", "device_choice", type=click.Choice(["recorded", "auto", "cpu", "cuda"]), default="recorded",
              show_default=True, help="recorded: the device type the original ran on.")
@click.option("--no-mlflow", is_flag=True, help="Do not log the reproduction to MLflow.")
@click.option("--task-path", "task_paths", multiple=True, metavar="MODULE:CLASS",
              help="Trust this task path when the records name it (repeatable). Without it, only tasks registered by "
              "installed packages are imported: a record's task is never imported from TARGET's folder or the "
              "current one.")
@click.option(numeric.OPTION, "numeric_mode", type=click.Choice(numeric.MODES), default=numeric.DETERMINISTIC,
              show_default=True,
              help="The numeric mode to rerun in (see harness run --help): a run recorded in the other mode "
              "(its numeric_mode) computes other floats.")
@click.option("--seed-batch", type=click.IntRange(1, 64), default=None,
              help="Rerun the seeds of each arm and point in batches of this size where the task trains seeds as one "
              "model (a what-if: values may then differ in the last bits; compare them with harness compare --trials) "
              "[default: the batches each trial was recorded in].")
def reproduce(target: str, tracking_uri: str | None, results_root: Path | None, out: Path | None,
              device_choice: str, no_mlflow: bool, task_paths: tuple[str, ...], numeric_mode: str,
              seed_batch: int | None) -> None:
    """Rerun a recorded result and check it bit for bit.

    TARGET is an MLflow run id (a suite run or one trial run, from the MLflow UI), a
    <suite>/<profile> results folder, or one trial JSON. Prints every difference between the
    recorded environment and this one, reruns every trial into a new folder, and compares: every
    metric but speed must be bit-identical on the same device class (exit 1 naming each that is
    not); speed is shown as ratios. The reproduction is logged to MLflow with the tag
    harness.reproduction_of = the original run id.
    """
    from harness import api
    from harness.reproduction.reproduction_text import render_outcome, render_plan
    from harness.reproduction.reproduce import regressed

    try:
        numeric.apply(numeric_mode)
    except numeric.NumericModeError as exc:
        _fail(str(exc))
    try:
        plan = api.plan_reproduction(target, tracking_uri, results_root, out, device_choice, not no_mlflow, task_paths,
                                     seed_batch)
    except api.UsageError as exc:
        _fail(str(exc))
    click.echo(render_plan(plan))
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        outcome = api.reproduce(plan)
    except api.UsageError as exc:
        _fail(str(exc))
    click.echo(render_outcome(plan, outcome))
    if outcome.interrupted:
        raise SystemExit(130)
    if regressed(plan, outcome):
        raise SystemExit(DIFFERS)


@click.command()
@click.argument("results_a", metavar="RESULTS_A", type=click.Path(path_type=Path))
@click.argument("results_b", metavar="RESULTS_B", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for compare-<suite>.png and .json [default: RESULTS_B/compare].")
@click.option("--all", "all_metrics", is_flag=True, help="Show every metric, not only the key ones.")
@click.option("--trials", "by_trial", is_flag=True,
              help="Instead: every trial's values but speed, bit for bit, matched by (suite, arm, point, seed); "
                   "exit 1 when any differs or a trial ran on one side only. Writes nothing.")
def compare(results_a: Path, results_b: Path, out: Path | None, all_metrics: bool, by_trial: bool) -> None:
    """Two runs of the same suite: every verdict or claim that changed, then each metric's shift.

    RESULTS_A and RESULTS_B are <suite>/<profile> folders, or results roots holding the same
    suites. Per arm and metric: B - A with its interval over seeds (paired by seed when both ran
    the same seeds, else Welch). Exit 1 when a primary claim's result changed (not near its boundary)
    or its estimate moved beyond its tolerance.
    """
    from harness import api
    from harness.analysis.compare.comparison_text import render_comparison

    if by_trial:
        _compare_trials(results_a, results_b)
        return
    try:
        written = api.compare(results_a, results_b, out)
    except api.UsageError as exc:
        _fail(str(exc))
    changed = False
    incomplete = []  # a side whose last run ended early: its numbers are partial, so is what changed
    for comparison, summary, plot in written:
        click.echo(render_comparison(comparison, all_metrics))
        click.echo(f"\nsummary: {summary}" + (f"\nplot: {plot}" if plot else "") + "\n")
        changed = changed or comparison.claim_changed
        incomplete += [f"{side}: {run.incomplete}" for side, run in (("A", comparison.a), ("B", comparison.b))
                       if run.incomplete]
    for note in incomplete:
        click.echo(f"error: {note}", err=True)
    if changed:
        click.echo("a primary claim changed from A to B (its result, or its estimate beyond its tolerance)")
    if changed or incomplete:
        raise SystemExit(DIFFERS)


def _compare_trials(results_a: Path, results_b: Path) -> None:
    from harness import api
    from harness.analysis.present.markdown_tables import plain
    from harness.reproduction.trial_values import render_trial_values

    try:
        suites = api.compare_trials(results_a, results_b)
    except api.UsageError as exc:
        _fail(plain(exc))  # it may quote a folder's names: no control character reaches the terminal
    click.echo(render_trial_values(suites))
    if not all(suite.identical for suite in suites):
        raise SystemExit(DIFFERS)
    click.echo("every trial's values but speed are bit-identical")


COMMANDS = (reproduce, compare)
