"""A run that ends before every trial is stored (a crash, a kill, Ctrl-C, a task that ends the process)
leaves a marker in its folder, and no reader takes such a folder for a result: ``report`` says so and
exits 1, the gate fails it, no baseline is saved from it. Finishing the run removes the marker."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterator, Sequence

import pytest
import torch
from click.testing import CliRunner

from harness import api
from harness.api import RunOptions, load_suites
from harness.cli import main
from harness.execution.executor import TrialJob
from harness.execution.serial import SerialExecutor
from harness.execution.runner import run_suite
from harness.gating.values import SPEED_RATIO
from harness.core.record import TrialRecord
from harness.store import INCOMPLETE_FILE
from harness.core.terminal import Console

TOY = Path(__file__).resolve().parent / "suites" / "toy.yaml"  # smoke: 3 trials of 20 steps


class ProcessEnded(Exception):
    """What the run's caller sees when the process running the trials ended early."""


class EndsAfterOneTrial(SerialExecutor):
    """Runs the first trial for real, then the run ends as if its process had: nothing after it runs."""

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        yield next(iter(super().run(jobs, console)))
        raise ProcessEnded


def _cli(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _run(results: Path, *extra: str) -> None:
    code, _, err = _cli("run", TOY, "--profile", "smoke", "--results", results, "--no-mlflow", "--threads", "1", *extra)
    assert code == 0, err


def _run_ending_early(results: Path) -> None:
    (suite,) = load_suites(TOY, RunOptions(profile="smoke"))
    with pytest.raises(ProcessEnded):
        run_suite(suite, results, torch.device("cpu"), Console(io.StringIO()), executor=EndsAfterOneTrial())


def test_a_run_that_ends_early_never_reads_as_a_result_until_it_is_finished(tmp_path: Path) -> None:
    complete, partial = tmp_path / "complete", tmp_path / "partial"
    _run(complete)
    run_dir = complete / "toy" / "smoke"
    assert not (run_dir / INCOMPLETE_FILE).exists()
    code, out, _ = _cli("report", complete)
    assert code == 0 and "INCOMPLETE" not in out
    code, _, err = _cli("baseline", "save", complete, "--out", tmp_path / "baselines")
    assert code == 0, err

    _run_ending_early(partial)
    partial_dir = partial / "toy" / "smoke"
    assert (partial_dir / INCOMPLETE_FILE).is_file() and len(list((partial_dir / "trials").glob("*.json"))) == 1

    code, out, err = _cli("report", partial, "--markdown", tmp_path / "summary.md")
    assert code == 1
    assert "INCOMPLETE RUN" in err and "INCOMPLETE RUN" in out
    assert "INCOMPLETE runs 1" in (tmp_path / "summary.md").read_text()
    assert json.loads((partial_dir / "report" / "summary.json").read_text())["incomplete"] is True

    code, out, _ = _cli("gate", partial, "--baselines-dir", tmp_path / "baselines", "--junit", tmp_path / "gate.xml")
    assert code == 1 and "INCOMPLETE RUN" in out
    assert 'type="incomplete_run"' in (tmp_path / "gate.xml").read_text()

    code, _, err = _cli("baseline", "save", partial, "--out", tmp_path / "refused")
    assert code == 2 and "INCOMPLETE RUN" in err and not (tmp_path / "refused").exists()

    _run(partial)  # the same suite again: the two missing trials run and the marker goes
    assert not (partial_dir / INCOMPLETE_FILE).exists()
    assert _cli("report", partial)[0] == 0
    (finished,) = api.gate(partial, baselines_dir=tmp_path / "baselines")
    assert not finished.incomplete and not finished.missing_trials and "INCOMPLETE" not in finished.render()
    assert all(c.check == SPEED_RATIO for c in finished.regressions)  # toy speed at 20 steps is noise
