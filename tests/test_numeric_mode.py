"""The numeric mode: pinned before torch loads in every process that trains, recorded with every trial,
and a gate that compares a run only with a baseline of its own mode."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from fault_injection import cli_env, harness, harness_here, trial_records
from toy_task import ToyTask

from harness.core import numeric
from harness.core.numeric import ATEN_VARIABLE, CAPABILITY_NAMES, DETERMINISTIC, FAST, PIN_VARIABLES

PINNED = CAPABILITY_NAMES[numeric.pins()[ATEN_VARIABLE]]  # what torch dispatches to under the pin here
SMOKE = ("--profile", "smoke", "--no-mlflow", "--threads", "1", "--executor", "serial")


@pytest.fixture(autouse=True)
def keep_process_state():
    """A run sets this process's torch threads and numeric mode; later tests must not inherit them."""
    threads, saved = torch.get_num_threads(), {k: os.environ.get(k) for k in (numeric.MODE_VARIABLE, *PIN_VARIABLES)}
    yield
    torch.set_num_threads(threads)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def environments(results: Path) -> list[dict[str, str]]:
    return [record["environment"] for record in trial_records(results).values()]


def quality(results: Path) -> dict[str, dict[str, float]]:
    """Every metric but the timings, by trial."""
    speed = {m.name for m in ToyTask.metrics if m.kind == "speed"}
    return {trial_id: {k: v for k, v in record["metrics"].items() if k not in speed}
            for trial_id, record in trial_records(results).items()}


@pytest.mark.parametrize("args, mode", [
    (["run", "s.yaml", "--numeric", "fast"], FAST),
    (["run", "s.yaml", "--numeric=fast", "--threads", "1"], FAST),
    (["run", "s.yaml", "--numeric", "deterministic"], DETERMINISTIC),
    (["run", "s.yaml"], DETERMINISTIC),
    (["run", "s.yaml", "--numeric", "quick"], DETERMINISTIC),  # click refuses the value itself
    (["run", "s.yaml", "--numeric"], DETERMINISTIC),
])
def test_the_mode_is_read_from_the_command_line_before_click_parses_it(args, mode) -> None:
    assert numeric.mode_from_argv(args) == mode


