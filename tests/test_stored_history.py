"""After a `--no-mlflow` run, `harness history` and `harness export` read the stored trials, and
`harness report --mlflow` fills MLflow from them without rerunning anything."""
from __future__ import annotations

import csv
import io

import pytest
from click.testing import CliRunner

from harness import api
from harness.cli import main


def cli(*args) -> object:
    return CliRunner().invoke(main, [*map(str, args)])


@pytest.fixture
def stored(tmp_path, toy_suite):
    results = tmp_path / "results"
    done = api.run(toy_suite, api.RunOptions(profile="smoke", seeds=[0, 1], results=results, mlflow=False,
                                             executor="serial", threads=1))
    assert done.exit_code == 0 and not (results / "mlflow.db").exists()
    return results


def test_history_and_export_read_the_stored_trials_without_an_mlflow_store(stored):
    found = cli("history", "toy", "--profile", "smoke", "--results", stored)
    assert found.exit_code == 0, found.output
    assert "1 run(s) in the stored trials of" in found.output and "harness report" in found.output
    rows = [line.split() for line in found.output.splitlines() if line.startswith("momentum-vs-sgd/")]
    assert [row[0] for row in rows] == ["momentum-vs-sgd/accuracy/features_4", "momentum-vs-sgd/param_bytes/features_4"]
    assert all(row[-2] == "2" and row[-1] == "stored" for row in rows)  # two seed pairs, the stored run
    exported = cli("export", stored)
    assert exported.exit_code == 0, exported.output
    table = list(csv.DictReader(io.StringIO(exported.output)))
    assert {row["seed"] for row in table} == {"0", "1"} and {row["arm"] for row in table} >= {"sgd", "momentum"}
    assert not (stored / "mlflow.db").exists()
    missing = cli("history", "nope", "--results", stored)
    assert missing.exit_code == 2 and missing.output.startswith("error: no MLflow store") and "'nope'" in missing.output


@pytest.mark.integration  # logs to a real SQLite MLflow store
def test_report_mlflow_fills_the_store_from_stored_trials_once(stored):
    trials = sorted(p.stat().st_mtime_ns for p in (stored / "toy" / "smoke" / "trials").glob("*.json"))
    filled = cli("report", stored, "--mlflow")
    assert filled.exit_code == 0, filled.output
    assert "MLflow: toy/smoke: 6 stored trial(s) in MLflow under a new parent run with the run's claims" in filled.output
    found = api.history("toy", "smoke", results=stored)
    assert found.uri.startswith("sqlite:") and {p.seeds for p in found.points} == {2}
    assert len({p.run_id for p in found.points}) == 1
    again = cli("report", stored, "--mlflow")
    assert "MLflow: toy/smoke: every stored trial already in MLflow; nothing logged" in again.output
    assert sorted(p.stat().st_mtime_ns for p in (stored / "toy" / "smoke" / "trials").glob("*.json")) == trials
    refused = cli("report", stored, "--tracking-uri", "sqlite:///x.db")
    assert refused.exit_code == 2 and refused.output == "error: --tracking-uri needs --mlflow\n"
