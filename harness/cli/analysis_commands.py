"""``harness report``, ``harness baseline save`` and ``harness gate``: decisions from stored results.

Exit codes: 0 success / gate passed, 1 a regression or an incomplete run (one whose last ``harness run``
ended before every trial was stored), 2 a usage error (bad path, missing or mismatched baseline),
reported as one line on stderr without a traceback.
"""
from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import click

from harness.cli.outputs import append_step_summary, output_problem, write_output
from harness.analysis.present import EXPORT_FORMATS
from harness.gating import DEFAULT_BASELINES_DIR
from harness.core.numeric import DETERMINISTIC, MODES, OPTION
from harness.suite.resolved_suite import DEFAULT_PROFILE

# The analysis stack (torch, scipy, matplotlib: seconds to import) loads only when a command runs, so
# that `harness --help` and `harness list` answer at once.

USAGE_ERROR = 2
REGRESSION = 1


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(USAGE_ERROR)


def _check_output(path: Path | None, option: str) -> None:
    """Before any work: an output file that cannot be written is a usage error, not a late crash."""
    problem = output_problem(path, option) if path is not None else None
    if problem:
        _fail(problem)


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path),
              help="Also write the summary (validity and primary claims per suite) to this Markdown file.")
@click.option("--verbose", is_flag=True, help="Print every exploratory row, not only those on key metrics.")
@click.option("--mlflow", "to_mlflow", is_flag=True,
              help="Also fill MLflow from the stored trials (after a --no-mlflow run), rerunning nothing.")
@click.option("--tracking-uri", help="With --mlflow: MLflow tracking URI (default: sqlite:///RESULTS/mlflow.db).")
def report(results: Path, markdown_path: Path | None, verbose: bool, to_mlflow: bool, tracking_uri: str | None) -> None:
    """Rebuild verdict tables, summary JSON and plots from stored RESULTS (nothing is rerun); exit 1 when
    a run is incomplete (its results are reported, marked partial)."""
    if tracking_uri and not to_mlflow:
        _fail("--tracking-uri needs --mlflow")
    _check_output(markdown_path, "--markdown")
    from harness import api

    try:
        reports = api.report(results)
    except api.UsageError as exc:
        _fail(str(exc))
    for built in reports:
        click.echo(built.full_text if verbose else built.text)
        click.echo(f"\nsummary: {built.summary_path}\nforest plots: {', '.join(str(p) for p in built.forest_paths)}"
                   f"\nplots ({len(built.plot_paths)}): {built.report_dir / 'plots'}\n")
    if to_mlflow:
        try:
            for line in api.mirror_reports(reports, results, tracking_uri):
                click.echo(f"MLflow: {line}")
        except api.UsageError as exc:
            _fail(str(exc))
    click.echo(api.phase_table(reports) + "\n")
    text = api.summary(reports)
    if markdown_path is not None:
        write_output(markdown_path, text, "--markdown")
    append_step_summary(text)
    click.echo(text.rstrip("\n"))
    incomplete = [built.analysis.results.incomplete for built in reports if built.analysis.results.incomplete]
    for note in incomplete:
        click.echo(f"error: {note}", err=True)
    if incomplete:
        raise click.exceptions.Exit(REGRESSION)


@click.command()
@click.argument("suite_file", type=click.Path(path_type=Path))
@click.option("--from", "pilot", type=click.Path(path_type=Path),
              help="A results folder holding a pilot run of the suite: plan at the effects it showed.")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="Profile to plan.")
def plan(suite_file: Path, pilot: Path | None, profile: str) -> None:
    """Seeds each primary claim of SUITE_FILE needs: a fixed design's for 80% power, and the sequential
    design's power and expected seeds (nothing is run)."""
    from harness import api

    try:
        plans = api.plan_seeds(suite_file, api.RunOptions(profile=profile), pilot)
    except api.UsageError as exc:
        _fail(str(exc))
    click.echo("\n\n".join(p.render() for p in plans))


