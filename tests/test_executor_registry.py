"""Executors are found by name in the entry-point group ``harness.executors``: the CLI offers what is
registered, each executor takes only its own options (refused in one line otherwise), and a new executor
is one module registered by entry point, run like the built-in ones."""
from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import ClassVar, Iterator, Sequence

import pytest
import torch
from click.testing import CliRunner

from harness import api
from harness.cli import main
from harness.execution.executor import TrialJob, execute_job
from harness.execution.registry import ENTRY_POINT_GROUP, executor_names
from harness.core.record import TrialRecord
from harness.store import iter_trial_files, read_trial
from harness.core.terminal import Console


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """api.run pins this process's torch threads; later tests must not inherit that."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


class Backwards:
    """A third party's executor: each look's trials in reverse order, in this process."""

    name: ClassVar[str] = "backwards"
    jobs_seen: ClassVar[list[str]] = []

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        for job in reversed(jobs):
            Backwards.jobs_seen.append(job.trial.trial_id)
            yield from execute_job(job, console)

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class BackwardsOptions:
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers > 1:
            raise ValueError("--workers: the backwards executor runs one trial at a time")


class BackwardsKind:
    name: ClassVar[str] = "backwards"
    summary: ClassVar[str] = "each look's trials in reverse order"
    Options: ClassVar[type] = BackwardsOptions

    @staticmethod
    def slots(options: BackwardsOptions, device: torch.device, threads: int) -> int:
        return 0

    @staticmethod
    def start(options: BackwardsOptions, slots: int) -> Backwards:
        return Backwards()


@pytest.fixture
def registered_backwards(monkeypatch):
    """``BackwardsKind`` registered as a package's entry point would register it."""
    extra = importlib.metadata.EntryPoint("backwards", f"{__name__}:BackwardsKind", ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points

    def entry_points(**selection):
        found = list(real(**selection))
        return found + [extra] if selection.get("group") == ENTRY_POINT_GROUP else found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    Backwards.jobs_seen.clear()


def test_the_built_in_executors_are_registered_and_the_cli_offers_them():
    assert executor_names() == ["auto", "parallel", "ray", "serial"]
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0 and "[auto|parallel|ray|serial]" in result.output


@pytest.mark.parametrize("options, message", [
    (dict(executor="serial", executor_options={"workers": 2}),
     "--workers does not apply to --executor serial (its options: none)"),
    (dict(executor="parallel", executor_options={"ray_address": "127.0.0.1:1"}),
     "--ray-address does not apply to --executor parallel"),
    (dict(executor="ray", executor_options={"ray_address": "127.0.0.1:1", "ray_workers": 2}),
     "--ray-workers sizes a local cluster"),
    (dict(executor="warp"), "unknown executor 'warp'; registered: auto, parallel, ray, serial"),
])
def test_an_option_an_executor_does_not_take_is_refused_before_anything_runs(tmp_path, toy_suite, options, message):
    with pytest.raises(api.UsageError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        api.run(toy_suite, api.RunOptions(profile="smoke", results=tmp_path / "r", mlflow=False, **options))
    assert not (tmp_path / "r" / "toy").exists()


def test_an_executor_registered_by_entry_point_runs_a_suite(tmp_path, toy_suite, registered_backwards):
    assert "backwards" in executor_names()
    done = api.run(toy_suite, api.RunOptions(profile="smoke", results=tmp_path / "r", mlflow=False, threads=1,
                                             executor="backwards"))
    assert done.exit_code == 0
    records = [read_trial(path) for path in iter_trial_files(done.suites[0].outcome.run_dir)]
    assert len(records) == 3 and {r.environment["executor"] for r in records} == {"backwards"}
    assert sorted(Backwards.jobs_seen) == sorted(r.trial_id for r in records)
    with pytest.raises(api.UsageError, match="^--workers: the backwards executor runs one trial at a time$"):
        api.run(toy_suite, api.RunOptions(profile="smoke", results=tmp_path / "r2", mlflow=False, executor="backwards",
                                          executor_options={"workers": 2}))
