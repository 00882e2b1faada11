"""A task package in the researcher's own git repository is named by its own commit and dirty flag,
beside the harness's, in every trial record, in `harness history` and in a reproduction's plan."""
from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from test_new_task import EDITED_TASK

from harness import api
from harness.cli import main
from harness.reproduction.reproduction_text import render_plan
from harness.tasks.source import task_code

SUITE = ("suite: edited\ntask: edited_task:EditedTask\nseeds: [0, 1]\narms:\n  base: {offset: 0}\n  more: {offset: 1}\n"
         "contrasts:\n  - {treatment: more, control: base}\nclaims:\n  - {contrast: more-vs-base, metric: score, test: superior}\n")


def git(*args: str, cwd) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_task_repository_commit_is_recorded_and_shown(tmp_path, monkeypatch):
    repo = tmp_path / "task-repo"
    repo.mkdir()
    (repo / "edited_task.py").write_text(EDITED_TASK)
    git("init", "-q", cwd=repo)
    git("add", "edited_task.py", cwd=repo)
    git("commit", "-q", "-m", "task", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.delitem(sys.modules, "edited_task", raising=False)
    task_code.cache_clear()
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    results = tmp_path / "results"
    done = api.run(suite, api.RunOptions(results=results, mlflow=False, threads=1, executor="serial"))
    assert done.exit_code == 0
    (record, *_) = done.suites[0].outcome.records
    assert record.environment["task_git_commit"] == commit and record.environment["task_git_dirty"] == "false"
    assert record.environment["git_commit"] != commit  # the harness's own, beside it

    shown = CliRunner().invoke(main, ["history", "edited", "--results", str(results)])
    assert shown.exit_code == 0, shown.output
    assert "harness commit" in shown.output and "task commit" in shown.output
    assert commit[:10] in shown.output

    plan = api.plan_reproduction(str(results), mlflow=False, task_paths=["edited_task:EditedTask"])
    assert f"task {commit[:10]} (here {commit[:10]})" in render_plan(plan)


def test_a_task_outside_git_records_none(tmp_path, monkeypatch):
    folder = tmp_path / "loose"
    folder.mkdir()
    (folder / "edited_task.py").write_text(EDITED_TASK)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "edited_task", raising=False)
    task_code.cache_clear()
    from harness.tasks import load_task
    from harness.tracking.environment import task_environment

    environment = task_environment(load_task("edited_task:EditedTask"))
    assert environment["task_git_commit"] == "none" and environment["task_git_dirty"] == "none"
