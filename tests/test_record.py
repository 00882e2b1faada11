"""The trial record: one checked shape in and out of the store, old records still load."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest
from records import make_record
from toy_task import ToyTask

from harness.execution.executor import run_single
from harness.core.record import RECORD_SCHEMA, RecordError, Status, Trial, TrialRecord, from_json, to_json
from harness.store import CorruptTrial, RunFolder, read_trial


def test_a_record_the_executor_builds_survives_the_json_round_trip(tmp_path):
    record = run_single(ToyTask, {"steps": 5}, seed=1, work_root=tmp_path)
    assert record.status is Status.FINISHED and record.finished
    document = json.loads(json.dumps(to_json(record)))
    assert document["status"] == "finished" and document["trial_id"] == record.trial_id
    assert document["schema"] == RECORD_SCHEMA
    again = from_json(document)
    assert again == record
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = Status.FAILED  # type: ignore[misc]


def test_a_record_written_before_later_fields_existed_still_loads():
    old = to_json(make_record("t1", metrics={"acc": 0.5}))
    for key in ("packages", "started_at", "wall_seconds", "curves", "details", "environment", "error", "schema"):
        old.pop(key)
    loaded = from_json(old)
    assert loaded.metrics == {"acc": 0.5} and loaded.packages == [] and loaded.wall_seconds == 0.0
    assert loaded.curves == {} and loaded.environment == {} and loaded.error is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"metrics": "oops"}, "metrics: expected a mapping of numbers, got 'oops'"),
        ({"metrics": {"acc": "high"}}, "metrics.acc: expected a number or null, got 'high'"),
        ({"metrics": {"acc": True}}, "metrics.acc: expected a number or null, got True"),
        ({"metrics": {"x" * 251: 1.0}}, "metrics: metric key 'xxxx"),
        ({"seed": True}, "seed: expected an integer, got True"),
        ({"status": "done"}, "status: expected one of finished, failed, got 'done'"),
        ({"curves": {"loss": [[0, 1.0], "x"]}}, "curves.loss[1]: expected a [step, value] point, got 'x'"),
        ({"environment": {"threads": 2}}, "environment: expected a mapping of strings"),
        ({"schema": RECORD_SCHEMA + 1}, f"schema: version {RECORD_SCHEMA + 1} is newer than this harness reads"),
        ({"trial_id": ""}, "trial_id: expected a non-empty string, got ''"),
        ({"wall_seconds": -1}, "wall_seconds: expected a non-negative number, got -1"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_field(change, named):
    with pytest.raises(RecordError, match=named.replace("[", r"\[").replace("(", r"\(")):
        from_json({**to_json(make_record("t1")), **change})


def test_missing_fields_are_named():
    with pytest.raises(RecordError, match="suite: missing"):
        from_json({"trial_id": "t1", "point_label": "", "status": "finished", "metrics": {}})


def test_non_finite_values_become_null_so_the_mirror_never_reads_nan():
    record = from_json({**to_json(make_record("t1")), "metrics": {"acc": math.nan, "loss": math.inf},
                        "curves": {"train/loss": [[0, 1.0], [1, math.nan]]}})
    assert record.metrics == {"acc": None, "loss": None}
    assert record.curves["train/loss"] == [[0, 1.0], [1, None]]


def test_a_stored_file_that_is_not_a_record_is_corrupt_not_finished(tmp_path):
    folder = RunFolder(tmp_path, "s", "default")
    path = folder.trial_path("t1")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**to_json(make_record("t1")), "metrics": "oops"}))
    with pytest.raises(CorruptTrial, match="metrics: expected a mapping of numbers"):
        read_trial(path)
    records, corrupt = folder.load_trials()  # moved aside, so the trial runs again instead of poisoning every reader
    assert records == {} and corrupt[0][0].name == "t1.json.corrupt"


def test_the_store_refuses_to_write_a_malformed_record(tmp_path):
    folder = RunFolder(tmp_path, "s", "default")
    with pytest.raises(RecordError, match="status: expected one of"):
        folder.save_trial(dataclasses.replace(make_record("t1"), status="maybe"))
    assert not folder.trial_path("t1").exists()


def test_the_title_names_arm_seed_and_point_once():
    assert make_record("t1", arm="treat", seed=3).title == "treat seed=3"
    assert make_record("t2", arm="treat", seed=3, point={"width": 8}).title == "treat seed=3 width=8"


def test_every_stored_key_is_a_declared_field():
    declared = {f.name for f in dataclasses.fields(TrialRecord) + dataclasses.fields(Trial)} - {"trial", "code"}
    assert declared == set(to_json(make_record("t1"))) - {"schema"}


def test_extra_details_make_a_new_record_and_leave_the_first_alone():
    record = make_record("t1", details={"cache": "hit"})
    loaded = record.with_details(concurrent_trials=2)
    assert loaded.details == {"cache": "hit", "concurrent_trials": 2} and record.details == {"cache": "hit"}
