"""Suite files: composition, profiles, and a clear error for every kind of bad input."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.execution.trials import expand_trials
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError

TOY = """\
suite: toy
task: toy_task:ToyTask
seeds: [0, 1]
params: {steps: 5}
arms:
  sgd: {momentum: 0.0}
  momentum: {momentum: 0.9}
contrasts:
  - {treatment: momentum, control: sgd}
profiles:
  smoke: {seeds: [0], params: {steps: 2}}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path, **kwargs) -> str:
    with pytest.raises(SuiteError) as info:
        load_suites(path, **kwargs)
    return str(info.value)


def test_toy_suite_expands_arm_seed_and_sweep(toy_suite):
    (suite,) = load_suites(toy_suite)
    trials = expand_trials(suite)
    assert len(trials) == 3 * 3 * 2  # arms x seeds x features sweep
    assert len({t.trial_id for t in trials}) == len(trials)
    (smoke,) = load_suites(toy_suite, profile="smoke")
    assert [t.params["steps"] for t in expand_trials(smoke)] == [20, 20, 20]


def test_seed_and_arm_overrides(toy_suite):
    (suite,) = load_suites(toy_suite, seeds=[7], arms=["sgd", "momentum"])
    trials = expand_trials(suite)
    assert {t.seed for t in trials} == {7}
    assert {t.arm for t in trials} == {"sgd", "momentum"}


def test_arm_level_sweep_makes_variants(tmp_path):
    path = write(tmp_path, "s.yaml", TOY.replace("momentum: {momentum: 0.9}", "momentum: {sweep: {momentum: [0.5, 0.9]}}"))
    (suite,) = load_suites(path)
    labels = sorted({t.arm_label for t in expand_trials(suite)})
    assert labels == ["momentum[momentum=0.5]", "momentum[momentum=0.9]", "sgd"]


def test_include_composes_suites_and_detects_cycles(tmp_path):
    write(tmp_path, "a.yaml", TOY)
    write(tmp_path, "b.yaml", TOY.replace("suite: toy", "suite: toy2"))
    both = write(tmp_path, "all.yaml", "include: [a.yaml, b.yaml]\n")
    assert [s.name for s in load_suites(both)] == ["toy", "toy2"]
    write(tmp_path, "x.yaml", "include: [y.yaml]\n")
    cyclic = write(tmp_path, "y.yaml", "include: [x.yaml]\n")
    assert "include cycle" in error_of(cyclic)


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.yaml", "suite: toy\ntask: toy_task:ToyTask\narms: {a: [1, 2}\n")
    message = error_of(path)
    assert str(path) in message and ":3" in message and "malformed YAML" in message


def test_unknown_task_lists_registered(tmp_path):
    message = error_of(write(tmp_path, "s.yaml", TOY.replace("toy_task:ToyTask", "nosuch")))
    assert "unknown task 'nosuch'" in message and "er2" in message and "routing" in message and "vocab" in message


def test_unknown_param_names_key_line_and_valid_params(tmp_path):
    path = write(tmp_path, "s.yaml", TOY.replace("momentum: {momentum: 0.9}", "momentum: {momentm: 0.9}"))
    message = error_of(path)
    assert "unknown param 'momentm'" in message and "momentum" in message.split("valid params:")[1]
    assert f"{path}:7" in message


def test_contrast_with_missing_arm_fails_before_running(tmp_path):
    message = error_of(write(tmp_path, "s.yaml", TOY.replace("treatment: momentum", "treatment: adam")))
    assert "contrasts[0].treatment" in message and "unknown arm 'adam'" in message and "sgd, momentum" in message


def test_suite_without_arms_fails(tmp_path):
    text = "suite: toy\ntask: toy_task:ToyTask\nseeds: [0]\narms: {}\n"
    assert "at least one arm" in error_of(write(tmp_path, "s.yaml", text))


def test_unknown_profile_lists_valid_ones(tmp_path):
    message = error_of(write(tmp_path, "s.yaml", TOY), profile="fast")
    assert "unknown profile 'fast'" in message and "default, smoke" in message


def test_unknown_top_level_key_is_named(tmp_path):
    message = error_of(write(tmp_path, "s.yaml", TOY + "contrast: []\n"))
    assert "unknown key 'contrast'" in message


def test_claim_on_undeclared_metric_and_contrast(tmp_path):
    claim = "claims:\n  - {contrast: momentum-vs-sgd, metric: f1, test: superior}\n"
    assert "declares no metric 'f1'" in error_of(write(tmp_path, "s.yaml", TOY + claim))
    claim = "claims:\n  - {contrast: adam-vs-sgd, metric: accuracy, test: superior}\n"
    assert "unknown contrast 'adam-vs-sgd'" in error_of(write(tmp_path, "t.yaml", TOY + claim))
    claim = "claims:\n  - {contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, reference: x}\n"
    assert "needs exactly one of 'margin'" in error_of(write(tmp_path, "u.yaml", TOY + claim))


WITH_REFERENCE = TOY.replace("  - {treatment: momentum, control: sgd}\n",
                             "  - {treatment: momentum, control: sgd}\n  - {treatment: sgd, control: slow}\n"
                             "  - {treatment: slow, control: sgd}\n").replace(
    "  momentum: {momentum: 0.9}\n", "  momentum: {momentum: 0.9}\n  slow: {lr: 0.001}\n")


@pytest.mark.parametrize(("claim", "expected"), [
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, margin: 0.05}",
     "claims.0: Value error, test 'non_inferior' needs a 'reference': a contrast whose treatment is this claim's control"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: equivalent, margin: 0.05}", "needs a 'reference'"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, margin: 0.05, reference: sgd-vs-adam}",
     "claims[0].reference: unknown contrast 'sgd-vs-adam'; contrasts: momentum-vs-sgd, sgd-vs-slow, slow-vs-sgd"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, margin: 0.05, reference: slow-vs-sgd}",
     "must have the claim's control 'sgd' as its treatment"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, relative_margin: 0.5}", "needs a 'reference'"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, margin: -0.05, reference: sgd-vs-slow}",
     "claims.0.margin: Input should be greater than or equal to 0"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, margin: lots, reference: sgd-vs-slow}",
     "claims.0.margin: Input should be a valid number"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, relative_margin: 1.5, reference: sgd-vs-slow}",
     "claims.0.relative_margin: Input should be less than 1"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: superior, relative_margin: 0.5, reference: sgd-vs-slow}",
     "test 'superior' takes an absolute 'margin' only"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: superior, margin: -0.01}",
     "claims.0.margin: Input should be greater than or equal to 0"),
    ("{contrast: momentum-vs-sgd, metric: accuracy, test: ratio, max: 2, margin: 0.05}", "test 'ratio' takes no 'margin'"),
])
def test_bad_claims_are_refused_with_file_key_and_expectation(tmp_path, claim, expected):
    path = write(tmp_path, "s.yaml", WITH_REFERENCE + f"claims:\n  - {claim}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:") and expected in message


