"""``--executor auto`` (the default): on the CPU, where at least two trials fit the cores, trials side by
side in worker processes once one proves long enough to repay starting them (``ProcessExecutor``'s
``inline_below_s``), one at a time in this process before that; elsewhere the serial executor."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from harness.execution.executor import Executor
from harness.execution.parallel import WORTH_WORKERS_S, ProcessExecutor, side_by_side_workers
from harness.execution.registry import option
from harness.execution.serial import SerialExecutor


@dataclass(frozen=True)
class AutoOptions:
    workers: int | None = option("Trials side by side in worker processes (auto: once a trial proves long enough) "
                                 "[default: cores // threads].", minimum=1)


class Auto:
    """The registered ``auto`` executor."""

    name: ClassVar[str] = "auto"
    Options: ClassVar[type] = AutoOptions

    @staticmethod
    def slots(options: AutoOptions, device: torch.device, threads: int) -> int:
        if device.type != "cpu":
            return 0
        workers = options.workers or side_by_side_workers(threads)
        return workers if workers >= 2 else 0

    @staticmethod
    def start(options: AutoOptions, slots: int) -> Executor:
        return ProcessExecutor(slots, inline_below_s=WORTH_WORKERS_S) if slots else SerialExecutor()
