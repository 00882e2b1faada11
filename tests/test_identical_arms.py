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
