"""The run's last lines: MLflow's share of the time is a share of the time that ran, also when Ctrl-C
left no finished suite to add up."""
from __future__ import annotations

from pathlib import Path

from harness.api import RunResult
from harness.cli.run_commands import _footer
from harness.tracking.mlflow_tracker import MlflowTracker


def test_an_interrupted_run_reports_mlflow_time_against_its_own_wall_time(tmp_path, capsys):
    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=tmp_path / "mlartifacts")
    tracker.seconds = 2.0
    _footer(RunResult(suites=[], seconds=8.0, results=Path(tmp_path), tracker=tracker))  # no suite finished
    assert "(2.00s, 25.0% of suite wall time)" in capsys.readouterr().out
