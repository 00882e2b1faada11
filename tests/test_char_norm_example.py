"""The language-model example (examples/char_norm/) works as its README says: the task keeps the task
contract, every profile of its suite validates, and its smoke profile runs every arm to a report with
validity and claims."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.testing import check_task_contract

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "char_norm"
SUITE = EXAMPLE / "suite.yaml"


@pytest.fixture
def char_norm_importable(monkeypatch) -> None:
    """The example's folder on the import path, as `PYTHONPATH=examples/char_norm` puts it."""
    monkeypatch.syspath_prepend(str(EXAMPLE))


@pytest.mark.integration  # trains the task twice
def test_the_example_task_keeps_the_contract(tmp_path: Path, char_norm_importable) -> None:
    from char_norm import CharNormTask

    record = check_task_contract(CharNormTask, tmp_path)
    assert record.metrics["budget/steps"] == CharNormTask.smoke_params["steps"]
    assert record.metrics["bits_per_char"] > 0


@pytest.mark.integration  # the example's suite end to end, in-process
def test_the_example_suite_validates_and_its_smoke_profile_runs(tmp_path: Path, char_norm_importable) -> None:
    runner = CliRunner()
    for profile in ("default", "smoke", "ci"):
        validated = runner.invoke(main, ["validate", str(SUITE), "--profile", profile])
        assert validated.exit_code == 0, validated.output
        assert "task char_norm:CharNormTask v1, 4 arms" in validated.output
    ran = runner.invoke(main, ["run", str(SUITE), "--profile", "smoke", "--results", str(tmp_path), "--no-mlflow",
                               "--executor", "serial", "--threads", "1"])
    assert ran.exit_code == 0, ran.output
    assert len(list((tmp_path / "char_norm" / "smoke" / "trials").glob("*.json"))) == 4 * 2
    assert "validity:" in ran.output and "rmsnorm-vs-layernorm" in ran.output
    assert "unequal budget" not in ran.output  # every arm trained the same steps on the same batches
