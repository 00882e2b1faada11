"""Stored trials as one table for notebooks: a row per trial and metric (a long, tidy frame).

Read from the results store, not MLflow, so it works offline and on any copy of a results
folder. Failed trials have no metric values and so no rows; the suite's verdicts are in its
report, not here.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from harness.analysis.run_results import load_results
from harness.core.trial_environment import TrialEnvironment
from harness.store import write_atomic

if TYPE_CHECKING:
    import pandas

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula (OWASP)
COLUMNS = ("suite", "profile", "point", "arm", "arm_label", "seed", "metric", "value", "unit", "kind", "trial_id",
           "git_commit", "task", "task_version")


def export_frame(run_dirs: Sequence[Path]) -> "pandas.DataFrame":
    """Every finished trial's final metrics under the given run folders, one row each."""
    import pandas

    rows = []
    for run_dir in run_dirs:
        results = load_results(run_dir)
        for trial in results.finished:
            for metric, value in sorted(trial.metrics.items()):
                spec = results.spec_for(metric)
                rows.append({
                    "suite": trial.suite, "profile": trial.profile, "point": trial.point_label,
                    "arm": trial.arm, "arm_label": trial.arm_label, "seed": trial.seed, "metric": metric,
                    "value": value, "unit": spec.unit, "kind": spec.kind,
                    "trial_id": trial.trial_id, "git_commit": TrialEnvironment.of(trial.environment).git_commit,
                    "task": trial.task, "task_version": trial.task_version,
                })
    frame = pandas.DataFrame(rows, columns=list(COLUMNS)).astype({"seed": "int64", "value": "float64"})
    order = ["suite", "profile", "point", "arm_label", "seed", "metric"]
    return frame.sort_values(order, kind="stable").reset_index(drop=True)


def inert(frame: "pandas.DataFrame") -> "pandas.DataFrame":
    """The frame as a spreadsheet may open it. Metric keys, labels, units and commits come from a received
    folder and may read ``=HYPERLINK(...)``: every text cell starting like a formula gets a leading single
    quote, as OWASP's CSV-injection guidance says. Numbers (a negative value, a seed) stay numbers."""
    from pandas.api.types import is_numeric_dtype

    escaped = frame.copy()
    for column in [c for c in frame.columns if not is_numeric_dtype(frame[c])]:
        escaped[column] = frame[column].map(
            lambda cell: "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_START) else cell)
    return escaped


def csv_text(frame: "pandas.DataFrame") -> str:
    """The table as CSV, inert in a spreadsheet: formulas escaped (``inert``) and every text cell quoted, so
    that a carriage return inside one cannot start a row whose first cell is a formula."""
    return inert(frame).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def write_frame(frame: "pandas.DataFrame", path: Path, fmt: str) -> None:
    """Write atomically: a reader (or a failure) never sees half a table. CSV is made inert (``inert``);
    parquet keeps its typed cells as stored, for programs, not spreadsheets."""
    if fmt == "parquet":
        write_atomic(Path(path), lambda handle: frame.to_parquet(handle, index=False))
    else:
        write_atomic(Path(path), lambda handle: handle.write(csv_text(frame).encode("utf-8")))
