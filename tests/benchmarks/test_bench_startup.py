"""Start-up time of the `harness` command, each a fresh process as a user types it (group ``startup``).

``harness --help`` loads no command module and no torch (target: under 2 s on a quiet machine);
``validate`` and ``list`` load the tasks, hence torch. The load average when each benchmark started is
in its extra info: a figure taken while other jobs share the cores is not a quiet machine's::

    tox -e bench -- -k startup
    pytest tests/benchmarks -k startup --benchmark-only --benchmark-compare
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("harness")  # the console script installed beside this interpreter


def _command(*args: str) -> list[str]:
    """The installed `harness` script, or the module where this interpreter has no script beside it."""
    return [str(SCRIPT), *args] if SCRIPT.exists() else [sys.executable, "-m", "harness", *args]


@pytest.mark.benchmark(group="startup", disable_gc=False, warmup=False)
@pytest.mark.parametrize(("args", "rounds"), [(("--help",), 5), (("validate", "suites/all.yaml"), 3), (("list",), 3)],
                         ids=["help", "validate", "list"])
def test_bench_startup(benchmark, args: tuple[str, ...], rounds: int) -> None:
    command = _command(*args)

    def start() -> None:
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=600)

    benchmark.extra_info["load_average_1min"] = round(os.getloadavg()[0], 2)
    benchmark.extra_info["cpus"] = os.cpu_count()
    benchmark.pedantic(start, rounds=rounds, iterations=1, warmup_rounds=1)
