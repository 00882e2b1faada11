"""``--executor serial``: trials one at a time in this process, in order, with exact CPU timings."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Iterator, Sequence

import torch

from harness.execution.executor import ONE_AT_A_TIME, Capabilities, TrialJob, execute_job
from harness.core.record import TrialRecord
from harness.core.terminal import Console


@dataclass
class SerialExecutor:
    """Trials one at a time in this process: deterministic order, exact CPU timings."""

    name: ClassVar[str] = "serial"
    capabilities: ClassVar[Capabilities] = ONE_AT_A_TIME

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        for job in jobs:
            console.trial_started(job.trial.suite, job.index, job.total, job.title)
            yield from execute_job(job, console)

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class SerialOptions:
    """The serial executor takes no options."""


class Serial:
    """The registered ``serial`` executor."""

    name: ClassVar[str] = SerialExecutor.name
    Options: ClassVar[type] = SerialOptions

    @staticmethod
    def slots(options: SerialOptions, device: torch.device, threads: int) -> int:
        return 0

    @staticmethod
    def start(options: SerialOptions, slots: int) -> SerialExecutor:
        return SerialExecutor()