@click.group()
def baseline() -> None:
    """Reference results that `harness gate` compares against."""


@baseline.command("save")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_BASELINES_DIR,
              show_default=True, help="Folder for <suite>-<profile>-<device class>.json.")
@click.option(OPTION, "numeric", type=click.Choice(MODES), default=DETERMINISTIC, show_default=True,
              help="The numeric mode the runs must have been made in (fast: either mode); the gate compares a run "
              "only with a baseline of its own mode.")
def baseline_save(results: Path, out_dir: Path, numeric: str) -> None:
    """Save a baseline from every run under RESULTS (none when one of them is refused)."""
    from harness import api

    try:
        paths = api.save_baselines(results, out_dir, numeric)
    except api.UsageError as exc:
        _fail(str(exc))
    for path in paths:
        click.echo(f"baseline written: {path}")


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Baseline file (default: the matching file in --baselines-dir).")
@click.option("--baselines-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_BASELINES_DIR,
              show_default=True, help="Where matching baselines are looked up.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path),
              help="Also write JUnit XML here: one test case per gated check, for CI test reports.")
def gate(results: Path, baseline_file: Path | None, baselines_dir: Path, junit_path: Path | None) -> None:
    """Exit 1 when RESULTS regress against their baseline (quality, bytes, speed ratios); a Markdown
    table of what moved comes last (and goes to $GITHUB_STEP_SUMMARY when set)."""
    _check_output(junit_path, "--junit")
    from harness import api
    from harness.gating import gate_report

    try:
        outcomes = api.gate(results, baseline_file, baselines_dir)
    except api.UsageError as exc:
        _fail(str(exc))
    for outcome in outcomes:
        click.echo(outcome.render())
    if junit_path is not None:
        write_output(junit_path, gate_report.junit_xml(outcomes), "--junit")
    markdown = gate_report.render_markdown(outcomes)
    append_step_summary(markdown)
    click.echo("\n" + markdown.rstrip("\n"))
    if not all(outcome.passed for outcome in outcomes):
        raise click.exceptions.Exit(REGRESSION)


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="csv", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), help="Write the table here [default: CSV on stdout].")
def export(results: Path, fmt: str, out: Path | None) -> None:
    """Stored RESULTS as one table, a row per trial and metric (suite, profile, point, arm, seed, metric,
    value, unit, trial_id, git commit), for pandas or a spreadsheet."""
    if out is None and fmt != "csv":
        _fail(f"--format {fmt} is binary: give --out FILE")
    _check_output(out, "--out")
    from harness import api

    try:
        frame = api.export(results, fmt, out)
    except api.UsageError as exc:
        _fail(str(exc))
    if out is None:
        from harness.analysis.present.trial_table import csv_text

        click.echo(csv_text(frame), nl=False)
    else:
        click.echo(f"{len(frame)} rows written: {out}", err=True)


@click.command()
@click.argument("suite")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True)
@click.option("--tracking-uri", help="MLflow tracking URI (default: sqlite:///RESULTS/mlflow.db).")
@click.option("--results", "results_root", type=click.Path(path_type=Path), default=Path("results"),
              show_default=True, help="Results folder whose embedded MLflow store is read.")
@click.option("--out", type=click.Path(path_type=Path), help="Also draw the claims across runs to this PNG.")
def history(suite: str, profile: str, tracking_uri: str | None, results_root: Path, out: Path | None) -> None:
    """Each claim of SUITE (its name) across its runs in MLflow: commit, date, estimate, interval, result."""
    _check_output(out, "--out")
    from harness import api

    try:
        found = api.history(suite, profile, tracking_uri, results_root, out)
    except api.UsageError as exc:
        _fail(str(exc))
    click.echo(found.text())
    if found.plot is not None:
        click.echo(f"\nplot: {found.plot}")


COMMANDS = (report, plan, baseline, gate, export, history)