def test_the_pins_follow_the_cpu() -> None:
    assert numeric.pins(frozenset({"sse2", "avx", "avx2", "fma", "avx512f"}), "x86_64") == {
        "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert numeric.pins(frozenset({"sse2", "avx"}), "x86_64") == {
        "ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}
    assert numeric.pins(frozenset({"asimd", "sve"}), "aarch64") == {"ATEN_CPU_CAPABILITY": "default"}


def test_deterministic_overrides_a_machines_level_and_fast_leaves_the_environment_alone() -> None:
    chosen = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO"}
    pinned = dict(chosen)
    numeric.set_environment(DETERMINISTIC, pinned)
    assert pinned == {**numeric.pins(), numeric.MODE_VARIABLE: DETERMINISTIC}
    left = dict(chosen)
    numeric.set_environment(FAST, left)
    assert left == {**chosen, numeric.MODE_VARIABLE: FAST}
    with pytest.raises(ValueError, match="unknown numeric mode 'quick'"):
        numeric.set_environment("quick", {})


def test_workers_started_elsewhere_get_the_mode_and_cuda_follows_it(monkeypatch) -> None:
    from harness.execution.ray_executor import worker_env
    from harness.services.seeding import deterministic_kernels

    numeric.apply(DETERMINISTIC)
    assert {k: worker_env()[k] for k in (numeric.MODE_VARIABLE, *numeric.pins())} == {
        numeric.MODE_VARIABLE: DETERMINISTIC, **numeric.pins()}
    assert deterministic_kernels(torch.device("cuda")) and deterministic_kernels(torch.device("cpu"))
    monkeypatch.setenv(numeric.MODE_VARIABLE, FAST)
    assert worker_env()[numeric.MODE_VARIABLE] == FAST
    assert not deterministic_kernels(torch.device("cuda")) and deterministic_kernels(torch.device("cpu"))


def test_a_run_records_its_mode_and_the_isa_torch_dispatches_to(tmp_path, toy_suite) -> None:
    pinned, fast = tmp_path / "pinned", tmp_path / "fast"
    assert harness_here("run", str(toy_suite), *SMOKE, "--results", str(pinned)).returncode == 0
    assert harness_here("run", str(toy_suite), *SMOKE, "--results", str(fast), "--numeric", "fast").returncode == 0
    for env in environments(pinned):
        assert env["numeric_mode"] == DETERMINISTIC and env["cpu_capability"] == PINNED
        assert env["deterministic_algorithms"] == "true"
        assert {name: env[f"env_{name}"] for name in numeric.pins()} == numeric.pins()
    assert {env["numeric_mode"] for env in environments(fast)} == {FAST}


def test_torch_loaded_before_the_pins_is_refused_in_one_line(tmp_path, toy_suite, monkeypatch) -> None:
    other = next(level for level, name in CAPABILITY_NAMES.items() if name != torch.backends.cpu.get_cpu_capability())
    monkeypatch.setattr(numeric, "pins", lambda: {ATEN_VARIABLE: other})
    outcome = harness_here("run", str(toy_suite), *SMOKE, "--results", str(tmp_path / "r"))
    assert outcome.returncode == 2 and "Traceback" not in outcome.stderr
    assert outcome.stderr.startswith("error: the deterministic numeric mode pins torch's CPU kernels to "
                                     f"{CAPABILITY_NAMES[other]}") and outcome.stderr.count("\n") == 1
    assert not (tmp_path / "r" / "toy").exists()


def test_a_worker_whose_torch_ignores_the_pins_fails_its_trial(monkeypatch) -> None:
    from harness.execution.executor import TrialJob, execute_job
    from harness.execution.trials import Trial
    from harness.core.record import Status

    other = next(level for level, name in CAPABILITY_NAMES.items() if name != torch.backends.cpu.get_cpu_capability())
    monkeypatch.setenv(numeric.MODE_VARIABLE, DETERMINISTIC)
    monkeypatch.setenv(ATEN_VARIABLE, other)
    trial = Trial(suite="toy", profile="smoke", task="toy_task:ToyTask", task_version="1", arm="sgd", arm_label="sgd",
                  seed=0, point={}, params={}, code="0" * 64)
    job = TrialJob("toy_task:ToyTask", (trial,), "cpu", Path("/nonexistent/cache"), Path("/nonexistent/work"), {}, 1, 1, 1)
    [record] = execute_job(job)
    assert record.status == Status.FAILED and "loaded before ATEN_CPU_CAPABILITY was set" in record.error


def test_the_gate_refuses_a_baseline_of_the_other_mode(tmp_path, toy_suite) -> None:
    pinned, fast, baselines = tmp_path / "pinned", tmp_path / "fast", tmp_path / "baselines"
    assert harness_here("run", str(toy_suite), *SMOKE, "--results", str(pinned)).returncode == 0
    assert harness_here("run", str(toy_suite), *SMOKE, "--results", str(fast), "--numeric", "fast").returncode == 0

    refused = harness_here("baseline", "save", str(fast / "toy" / "smoke"), "--out", str(baselines))
    assert refused.returncode == 2 and "ran in the fast numeric mode; a baseline is saved from a deterministic run" \
        in refused.stderr and not baselines.exists()
    assert harness_here("baseline", "save", str(pinned / "toy" / "smoke"), "--out", str(baselines)).returncode == 0
    saved = baselines / "toy-smoke-cpu.json"
    assert json.loads(saved.read_text())["environment"]["numeric_mode"] == DETERMINISTIC

    assert harness_here("gate", str(pinned / "toy" / "smoke"), "--baselines-dir", str(baselines)).returncode == 0
    across = harness_here("gate", str(fast / "toy" / "smoke"), "--baselines-dir", str(baselines))
    assert across.returncode == 2 and across.stderr.count("\n") == 1
    assert "was saved from a run in the deterministic numeric mode, these results ran in the fast mode" in across.stderr

    legacy = json.loads(saved.read_text())
    del legacy["environment"]["numeric_mode"]  # a baseline saved before modes were recorded
    saved.write_text(json.dumps(legacy))
    assert harness_here("gate", str(fast / "toy" / "smoke"), "--baselines-dir", str(baselines)).returncode != 2

    assert harness_here("baseline", "save", str(fast / "toy" / "smoke"), "--out", str(baselines),
                        "--numeric", "fast").returncode == 0
    assert json.loads(saved.read_text())["environment"]["numeric_mode"] == FAST
    assert harness_here("gate", str(fast / "toy" / "smoke"), "--baselines-dir", str(baselines)).returncode == 0


def test_a_reproduction_reruns_in_the_mode_asked_and_names_the_recorded_one(tmp_path, toy_suite) -> None:
    original = tmp_path / "original"
    assert harness_here("run", str(toy_suite), *SMOKE, "--results", str(original), "--numeric", "fast").returncode == 0
    target, trust = str(original / "toy" / "smoke"), ("--no-mlflow", "--task-path", "toy_task:ToyTask")
    again = harness_here("reproduce", target, "--out", str(tmp_path / "fast"), *trust, "--numeric", "fast")
    assert again.returncode == 0, again.stderr
    assert {env["numeric_mode"] for env in environments(tmp_path / "fast")} == {FAST}
    pinned = harness_here("reproduce", target, "--out", str(tmp_path / "pinned"), *trust)
    assert ["numeric_mode", FAST, DETERMINISTIC] in [line.split() for line in pinned.stdout.splitlines()]
    assert {env["numeric_mode"] for env in environments(tmp_path / "pinned")} == {DETERMINISTIC}


@pytest.mark.integration  # the pins must be in the environment before torch loads: a new interpreter each
def test_the_cli_pins_every_process_so_two_machines_isa_choices_give_the_same_bits(tmp_path, toy_suite) -> None:
    """Each run's environment names the levels a CPU of that ISA would pick (torch's and MKL's); the
    trials run in worker processes. The deterministic mode trains both on the pinned path: the same
    quality values, bit for bit, and the same ISA recorded."""
    machines = {"avx512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
                "scalar": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}}
    values = {}
    for name, chosen in machines.items():
        results = tmp_path / name
        run = harness("run", str(toy_suite), "--profile", "smoke", "--no-mlflow", "--threads", "1", "--executor",
                      "parallel", "--workers", "2", "--results", str(results), env=cli_env(**chosen))
        assert run.returncode == 0, run.stderr
        assert {(e["numeric_mode"], e["cpu_capability"]) for e in environments(results)} == {(DETERMINISTIC, PINNED)}
        values[name] = quality(results)
    assert values["avx512"] == values["scalar"] and len(values["avx512"]) == 3
