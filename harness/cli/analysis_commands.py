"""``harness report``, ``harness baseline save`` and ``harness gate``: decisions from stored results.

Exit codes: 0 success / gate passed, 1 a regression, 2 a usage error (bad path, missing or
mismatched baseline), reported as one line on stderr without a traceback.
"""
from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import click

from harness.analysis.report import build_report
from harness.analysis.results import ResultsError
from harness.gating import DEFAULT_BASELINES_DIR, GateError, gate as gate_run, save_baselines
from harness.store import iter_runs

USAGE_ERROR = 2
REGRESSION = 1


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(USAGE_ERROR)


def _runs(results: Path) -> list[Path]:
    """Run folders under a results root, or the one ``<suite>/<profile>`` folder given."""
    if not results.exists():
        _fail(f"{results} does not exist")
    runs = iter_runs(results)
    if not runs:
        _fail(f"no stored results under {results} (expected <suite>/<profile>/suite.json)")
    return runs


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
def report(results: Path) -> None:
    """Rebuild verdict tables, summary JSON and plots from stored RESULTS (nothing is rerun)."""
    for run_dir in _runs(results):
        try:
            built = build_report(run_dir)
        except ResultsError as exc:
            _fail(str(exc))
        click.echo(built.text)
        click.echo(f"\nsummary: {built.summary_path}\nplots ({len(built.plot_paths)}): {built.report_dir / 'plots'}\n")


@click.group()
def baseline() -> None:
    """Reference results that `harness gate` compares against."""


@baseline.command("save")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_BASELINES_DIR,
              show_default=True, help="Folder for <suite>-<profile>-<device class>.json.")
def baseline_save(results: Path, out_dir: Path) -> None:
    """Save a baseline from every run under RESULTS (none when one of them is refused)."""
    try:
        paths = save_baselines(_runs(results), out_dir)
    except (GateError, ResultsError) as exc:
        _fail(str(exc))
    for path in paths:
        click.echo(f"baseline written: {path}")


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Baseline file (default: the matching file in --baselines-dir).")
@click.option("--baselines-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_BASELINES_DIR,
              show_default=True, help="Where matching baselines are looked up.")
def gate(results: Path, baseline_file: Path | None, baselines_dir: Path) -> None:
    """Exit 1 when RESULTS regress against their baseline (quality, bytes, speed ratios)."""
    runs = _runs(results)
    if baseline_file is not None and len(runs) > 1:
        _fail(f"--baseline names one file but {results} holds {len(runs)} runs; give one <suite>/<profile> folder")
    regressed = False
    for run_dir in runs:
        try:
            outcome = gate_run(run_dir, baseline_file, baselines_dir)
        except (GateError, ResultsError) as exc:
            _fail(str(exc))
        click.echo(outcome.render())
        regressed = regressed or not outcome.passed
    if regressed:
        raise click.exceptions.Exit(REGRESSION)


COMMANDS = (report, baseline, gate)
