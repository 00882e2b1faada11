"""Helpers for the fault tests and the interrupt soak: runs of `harness run` and checks of what they left.

``check_results`` is the single definition of "nothing lost, nothing duplicated": every trial file
a finished record, exactly one active MLflow run per trial id, FINISHED and carrying its metrics,
no parent run left RUNNING, no temporary file left behind.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def cli_env(repo: Path = REPO, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HARNESS_FAULT", None)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(repo), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


SHARED_WAYS = float(os.environ.get("HARNESS_TEST_SHARED_WAYS", "4"))


def hang_guard(quiet_seconds: float) -> float:
    """A subprocess's hang guard, never a timing: ``quiet_seconds`` is ample on a quiet machine, and the guard
    still holds with the cores shared SHARED_WAYS ways (four by default: a test run beside other jobs, a
    toy suite under Ray taking three times its quiet time); HARNESS_TEST_SHARED_WAYS sets another."""
    return quiet_seconds * SHARED_WAYS


def harness(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], env=env or cli_env(), capture_output=True,
                          text=True, timeout=hang_guard(timeout))


@dataclass(frozen=True)
class Outcome:
    """What a CLI call left: the fields of ``subprocess.CompletedProcess`` that the tests read."""
    returncode: int
    stdout: str
    stderr: str


def harness_here(*args: str, **env: str) -> Outcome:
    """`harness ARGS` in this process, through click's runner: the command's own code path and output
    without a new interpreter's imports (about 7 s of CPU each). For what a command stores and says;
    what a process does (a kill, a signal, two at once) needs ``harness``. An exception that escapes the
    command is written to stderr as the interpreter would, so "no Traceback" checks still hold."""
    result = CliRunner().invoke(main, list(args), env=env or None)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return Outcome(result.exit_code, result.stdout, stderr)


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", *args], env=env or cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def slow_suite(folder: Path, toy_suite: Path, name: str = "toy", seconds_per_step: float = 0.0) -> Path:
    """The toy suite under another name, optionally slowed down (smoke: 3 trials of 20 steps)."""
    text = toy_suite.read_text().replace("suite: toy\n", f"suite: {name}\n")
    if seconds_per_step:
        text = text.replace("{seeds: [0], params: {steps: 20}",
                            f"{{seeds: [0], params: {{steps: 20, seconds_per_step: {seconds_per_step}}}")
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def trial_records(results: Path, suite: str = "toy", profile: str = "smoke") -> dict[str, dict]:
    records = {}
    for path in sorted((results / suite / profile / "trials").glob("*.json")):
        records[path.stem] = json.loads(path.read_text(encoding="utf-8"))  # raises if not intact
    return records


def mlflow_runs(results: Path, suite: str = "toy"):
    """(active trial runs, parent runs) of the suite in RESULTS/mlflow.db."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{(results / 'mlflow.db').resolve()}")
    experiment = client.get_experiment_by_name(suite)
    if experiment is None:
        return [], []
    trials = client.search_runs([experiment.experiment_id], filter_string="tags.`harness.kind` = 'trial'",
                                max_results=10000)
    parents = client.search_runs([experiment.experiment_id], filter_string="tags.`harness.kind` = 'suite'",
                                 max_results=10000)
    return trials, parents


def stray_tmp(results: Path) -> list[Path]:
    return [p for p in results.rglob("*") if p.is_file() and ".tmp" in p.name]


def check_results(results: Path, suite: str = "toy", profile: str = "smoke", trials: int = 3) -> list[str]:
    """Every way the folder breaks "nothing lost, nothing duplicated"; empty when it holds."""
    problems = []
    records = trial_records(results, suite, profile)
    if len(records) != trials:
        problems.append(f"{len(records)} trial files, expected {trials}")
    problems += [f"trial {tid} is {r.get('status')}" for tid, r in records.items() if r.get("status") != "finished"]
    runs, parents = mlflow_runs(results, suite)
    ids = [r.data.tags.get("harness.trial_id") for r in runs]
    if sorted(ids) != sorted(records):
        problems.append(f"MLflow trial runs {sorted(ids)} != trial files {sorted(records)}")
    for run in runs:
        if run.info.status != "FINISHED" or not {"accuracy", "loss", "wall_seconds"} <= set(run.data.metrics):
            problems.append(f"run of {run.data.tags.get('harness.trial_id')} is {run.info.status} "
                            f"with {len(run.data.metrics)} metrics")
    problems += [f"parent run {p.info.run_id} left RUNNING" for p in parents if p.info.status == "RUNNING"]
    problems += [f"stray temporary file {p}" for p in stray_tmp(results)]
    return problems
