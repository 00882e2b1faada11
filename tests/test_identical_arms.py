"""Two arms that resolve to identical params (and so the same task code) are named by `harness
validate` and by `harness run` before any trial runs, not found identical after their budget is spent."""
from __future__ import annotations

from click.testing import CliRunner

from harness import api
from harness.cli import main

SUITE = ("suite: ident\ntask: toy_task:ToyTask\nseeds: [0, 1]\nparams: {steps: 5, samples: 16}\n"
         "sweep: {features: [4, 8]}\narms:\n  sgd: {}\n  same: {}\n  momentum: {momentum: 0.9}\n"
         "  tuned: {momentum: 0.9, lr: LR}\n")
WARNING = ("warning: ident (default): arms sgd, same resolve to identical params and the same task code at "
           "features=4, features=8: their trials will give the same results (is the mechanism switched on?)")


def test_validate_names_arms_with_identical_params_and_only_those(tmp_path):
    suite = tmp_path / "ident.yaml"
    suite.write_text(SUITE.replace("LR", "0.05"))
    done = CliRunner().invoke(main, ["validate", str(suite)])
    assert done.exit_code == 0, done.output
    assert WARNING in done.output.splitlines() and done.output.count("warning:") == 1


def test_an_arm_that_only_restates_a_default_is_named_too(tmp_path):
    suite = tmp_path / "ident.yaml"
    suite.write_text(SUITE.replace("  same: {}\n", "  same: {momentum: 0.0}\n").replace("LR", "0.1"))
    done = CliRunner().invoke(main, ["validate", str(suite)])
    assert WARNING in done.output.splitlines()  # momentum 0.0 is the task's default: the same params as sgd
    assert "arms momentum, tuned resolve to identical params" in done.output  # lr 0.1 is the default too


def test_run_warns_before_any_trial(tmp_path):
    suite = tmp_path / "ident.yaml"
    suite.write_text(SUITE.replace("LR", "0.05"))
    said: list[str] = []

    def warn(line: str) -> None:
        said.append(line)
        assert not list(tmp_path.glob("r/ident/default/trials/*.json"))  # said before anything ran

    done = api.run(suite, api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1, executor="serial",
                                         seeds=[0]), warn=warn)
    assert done.exit_code == 0 and WARNING in said


IDENTICAL_CLAIMS = ("suite: twins\ntask: toy_task:ToyTask\nseeds: [0, 1, 2]\nparams: {steps: 5, samples: 16}\n"
                    "arms:\n  sgd: {}\n  same: {}\n  momentum: {momentum: 0.9}\n"
                    "contrasts:\n  - {treatment: same, control: sgd}\n  - {treatment: momentum, control: sgd}\n"
                    "claims:\n  - {contrast: same-vs-sgd, metric: accuracy, test: equal}\n"
                    "  - {contrast: same-vs-sgd, metric: param_bytes, test: equal}\n"
                    "  - {contrast: momentum-vs-sgd, metric: param_bytes, test: equal}\n"
                    "profiles:\n  smoke: {seeds: [0, 1, 2]}\n")


def test_a_claim_between_identical_arms_is_no_answer_and_fails_the_default_run(tmp_path):
    """A zero difference on every seed would PASS an equality claim: it is NO ANSWER instead, and
    the default profile's run exits 1 naming each such claim; a smoke run only checks the suite runs."""
    suite = tmp_path / "twins.yaml"
    suite.write_text(IDENTICAL_CLAIMS)
    said: list[str] = []
    done = api.run(suite, api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1, executor="serial"),
                   warn=said.append)
    statuses = {(c.contrast, c.key): c.status for c in done.suites[0].analysis.claims}
    assert statuses == {("same-vs-sgd", "accuracy"): "no answer", ("same-vs-sgd", "param_bytes"): "no answer",
                        ("momentum-vs-sgd", "param_bytes"): "pass"}
    assert done.exit_code == 1
    assert [line for line in said if "no answer" in line] == [
        f"error: twins (default): claim same-vs-sgd {key}: no answer (arms identical): treatment and control gave "
        "bit-identical values on every seed (is the mechanism switched on?)" for key in ("accuracy", "param_bytes")]
    smoke = api.run(suite, api.RunOptions(profile="smoke", results=tmp_path / "s", mlflow=False, threads=1,
                                          executor="serial"), warn=said.append)
    assert smoke.exit_code == 0 and {c.status for c in smoke.suites[0].analysis.claims} == {"no answer", "pass"}


APART = ("suite: apart\ntask: toy_task:ToyTask\nseeds: [0, 1]\nparams: {steps: 5, samples: 16}\nmechanism: momentum\n"
         "arms:\n  sgd: {}\n  momentum: {momentum: 0.9}\n  slow_lr: {lr: 0.001}\n"
         "contrasts:\n  - {treatment: momentum, control: sgd}\n  - {treatment: sgd, control: slow_lr}\n"
         "validity: {control: CONTROL, positive: POSITIVE, metric: accuracy}\n"
         "claims:\n  - {contrast: momentum-vs-sgd, metric: param_bytes, test: equal}\n")


def test_validate_warns_when_validity_measures_against_another_control_than_the_claims(tmp_path):
    suite = tmp_path / "apart.yaml"
    suite.write_text(APART.replace("CONTROL", "slow_lr").replace("POSITIVE", "sgd"))
    done = CliRunner().invoke(main, ["validate", str(suite)])
    assert done.exit_code == 0, done.output
    assert ("warning: apart (default): validity's control is slow_lr, but the claims compare momentum with sgd: a "
            "VALID suite would say its controls are told apart from slow_lr, not from the arm the claims read (make "
            "that arm validity's control)") in done.output.splitlines()
    suite.write_text(APART.replace("CONTROL", "sgd").replace("POSITIVE", "momentum"))
    same = CliRunner().invoke(main, ["validate", str(suite)])
    assert same.exit_code == 0 and "warning:" not in same.output, same.output
