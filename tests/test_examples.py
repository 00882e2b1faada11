"""The GitHub Actions example runs what `.ci/run` runs: the same suites, profile and thread and executor
flags (the baselines' settings), so a copy of it gates like this repository's CI."""
from __future__ import annotations

import shlex
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def _run_flags(command: str) -> list[str]:
    """The arguments after `harness run`, with --results and its value left out (each job keeps its own)."""
    words = shlex.split(command)
    args = words[words.index("run") + 1:]
    kept, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word == "--results":
            skip = True
        else:
            kept.append(word)
    return kept


def test_the_github_actions_example_runs_with_ci_runs_flags():
    ci_line = next(line for line in (REPO / ".ci" / "run").read_text().splitlines()
                   if line.startswith('"$harness" run '))
    workflow = yaml.safe_load((REPO / "examples" / "github-actions.yml").read_text())
    steps = workflow["jobs"]["gate"]["steps"]
    run_step = next(step["run"] for step in steps if "harness run " in step.get("run", ""))
    assert _run_flags(run_step) == _run_flags(ci_line)
    assert "--threads" in _run_flags(run_step)  # the check reads the flags, not an empty list


def test_the_github_actions_example_publishes_the_report_and_uploads_it():
    steps = yaml.safe_load((REPO / "examples" / "github-actions.yml").read_text())["jobs"]["gate"]["steps"]
    publish = next(i for i, step in enumerate(steps) if "harness publish " in step.get("run", ""))
    out = shlex.split(steps[publish]["run"])[-1]
    uploads = [step for step in steps[publish:] if step.get("uses", "").startswith("actions/upload-artifact")]
    assert any(step["with"]["path"].rstrip("/") == out.rstrip("/") for step in uploads)
