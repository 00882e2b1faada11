"""What a person browsing MLflow sees: the suite run's description answers first, trial runs span the
trial's own time, each trial names its workload as a dataset, MLflow's Source and User columns are
filled, each claimed metric is one chartable series, and informational zeros stay out of the charts.
All against a real SQLite store."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import mlflow
import pytest
from test_summary_forest import toy_run

from harness import api
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.run_results import load_results
from harness.store import iter_trial_files, read_trial
from harness.tracking.claim_metrics import claim_tags, parent_metrics, tracking_tags
from harness.tracking.mlflow_tracker import ARMS_VIEW, ARMS_VIEW_TAG, NOTE_TAG, MlflowTracker, TrialRun
from harness.tracking.run_description import NOTE_CHARS, fitted
from harness.tracking.trial_view import TrialView
from records import make_record

COMMIT = "ab" * 20


def tracker_at(tmp_path) -> MlflowTracker:
    return MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=tmp_path / "mlartifacts")


def logged(tmp_path, tracker: MlflowTracker, record, view: TrialView = TrialView()):
    """The MLflow run of ``record``, logged under a fresh parent."""
    parent = tracker.client.create_run(tracker.experiment_id(record.suite)).info.run_id
    trial_file = tmp_path / f"{record.trial_id}.json"
    trial_file.write_text("{}")
    run_id = tracker.log_trial(parent, record, trial_file, tmp_path / "markers" / f"{record.trial_id}.json", view=view)
    return tracker.client.get_run(run_id)


def test_a_trial_run_spans_the_trials_own_start_and_end(tmp_path):
    started = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)
    record = make_record("t1", started_at=started.isoformat(), wall_seconds=75.3)
    run = logged(tmp_path, tracker_at(tmp_path), record)
    assert run.info.start_time == int(started.timestamp() * 1000)
    assert abs((run.info.end_time - run.info.start_time) / 1000 - 75.3) < 1.0  # Duration is the trial's
    end = started + timedelta(seconds=75.3)
    assert abs(run.info.end_time - end.timestamp() * 1000) < 1000


def test_each_trial_logs_its_workload_as_a_dataset_shared_by_the_arms_of_a_seed(tmp_path):
    tracker = tracker_at(tmp_path)
    view = TrialView(arm_keys=frozenset({"momentum"}))
    common = {"steps": 60, "features": 4}
    runs = [logged(tmp_path, tracker, make_record(trial_id, arm=arm, seed=seed, params={**common, "momentum": m},
                                                  environment={"task_code_sha256": "c" * 64}), view)
            for trial_id, arm, seed, m in (("a0", "sgd", 0, 0.0), ("b0", "momentum", 0, 0.9), ("a1", "sgd", 1, 0.0))]
    datasets = [run.inputs.dataset_inputs[0].dataset for run in runs]
    assert datasets[0].digest == datasets[1].digest != datasets[2].digest  # the pair shares its data
    assert datasets[0].name == "synth seed=0" and datasets[2].name == "synth seed=1"
    assert '"steps": "60"' in datasets[0].profile and "momentum" not in datasets[0].profile
    assert '"task_code_sha256"' in datasets[0].source
    other_code = make_record("a0x", arm="sgd", seed=0, params={**common, "momentum": 0.0},
                             environment={"task_code_sha256": "d" * 64})
    assert view.workload(other_code).digest != datasets[0].digest  # new task code, new data


def test_trial_runs_carry_mlflows_source_and_user_tags(tmp_path):
    record = make_record("t1", environment={"git_commit": COMMIT})
    run = logged(tmp_path, tracker_at(tmp_path), record, TrialView(source="suites/toy.yaml"))
    tags = run.data.tags
    assert tags["mlflow.source.git.commit"] == COMMIT and tags["mlflow.source.name"] == "suites/toy.yaml"
    assert tags["mlflow.user"] and tags["mlflow.source.type"] == "LOCAL"
    unknown = logged(tmp_path, tracker_at(tmp_path), make_record("t2", environment={"git_commit": "unknown"}))
    assert "mlflow.source.git.commit" not in unknown.data.tags  # no commit is claimed that is not one


def test_informational_zeros_and_all_zero_curves_stay_out_of_the_charts(tmp_path):
    view = TrialView(informational=frozenset({"at_bound/gain"}))
    record = make_record("t1", metrics={"accuracy": 0.0, "at_bound/gain": 0.0, "budget": 3.0},
                         curves={"train/loss": [[0, 1.0], [1, 0.5]], "clip/rate": [[0, 0.0], [1, 0.0]]})
    run = logged(tmp_path, tracker_at(tmp_path), record, view)
    metrics = run.data.metrics
    assert metrics["accuracy"] == 0.0  # a zero that a claim could read stays
    assert "at_bound/gain" not in metrics and "clip/rate" not in metrics
    assert metrics["train/loss"] == 0.5 and metrics["budget"] == 3.0
    assert TrialRun(run.info.run_id, run.info.status, frozenset(metrics)).mirrors(record, view)
    assert not TrialRun(run.info.run_id, run.info.status, frozenset(metrics)).mirrors(record, TrialView())
    nonzero = make_record("t2", metrics={"at_bound/gain": 0.25})
    assert logged(tmp_path, tracker_at(tmp_path), nonzero, view).data.metrics["at_bound/gain"] == 0.25


def test_the_suite_runs_description_is_its_summary_and_each_claimed_metric_is_a_series(tmp_path):
    analysis = analyse(load_results(toy_run(tmp_path / "results")))
    tracker = tracker_at(tmp_path)
    run_id = tracker.start_parent(analysis.results.stored, {"git_commit": COMMIT}, "toy/default test")
    tracker.finish_parent(run_id, "FINISHED", parent_metrics(analysis), (),
                          {**tracking_tags(analysis), **claim_tags(analysis)})
    run = tracker.client.get_run(run_id)
    note = run.data.tags[NOTE_TAG]
    assert note.startswith("### toy (default): validity")
    assert "| momentum-vs-sgd | accuracy    | features=4 |" in note and "PASS" in note
    assert "**Polarity:**" in note and "accuracy: higher is better" in note and "param_bytes: lower is better" in note
    assert run.data.tags["mlflow.source.git.commit"] == COMMIT
    history = tracker.client.get_metric_history(run_id, "claims/accuracy/estimate")
    claims = [c for c in analysis.claims if c.key == "accuracy"]
    assert [m.step for m in history] == [0, 1]
    assert [m.value for m in history] == pytest.approx([c.estimate for c in claims])
    lows = tracker.client.get_metric_history(run_id, "claims/accuracy/ci_low")
    assert [m.value for m in lows] == pytest.approx([c.interval.low for c in claims])
    assert run.data.tags["harness.claims/accuracy/steps"] == "0: momentum-vs-sgd features=4; 1: momentum-vs-sgd features=8"


def test_a_description_too_long_for_mlflow_keeps_whole_lines_and_says_where_the_rest_is():
    text = "".join(f"| row {i} | PASS |\n" for i in range(2000))
    cut = fitted(text)
    assert len(cut) <= NOTE_CHARS and cut.endswith("report/verdicts.txt)\n")
    assert all(line.endswith("|") for line in cut.splitlines()[:-2] if line)
    assert fitted("short\n") == "short\n"


@pytest.mark.integration  # trains the toy task
def test_a_real_run_answers_on_its_page_with_true_trial_times_and_named_workloads(tmp_path, toy_suite):
    outcome = api.run(toy_suite, api.RunOptions(profile="smoke", results=tmp_path))
    (suite,) = outcome.suites
    client = mlflow.MlflowClient(outcome.tracker.uri)
    parent = client.get_run(suite.outcome.parent_run_id)
    assert "| momentum-vs-sgd |" in parent.data.tags[NOTE_TAG]
    assert parent.data.tags["mlflow.source.name"].endswith("toy.yaml")
    records = {r.trial_id: r for r in map(read_trial, iter_trial_files(suite.outcome.run_dir))}
    trials = client.search_runs([parent.info.experiment_id], "tags.`harness.kind` = 'trial'")
    assert len(trials) == len(records) == 3
    for run in trials:
        record = records[run.data.tags["harness.trial_id"]]
        started = datetime.fromisoformat(record.started_at)
        assert abs(run.info.start_time / 1000 - started.timestamp()) < 1.0
        assert abs((run.info.end_time - run.info.start_time) / 1000 - record.wall_seconds) < 1.0
        assert run.inputs.dataset_inputs[0].dataset.name == f"toy seed={record.seed} {record.point_label}"


def test_each_suites_experiment_holds_a_saved_view_grouping_the_trials_by_arm(tmp_path):
    tracker = tracker_at(tmp_path)
    experiment = tracker.client.get_experiment(tracker.experiment_id("toy"))
    view = json.loads(experiment.tags[ARMS_VIEW_TAG])
    assert view["searchFilter"] == "tags.`harness.kind` = 'trial'"
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "harness.arm_label"}]
    assert ARMS_VIEW_TAG == f"mlflow.sharedViewState.{ARMS_VIEW}"  # the key MLflow's UI reads a shared view from