@pytest.mark.parametrize("level", ["0", "1", "1.5", "-0.1", "high"])
def test_confidence_outside_zero_one_is_refused(tmp_path, level):
    path = write(tmp_path, "s.yaml", TOY + f"confidence: {level}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:") and "confidence:" in message


def test_a_claim_with_an_established_reference_loads(tmp_path):
    claim = "claims:\n  - {contrast: momentum-vs-sgd, metric: accuracy, test: non_inferior, relative_margin: 0.5, reference: sgd-vs-slow}\n"
    (suite,) = load_suites(write(tmp_path, "s.yaml", WITH_REFERENCE + claim + "confidence: 0.9\n"))
    assert suite.confidence == 0.9 and suite.stored().claims[0].reference == "sgd-vs-slow"


def test_bad_param_value_is_reported(tmp_path):
    message = error_of(write(tmp_path, "s.yaml", TOY.replace("steps: 5", "steps: many")))
    assert "param 'steps'" in message and "integer" in message


def test_profile_gate_overrides_merge_over_the_suite_gate(tmp_path):
    text = TOY + "gate: {default_tolerance: 0.01, tolerances: {accuracy: 0.02}}\n"
    text = text.replace("smoke: {seeds: [0], params: {steps: 2}}", "smoke: {seeds: [0], gate: {speed_tolerance: 0.9}}")
    path = write(tmp_path, "s.yaml", text)
    (default,) = load_suites(path)
    (smoke,) = load_suites(path, profile="smoke")
    assert default.gate.speed_tolerance == 0.25
    assert smoke.gate.speed_tolerance == 0.9
    assert smoke.gate.tolerances == {"accuracy": 0.02} and smoke.gate.default_tolerance == 0.01
    bad = write(tmp_path, "b.yaml", text.replace("speed_tolerance: 0.9", "speed_tolerence: 0.9"))
    assert "unknown key 'speed_tolerence'" in error_of(bad, profile="smoke")
