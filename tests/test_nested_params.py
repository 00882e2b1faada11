"""Nested task params in suites: dotted keys set one nested field and leave its siblings, and a key
that names no param is one line with the file and line (ER2's teacher, workload and speed; vocab's
workload; routing's backbone and router training)."""
from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.execution.trials import expand_trials
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError
from harness.suite.tuning_plan import tuning_suite
from harness.tasks.er2.params import ER2Params, TrainedTeacherParams
from harness.tasks.er2.task import ER2Task
from harness.tasks.param_paths import flatten, layered, nest
from harness.tasks.routing.task import BackboneParams, RouterTrainingParams

ER2 = """\
suite: nested
task: er2
seeds: [0]
params: {teacher.steps: 50, speed: {measure: false}}
arms:
  raw: {residual_mode: raw, teacher.lr: 0.01}
  none: {residual_mode: none}
profiles:
  small:
    params: {teacher: {batch: 3}}
    arms:
      none: {teacher.steps: 7}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nested.yaml"
    path.write_text(text)
    return path


def refusal(path: Path, profile: str = "default") -> str:
    with pytest.raises(SuiteError) as info:
        load_suites(path, profile=profile)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_dotted_key_sets_one_nested_field_and_keeps_its_siblings(tmp_path):
    (suite,) = load_suites(write(tmp_path, ER2), profile="small")
    teachers = {trial.arm: trial.params["teacher"] for trial in expand_trials(suite)}
    default = TrainedTeacherParams().model_dump(mode="json")
    assert teachers["raw"] == {**default, "steps": 50, "batch": 3, "lr": 0.01}  # suite, profile, arm
    assert teachers["none"] == {**default, "steps": 7, "batch": 3}  # the profile's arm override wins
    assert all(trial.params["speed"]["measure"] is False for trial in expand_trials(suite))
    assert all(trial.params["speed"]["contexts"] == [512, 2048, 8192] for trial in expand_trials(suite))


def test_a_nested_sweep_axis_labels_its_points_by_the_dotted_key(tmp_path):
    (suite,) = load_suites(write(tmp_path, ER2 + "sweep: {teacher.num_layers: [2, 3]}\n"))
    trials = expand_trials(suite)
    assert {t.point_label for t in trials} == {"teacher.num_layers=2", "teacher.num_layers=3"}
    assert {t.params["teacher"]["num_layers"] for t in trials} == {2, 3}
    assert {t.params["teacher"]["steps"] for t in trials} == {50}


@pytest.mark.parametrize(("old", "new", "fragments"), [
    ("teacher.steps: 50", "teacher.stepz: 50",
     [":4:", "params.teacher.stepz: unknown param 'teacher.stepz' for task 'er2'; 'teacher' takes:", "steps"]),
    ("{measure: false}", "{measure: false, fast: 1}", [":4:", "params.speed.fast: unknown param 'speed.fast'"]),
    ("teacher.lr: 0.01", "steps.lr: 0.01", [":6:", "arms.raw.steps.lr: 'steps' is not a nested param"]),
    ("teacher: {batch: 3}", "teacher: {batch: 3, nope: 1}", [":10:", "profiles.small.params.teacher.nope: unknown param"]),
    ("none: {teacher.steps: 7}", "none: {tacher.steps: 7}", [":12:", "unknown param 'tacher' for task 'er2'; valid params:"]),
])
def test_an_unknown_dotted_key_is_one_line_with_file_line_and_what_was_expected(tmp_path, old, new, fragments):
    assert old in ER2
    message = refusal(write(tmp_path, ER2.replace(old, new)), profile="small")
    for fragment in fragments:
        assert fragment in message, message


def test_a_recall_only_field_on_the_text_workload_is_refused(tmp_path):
    path = write(tmp_path, ER2.replace("teacher.lr: 0.01", "workload.pairs: 4"))
    message = refusal(path)
    assert f"{path}:6:" in message
    assert "unknown param 'workload.pairs'" in message and "'workload' (kind 'text') takes: kind" in message
    with pytest.raises(pydantic.ValidationError, match="Extra inputs"):
        ER2Task.validate_params({"workload.kind": "text", "workload.pairs": 4})
    assert ER2Task.validate_params({"workload.kind": "recall", "workload.pairs": 4}).workload.pairs == 4


def test_another_kind_in_a_later_layer_starts_that_union_afresh():
    base = {"teacher.kind": "constructed", "teacher.code_dim": 16}
    assert layered(base, {"teacher.kind": "trained", "teacher.steps": 9}) == {"teacher.kind": "trained", "teacher.steps": 9}
    assert layered(base, {"teacher.kind": "constructed"}) == base  # the same kind keeps its fields
    assert layered(base, {"steps": 4}) == {**base, "steps": 4}


def test_a_whole_nested_param_cannot_be_swept(tmp_path):
    message = refusal(write(tmp_path, ER2 + "sweep: {teacher: [{steps: 1}, {steps: 2}]}\n"))
    assert ":13:" in message and "'teacher' is a nested param; sweep its fields one by one" in message


def test_the_cli_refuses_an_unknown_dotted_key_with_exit_2(tmp_path):
    path = write(tmp_path, ER2.replace("teacher.steps: 50", "teacher.stepz: 50"))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert f"{path}:4:" in result.stderr and "teacher.stepz" in result.stderr


def test_flatten_and_nest_are_inverse_on_the_canonical_params():
    dumped = ER2Params().model_dump(mode="json")
    leaves = flatten(ER2Params, dumped)
    assert "teacher.model_dim" in leaves and "workload.kind" in leaves and "teacher" not in leaves
    assert nest(leaves) == dumped
    assert ER2Task.validate_params(leaves) == ER2Params()


TUNED = ER2.replace("profiles:", "tune:\n  seeds: [90, 91]\n  metric: nmse\n  space: {teacher.lr: [0.001, 0.01]}\n"
                    "  arms: [none]\nprofiles:")


def test_a_tune_axis_may_name_one_nested_field(tmp_path):
    (suite,) = load_suites(write(tmp_path, TUNED), apply_locks=False)
    tuning = tuning_suite(suite, suite.tune)
    trials = expand_trials(tuning)
    assert {t.params["teacher"]["lr"] for t in trials} == {0.001, 0.01}
    assert {t.params["teacher"]["steps"] for t in trials} == {50}  # the suite's sibling kept


def test_an_unknown_nested_tune_axis_is_one_line_at_its_line(tmp_path):
    path = write(tmp_path, TUNED.replace("space: {teacher.lr:", "space: {teacher.lrr:"))
    with pytest.raises(SuiteError) as info:
        load_suites(path, apply_locks=False)
    message = str(info.value)
    assert "\n" not in message and f"{path}:11:" in message
    assert "tune.space.teacher.lrr: unknown param 'teacher.lrr' for task 'er2'; 'teacher' takes:" in message


VOCAB = """\
suite: nested_vocab
task: vocab
seeds: [0]
params: {workload.kind: synthetic, throughput.measure: false}
arms:
  shared: {index: none, workload.n_concepts: 40}
