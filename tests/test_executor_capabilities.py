"""Executors describe themselves: each declares what it does with trials (``Capabilities``), which the run
reads instead of its name, and its options (its ``Options`` dataclass), from which the CLI builds its flags.
A third party's executor with an option of its own is one module (here, this one) and an entry point; no
module outside ``harness/execution/`` compares an executor's name."""
from __future__ import annotations

import ast
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterator, Sequence

import pytest
import torch
from fault_injection import harness_here

from harness.core.record import TrialRecord
from harness.core.terminal import Console
from harness.execution.executor import Capabilities, TrialJob, capabilities_of, execute_job
from harness.execution.parallel import ProcessExecutor, bounded
from harness.execution.registry import (BUILTIN_EXECUTORS, ENTRY_POINT_GROUP, ExecutorError, executor_kind,
                                        offered_options, option, start_executor)
from harness.store import iter_trial_files, read_trial

HARNESS = Path(__file__).resolve().parents[1] / "harness"


# --- a third party's executor with one option: the whole of it ---------------------------------------------

class Lanes:
    """Trials one at a time in this process, whatever the lanes (it records what it was started with)."""

    name: ClassVar[str] = "lanes"
    started_with: ClassVar[list[int | None]] = []

    def run(self, jobs: Sequence[TrialJob], console: Console) -> Iterator[TrialRecord]:
        for job in jobs:
            yield from execute_job(job, console)

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class LanesOptions:
    lanes: int | None = option("Lanes the trials run in.", minimum=1)


class LanesKind:
    name: ClassVar[str] = "lanes"
    Options: ClassVar[type] = LanesOptions

    @staticmethod
    def slots(options: LanesOptions, device: torch.device, threads: int) -> int:
        return 0

    @staticmethod
    def start(options: LanesOptions, slots: int) -> Lanes:
        Lanes.started_with.append(options.lanes)
        return Lanes()


