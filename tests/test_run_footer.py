"""The run's last lines: MLflow's share of the time is a share of the time that ran, also when Ctrl-C
left no finished suite to add up."""
from __future__ import annotations

from pathlib import Path

from harness.api import RunResult
from harness.cli.run_commands import _footer
from harness.tracking.mlflow_tracker import MODEL_TRAINING_VIEW, MlflowTracker


def test_an_interrupted_run_reports_mlflow_time_against_its_own_wall_time(tmp_path, capsys):
    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=tmp_path / "mlartifacts")
    tracker.seconds = 2.0
    _footer(RunResult(suites=[], seconds=8.0, results=Path(tmp_path), tracker=tracker))  # no suite finished
    assert "(2.00s, 25.0% of suite wall time)" in capsys.readouterr().out


def test_the_run_ends_with_the_mlflow_ui_address_on_its_runs_table(tmp_path, capsys):
    local = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=tmp_path / "mlartifacts")
    _footer(RunResult(suites=[], seconds=1.0, results=Path(tmp_path), tracker=local))
    browse = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("browse: "))
    assert browse.startswith(f"browse: http://127.0.0.1:5000/#/experiments?{MODEL_TRAINING_VIEW}")
    assert browse.endswith(f"(serve it: harness ui --results {tmp_path})")
    server = MlflowTracker.__new__(MlflowTracker)  # only its address is read
    server.uri, server.seconds = "http://mlflow.example:8080/", 0.0
    _footer(RunResult(suites=[], seconds=1.0, results=Path(tmp_path), tracker=server))
    assert f"browse: http://mlflow.example:8080/#/experiments?{MODEL_TRAINING_VIEW}\n" in capsys.readouterr().out
