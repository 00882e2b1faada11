"""The report of one run, rebuilt from stored results alone: text tables, summary JSON, plots.

``build_report(run_dir)`` is what the spine calls at the end of a run (and ``harness report``
calls for stored results); it writes everything under ``<run_dir>/report/`` and returns a
``RunReport`` naming the files, so the caller can print the text and log the files to MLflow.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.decide.run_decisions import RunAnalysis, analyse
from harness.analysis.present.forest_plots import write_forest_plots
from harness.analysis.present.run_costs import Phases, phases, render_allocation, render_phases
from harness.analysis.present.run_plots import write_plots
from harness.analysis.present.summary_json import summary_document
from harness.analysis.present.verdict_tables import render_report
from harness.analysis.run_results import load_results
from harness.store import REPORT_DIR, SUITE_FILE, iter_trial_files, write_json_atomic, write_text_atomic

PLOTS_DIR = "plots"
SUMMARY_JSON_FILE = "summary.json"
TEXT_FILE = "verdicts.txt"


@dataclass(frozen=True)
class RunReport:
    """What ``build_report`` wrote for one ``<suite>/<profile>`` run.

    ``text`` is the terminal report (validity, failed trials, claims, exploratory rows on key
    metrics), ``full_text`` the one in ``verdicts.txt`` (every row); ``summary_path`` the
    machine-readable summary; ``forest_paths`` the forest plots (first) and ``plot_paths`` every
    other PNG, so the spine can log ``artifact_paths`` to MLflow.
    ``valid`` is None when the suite declares no validity controls.
    """

    run_dir: Path
    suite: str
    profile: str
    report_dir: Path
    summary_path: Path
    text_path: Path
    plot_paths: tuple[Path, ...]
    text: str
    valid: bool | None
    failed_trials: int
    analysis: RunAnalysis
    forest_paths: tuple[Path, ...] = ()
    full_text: str = ""
    phases: Phases | None = None  # where the run's time went, this report's building included

    @property
    def artifact_paths(self) -> tuple[Path, ...]:
        return (*self.forest_paths, self.summary_path, self.text_path, *self.plot_paths)


def build_report(run_dir: Path) -> RunReport:
    """Analyse one run folder and write ``report/`` (summary.json, verdicts.txt, forest plots,
    plots/*.png), with where a sequential run stopped each arm and where the run's time went."""
    clock = time.perf_counter()
    results = load_results(Path(run_dir))
    analysis = analyse(results)
    report_dir = results.run_dir / REPORT_DIR
    for folder in (report_dir, report_dir / PLOTS_DIR):
        if folder.is_symlink():  # a received folder's report/ may point anywhere: never written through
            folder.unlink()
    summary_path = report_dir / SUMMARY_JSON_FILE
    text_path = report_dir / TEXT_FILE
    text_path.unlink(missing_ok=True)  # written last: a report killed while drawing is then redrawn by the next run
    forest_paths = write_forest_plots(analysis, report_dir)
    plot_paths = write_plots(results, report_dir / PLOTS_DIR)
    spent = phases(results, time.perf_counter() - clock)
    costs = "\n\n".join(part for part in (render_allocation(results), render_phases(spent)) if part)
    text = render_report(analysis) + "\n\n" + costs
    full_text = render_report(analysis, full=True) + "\n\n" + costs
    relative = [p.relative_to(report_dir).as_posix() for p in plot_paths]
    write_json_atomic(summary_path, summary_document(analysis, relative, [p.name for p in forest_paths]))
    write_text_atomic(text_path, full_text + "\n")
    return RunReport(
        run_dir=results.run_dir,
        suite=results.suite,
        profile=results.profile,
        report_dir=report_dir,
        summary_path=summary_path,
        text_path=text_path,
        plot_paths=tuple(plot_paths),
        text=text,
        valid=analysis.validity.valid,
        failed_trials=len(results.failed),
        analysis=analysis,
        forest_paths=tuple(forest_paths),
        full_text=full_text,
        phases=spent,
    )


def stored_report_text(run_dir: Path) -> str | None:
    """The last report's text if no trial or suite file changed since (a rerun that ran nothing)."""
    text_path = Path(run_dir) / REPORT_DIR / TEXT_FILE
    if not text_path.exists():
        return None
    written = text_path.stat().st_mtime
    inputs = [Path(run_dir) / SUITE_FILE, *iter_trial_files(run_dir)]
    if any(p.stat().st_mtime > written for p in inputs if p.exists()):
        return None
    return text_path.read_text(encoding="utf-8").rstrip("\n")