@pytest.fixture
def registered_lanes(monkeypatch):
    """``LanesKind`` registered as its package's one line of packaging would register it."""
    extra = importlib.metadata.EntryPoint("lanes", f"{__name__}:LanesKind", ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points

    def entry_points(**selection):
        found = list(real(**selection))
        return found + [extra] if selection.get("group") == ENTRY_POINT_GROUP else found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    Lanes.started_with.clear()


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """A run pins this process's torch threads; later tests must not inherit that."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def run_toy(tmp_path: Path, toy_suite: Path, *flags: str):
    return harness_here("run", str(toy_suite), "--profile", "smoke", "--results", str(tmp_path / "r"), "--no-mlflow",
                        "--threads", "1", *flags)


def test_a_third_party_option_is_a_flag_of_harness_run_and_reaches_its_executor(tmp_path, toy_suite,
                                                                                registered_lanes):
    helped = harness_here("run", "--executor", "lanes", "--help")
    assert helped.returncode == 0 and "--lanes INTEGER RANGE" in helped.stdout
    assert "Lanes the trials run in. For --executor lanes." in " ".join(helped.stdout.split())
    done = run_toy(tmp_path, toy_suite, "--executor", "lanes", "--lanes", "3")
    assert done.returncode == 0, done.stderr
    assert Lanes.started_with == [3]
    records = [read_trial(path) for path in iter_trial_files(tmp_path / "r" / "toy" / "smoke")]
    assert len(records) == 3 and {r.environment["executor"] for r in records} == {"lanes"}


@pytest.mark.parametrize("flags, says", [
    (("--executor", "lanes", "--lanes", "0"), "error: Invalid value for '--lanes'"),  # its minimum
    (("--executor", "lanes", "--workers", "2"), "error: --workers does not apply to --executor lanes (its options: "
                                                "--lanes)"),
    (("--executor", "serial", "--lanes", "2"), "error: No such option '--lanes'"),  # offered where it is named
])
def test_an_option_the_named_executor_does_not_take_is_one_error_line(tmp_path, toy_suite, registered_lanes,
                                                                      flags, says):
    done = run_toy(tmp_path, toy_suite, *flags)
    assert done.returncode == 2 and done.stderr.startswith(says) and done.stderr.count("\n") == 1, done.stderr
    assert Lanes.started_with == [] and not (tmp_path / "r" / "toy").exists()
    if "serial" in flags:
        assert "another package's executor offers its options when --executor names it" in done.stderr


def test_the_built_in_options_are_their_executors_fields():
    offered = {o.flag: o for o in offered_options(sorted(BUILTIN_EXECUTORS))}
    assert set(offered) == {"--workers", "--ray-address", "--ray-workers"}
    assert offered["--workers"].executors == ("auto", "parallel") and offered["--workers"].type is int
    assert offered["--ray-address"].type is str and offered["--ray-workers"].minimum == 1


# --- capabilities, read instead of names ------------------------------------------------------------------

@pytest.mark.parametrize("name, declared", [
    ("serial", Capabilities()),
    ("parallel", Capabilities(side_by_side=True, in_workers=True)),
])
def test_the_built_in_executors_declare_what_they_do(name, declared):
    kind = executor_kind(name)
    executor = start_executor(name, kind, kind.Options(), 2)
    try:
        assert capabilities_of(executor) == declared
    finally:
        executor.close()


def test_ray_declares_remote_workers_without_importing_ray():
    from harness.execution.ray_executor import RayExecutor

    assert RayExecutor.capabilities == Capabilities(remote=True, quiet_timing=False)


def test_a_remote_executor_cannot_claim_timings_taken_alone():
    with pytest.raises(ValueError, match="quiet room"):
        Capabilities(remote=True)


class _Declared(Lanes):
    def __init__(self, capabilities: Capabilities) -> None:
        self.capabilities = capabilities


def test_a_timeout_moves_trials_into_killable_processes_unless_the_executor_says_they_are():
    undeclared = Lanes()
    assert bounded(undeclared, None) is undeclared
    assert isinstance(bounded(undeclared, 5.0), ProcessExecutor)  # declares nothing: one trial at a time here
    for declared in (Capabilities(remote=True, quiet_timing=False), Capabilities(side_by_side=True, in_workers=True)):
        executor = _Declared(declared)
        assert bounded(executor, 5.0) is executor
    auto = ProcessExecutor(2, inline_below_s=5.0)  # its first trials run in this process
    assert isinstance(bounded(auto, 5.0), ProcessExecutor) and bounded(auto, 5.0) is not auto


def test_capabilities_of_another_type_are_refused_at_start(monkeypatch):
    monkeypatch.setattr(LanesKind, "start", staticmethod(lambda options, slots: _Declared("remote")))
    with pytest.raises(ExecutorError, match="^executor 'lanes' declares capabilities 'remote', not "):
        start_executor("lanes", LanesKind, LanesOptions(), 0)


# --- no module outside harness/execution/ judges an executor by name ---------------------------------------

def _mentions_executor(node: ast.expr) -> bool:
    parts = [n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
             if isinstance(n, (ast.Name, ast.Attribute))]
    return any("executor" in part.lower() for part in parts)


def _names_an_executor(node: ast.expr) -> bool:
    """``something_executor.name``, or a literal built-in executor name (alone or in a tuple, list or set)."""
    if isinstance(node, ast.Attribute) and node.attr == "name" and _mentions_executor(node.value):
        return True
    return any(isinstance(n, ast.Constant) and n.value in BUILTIN_EXECUTORS for n in ast.walk(node))


def executor_name_comparisons(source: str, where: str) -> list[str]:
    """Each comparison in ``source`` of an executor's name: an executor's ``.name``, or an operand that mentions
    an executor against a built-in executor's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        by_attribute = any(isinstance(o, ast.Attribute) and o.attr == "name" and _mentions_executor(o.value)
                           for o in operands)
        by_literal = any(_mentions_executor(o) for o in operands) and any(_names_an_executor(o) for o in operands)
        if by_attribute or by_literal:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_execution_compares_an_executors_name():
    outside = [path for path in sorted(HARNESS.rglob("*.py")) if (HARNESS / "execution") not in path.parents]
    assert len(outside) > 50
    found = [hit for path in outside
             for hit in executor_name_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(HARNESS)))]
    assert found == []


def test_the_name_check_finds_the_comparisons_it_is_for():
    registry = (HARNESS / "execution" / "registry.py").read_text(encoding="utf-8")
    assert any("executor.name != name" in hit for hit in executor_name_comparisons(registry, "registry.py"))
    sample = ("if executor.name in ('serial', 'ray'): pass\nif options.executor == 'ray': pass\n"
              "if session.executor.name != 'x': pass\nif device == 'auto': pass\nif task.name == 'ray': pass\n")
    assert [hit.split(":")[1] for hit in executor_name_comparisons(sample, "sample")] == ["1", "2", "3"]
