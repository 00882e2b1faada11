"""`harness history`: each claim of a suite across its parent runs in a real SQLite MLflow store."""
from __future__ import annotations

import mlflow
import pytest
from click.testing import CliRunner

from harness import api
from harness.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def history(*args) -> object:
    return CliRunner().invoke(main, ["history", *map(str, args)])


@pytest.mark.integration  # trains the toy suite twice and logs both runs to MLflow
def test_history_lists_and_draws_each_claim_over_two_runs(tmp_path, toy_suite):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    runs = [api.run(toy_suite, api.RunOptions(profile="smoke", seeds=seeds, results=tmp_path / name,
                                               tracking_uri=uri, executor="serial"))
            for name, seeds in (("first", [0, 1]), ("second", [0, 1, 2]))]
    client = mlflow.MlflowClient(uri)
    logged = [client.get_run(r.suites[0].outcome.parent_run_id) for r in runs]
    claim = "claim/momentum-vs-sgd/accuracy/features_4"
    estimates = [run.data.metrics[f"{claim}/estimate"] for run in logged]

    out = tmp_path / "history.png"
    result = history("toy", "--profile", "smoke", "--tracking-uri", uri, "--out", out)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("momentum-vs-sgd/accuracy/")]
    assert len(rows) == 2  # the claim, once per run, oldest first
    commit = logged[0].data.tags["harness.git_commit"][:10]
    for row, run, estimate in zip(rows, logged, estimates):
        assert row[3].startswith(commit) and row[-1] == run.info.run_id[:12]
        assert row[4] == run.data.tags["harness.task_git_commit"][:10] + "+dirty" * (
            run.data.tags["harness.task_git_dirty"] == "true")  # the toy task's own checkout (here the harness's)
        assert float(row[5]) == pytest.approx(estimate, rel=1e-3)  # printed to 4 significant digits
        assert row[-3] == run.data.tags["harness.claim/momentum-vs-sgd/accuracy/features_4"]
    assert out.read_bytes().startswith(PNG_SIGNATURE) and out.stat().st_size > 5000

    found = api.history("toy", "smoke", uri)  # the same points as data
    assert sorted({p.claim for p in found.points}) == ["momentum-vs-sgd/accuracy/features_4",
                                                       "momentum-vs-sgd/param_bytes/features_4"]
    assert [p.seeds for p in found.points if p.claim.endswith("accuracy/features_4")] == [2, 3]

    for args in (["nope"], ["toy", "--profile", "default"], ["toy", "--out", tmp_path]):
        before = sorted(tmp_path.rglob("*.png"))
        refused = history(*args, "--tracking-uri", uri)
        assert refused.exit_code == 2 and refused.output.count("\n") == 1 and refused.output.startswith("error: ")
        assert sorted(tmp_path.rglob("*.png")) == before


def test_history_without_a_store_is_refused_without_creating_one(tmp_path):
    result = history("toy", "--results", tmp_path / "results", "--out", tmp_path / "h.png")
    assert result.exit_code == 2 and "no MLflow store" in result.output and result.output.count("\n") == 1
    assert not list(tmp_path.rglob("*"))