"""


def test_a_cldr_only_field_on_the_synthetic_workload_is_refused_at_its_line(tmp_path):
    path = write(tmp_path, VOCAB.replace("workload.n_concepts: 40", "workload.locales: [en, de, fr]"))
    message = refusal(path)
    assert f"{path}:6:" in message
    assert "unknown param 'workload.locales'" in message and "'workload' (kind 'synthetic') takes: " in message
    assert "n_concepts" in message
    cldr = load_suites(write(tmp_path, VOCAB.replace("kind: synthetic", "kind: cldr").replace(
        "workload.n_concepts: 40", "workload.locales: [en, de, fr]")))
    assert [t.params["workload"]["locales"] for t in expand_trials(cldr[0])] == [["en", "de", "fr"]]


ROUTING = """\
suite: nested_routing
task: routing
seeds: [0]
params: {backbone: {steps: 50, batch: 16}, router_training.steps: 20}
arms:
  precision: {router: precision, backbone.steps: 7, router_training.lr: 0.5}
  projector: {router: router_projector}
"""


def test_a_dotted_override_of_one_routing_field_keeps_its_siblings(tmp_path):
    (suite,) = load_suites(write(tmp_path, ROUTING))
    params = {trial.arm: trial.params for trial in expand_trials(suite)}
    backbone, training = BackboneParams().model_dump(mode="json"), RouterTrainingParams().model_dump(mode="json")
    assert params["precision"]["backbone"] == {**backbone, "steps": 7, "batch": 16}
    assert params["projector"]["backbone"] == {**backbone, "steps": 50, "batch": 16}
    assert params["precision"]["router_training"] == {**training, "steps": 20, "lr": 0.5}
    assert params["projector"]["router_training"] == {**training, "steps": 20}
    assert {p["router"] for p in params.values()} == {"precision", "router_projector"}  # the arm's choice
