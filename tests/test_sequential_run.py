"""`harness run` with a sequential design: looks until every claim is decided, resumes from stored
trials, `--seeds` gives a fixed design, and the report, summary.json and MLflow say what happened."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration_task import sequential_suite
from fault_injection import Outcome, harness_here

SUITE = sequential_suite("seq", {"b": 2.5, "c": 0.0})


def run(suite: Path, results: Path, *extra: str) -> Outcome:
    done = harness_here("run", str(suite), "--results", str(results), *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.integration
def test_a_sequential_run_stops_when_every_claim_is_decided_and_resumes_from_stored_trials(tmp_path):
    suite = tmp_path / "seq.yaml"
    suite.write_text(SUITE)
    results = tmp_path / "r"
    first = run(suite, results, "--no-mlflow")
    run_dir = results / "seq" / "default"
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    design = summary["sequential"]
    used = design["seeds_used"]
    assert 3 <= used < 12 and summary["seeds"] == list(range(used))
    assert json.loads((run_dir / "suite.json").read_text())["seeds"] == list(range(used))
    clear, null = summary["claims"]
    assert clear["result"] == "pass" and clear["n"] <= used and clear["boundary_t"] > 0
    assert null["result"] in ("futile", "fail", "inconclusive") and null["look"] <= design["looks_taken"]
    assert "every claim decided" in first.stdout + first.stderr
    assert "repeated 95% CI" in (run_dir / "report" / "verdicts.txt").read_text()
    # an interrupt after the last look's first trial: only its missing trials run again, to the same decisions
    # (the last look runs the arms an open claim reads: b, decided early, stopped)
    last_seed = used - 1
    stored = sorted((run_dir / "trials").glob("*.json"))
    lost = [p for p in stored if json.loads(p.read_text())["seed"] == last_seed and json.loads(p.read_text())["arm"] != "a"]
    assert lost
    for path in lost:
        path.unlink()
    again = run(suite, results, "--no-mlflow")
    assert f"{len(lost)} ran, {len(stored) - len(lost)} already finished" in again.stdout
    resumed = json.loads((run_dir / "report" / "summary.json").read_text())
    assert [(c["result"], c["n"]) for c in resumed["claims"]] == [(c["result"], c["n"]) for c in summary["claims"]]


@pytest.mark.integration
def test_seeds_option_gives_a_fixed_design_and_mlflow_records_the_design(tmp_path):
    suite = tmp_path / "seq.yaml"
    suite.write_text(SUITE)
    run(suite, tmp_path / "fixed", "--no-mlflow", "--seeds", "0,1,2,3")
    summary = json.loads((tmp_path / "fixed" / "seq" / "default" / "report" / "summary.json").read_text())
    assert summary["sequential"] is None and summary["seeds"] == [0, 1, 2, 3]
    assert all(c["n"] == 4 for c in summary["claims"])

    results = tmp_path / "tracked"
    run(suite, results)
    import mlflow  # the real store the run wrote

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name != "Default"]
    parents = [r for r in client.search_runs([experiment.experiment_id]) if "harness.design" in r.data.tags]
    assert parents, "no parent run carries the design"
    tags = parents[0].data.tags
    used = json.loads((results / "seq" / "default" / "report" / "summary.json").read_text())["sequential"]["seeds_used"]
    assert tags["harness.design"].startswith("sequential obrien_fleming") and tags["harness.design.seeds_used"] == str(used)
