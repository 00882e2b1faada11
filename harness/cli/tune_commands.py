"""`harness tune`: each tuned arm's grid on the tuning seeds, and the lock `harness run` then applies."""
from __future__ import annotations


import click

from harness.cli.run_commands import (ExecutorCommand, _fail, execution_options, install_interrupts, redesign_option,
                                      suite_argument)
from harness.suite.resolved_suite import DEFAULT_PROFILE


@click.command(cls=ExecutorCommand)
@suite_argument
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True,
              help="Tune at this profile's params (the seeds are the tune block's).")
@execution_options
@redesign_option
def tune(suite_file, profile, results_root, tracking_uri, device, no_resume, no_mlflow, executor_name,
         executor_options, threads, numeric, trial_timeout, max_trials, max_nodes, redesign) -> None:
    """Run every tuned arm of SUITE.yaml over its grid on the tuning seeds, choose each arm's best point by
    its mean, and write <suite>.tuned.json (and a plot) beside the suite file: commit it, `harness run` uses it."""
    from harness import api
    from harness.core.devices import device_name
    from harness.core.terminal import Console

    options = api.RunOptions(
        profile=profile, results=results_root, tracking_uri=tracking_uri, mlflow=not no_mlflow, device=device,
        resume=not no_resume, executor=executor_name, executor_options=executor_options,
        threads=threads, numeric=numeric, trial_timeout=trial_timeout, max_trials=max_trials, max_nodes=max_nodes,
        redesign=redesign,
    )
    console = Console()

    def started(device_used) -> None:
        install_interrupts()
        console.line(f"device: {device_used} ({device_name(device_used)})")

    try:
        outcome = api.tune(suite_file, options, console=console, on_suite=lambda tuned: console.out(_tuned_text(tuned)),
                           on_started=started, warn=lambda line: click.echo(line, err=True))
    except api.UsageError as exc:
        _fail(str(exc))
    raise SystemExit(outcome.exit_code)


def _tuned_text(tuned) -> str:
    """Each arm's grid (mean over the tuning seeds) with its choice, and where the lock went."""
    suite, spec, run = tuned.suite, tuned.suite.tune, tuned.run
    lines = [f"\n== {suite.name} tuning ({suite.profile}) — {run.ran} ran, {run.skipped} already finished"
             + (f", {len(run.failed)} FAILED" if run.failed else "") + f", {run.wall_seconds:.1f}s",
             f"   {spec.metric} ({suite.task.metric_for(spec.metric).direction} is better), mean over tuning seeds "
             f"{', '.join(map(str, spec.seeds))}"]
    for arm, grid in tuned.grids.items():
        cells = []
        for point in grid.points:
            value = "failed" if point.mean is None else f"{point.mean:.4g}"
            mark = " *" if point is grid.chosen else ""
            cells.append(f"{', '.join(f'{k}={v}' for k, v in point.params.items())}: {value}{mark}")
        lines.append(f"   {arm}: " + "; ".join(cells))
    for arm, kept in tuned.kept.items():
        if kept:
            lines.append(f"   {arm} sets {', '.join(f'{k}={v}' for k, v in kept.items())} itself and keeps it")
    for arm, axes in tuned.edges.items():
        lines.append(f"   warning: {arm}'s choice is on the edge of its grid ({'; '.join(axes)}): extend the grid on "
                     "the tuning seeds before a confirmatory run (`harness register` refuses a lock like this)")
    if tuned.lock is not None:
        lines.append(f"lock: {tuned.lock} (chosen: *; commit it: `harness run` applies it)\nplot: {tuned.plot}")
    elif tuned.unchosen:
        lines.append(f"no lock written: no grid point of {', '.join(tuned.unchosen)} finished on every tuning seed")
    return "\n".join(lines)


COMMANDS = (tune,)
