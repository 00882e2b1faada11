"""Reverting an edit reuses the trials it set aside: a record in ``trials/superseded/`` whose id a
trial of the run has (the same task code, version and params) comes back instead of rerunning, with
one line saying so; records ``--redesign`` set aside ran before the design was fixed and never do."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from test_new_task import EDITED_TASK, _run

from harness import api
from harness.tasks.source import task_code

SUITE = "suite: edited\ntask: edited_task:EditedTask\nseeds: [0, 1]\narms:\n  base: {offset: 0}\n  more: {offset: 1}\n"


def _write_code(module: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module.write_text(text)
    monkeypatch.delitem(sys.modules, "edited_task", raising=False)
    task_code.cache_clear()


def test_reverting_an_edit_restores_the_set_aside_trials_instead_of_rerunning(tmp_path, monkeypatch):
    module = tmp_path / "code" / "edited_task.py"
    module.parent.mkdir()
    _write_code(module, EDITED_TASK, monkeypatch)
    monkeypatch.syspath_prepend(str(module.parent))
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    results = tmp_path / "results"
    trials = results / "edited" / "default" / "trials"
    assert _run(suite, results)[0].suites[0].outcome.ran == 4
    first = sorted(p.name for p in trials.glob("*.json"))

    _write_code(module, EDITED_TASK.replace("SHIFT = 1.0", "SHIFT = 2.0  # edited"), monkeypatch)
    assert _run(suite, results)[0].suites[0].outcome.ran == 4
    edited = sorted(p.name for p in trials.glob("*.json"))

    _write_code(module, EDITED_TASK, monkeypatch)  # the edit reverted, byte for byte
    reverted, log = _run(suite, results)
    assert reverted.suites[0].outcome.ran == 0
    assert "4 trial(s) of edited/default restored from" in log and "so they are not rerun" in log
    assert sorted(p.name for p in trials.glob("*.json")) == first
    assert sorted(p.name for p in (trials / "superseded").glob("*.json")) == edited  # the edit's, set aside now
    scores = sorted(json.loads(p.read_text())["metrics"]["score"] for p in trials.glob("*.json"))
    assert scores == [1.0, 1.0, 2.0, 2.0]


def test_records_redesign_set_aside_are_not_brought_back(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: toyr\ntask: toy_task:ToyTask\nseeds: [0, 1]\nparams: {steps: 5, samples: 16}\n"
                     "arms:\n  sgd: {}\n  momentum: {momentum: 0.9}\n"
                     "contrasts:\n  - {treatment: momentum, control: sgd}\n")
    results = tmp_path / "results"
    options = api.RunOptions(results=results, mlflow=False, threads=1, executor="serial")
    assert api.run(suite, options).suites[0].outcome.ran == 4
    suite.write_text(suite.read_text() + "claims:\n  - {contrast: momentum-vs-sgd, metric: accuracy, test: superior}\n")
    redesigned = api.run(suite, api.RunOptions(results=results, mlflow=False, threads=1, executor="serial",
                                               redesign=True))
    assert redesigned.suites[0].outcome.ran == 4  # the same trial ids, run before this design: not restored
    aside = results / "toyr" / "default" / "trials" / "superseded"
    assert len((aside / "redesigned.txt").read_text().split()) == 4
