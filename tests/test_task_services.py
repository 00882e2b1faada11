"""The services a TrialContext gives tasks: named streams, the cross-process artifact cache and
the training loop, each run for real (the cache race uses two spawned processes)."""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from fault_injection import hang_guard

from harness.services.cache import artifact_key, artifact_path
from harness.execution.executor import TrialRecorder
from harness.services.training_loop import NonFiniteLoss
from harness.services.seeding import derive_seed, numpy_stream, torch_stream
from harness.store import write_atomic
from harness.tasks.base import TrialContext

IDENTITY = {"width": 4, "recipe": {"steps": 3}}


def make_ctx(root: Path, seed: int = 0) -> TrialContext:
    return TrialContext(
        seed=seed, device=torch.device("cpu"), logger=TrialRecorder(), cache_dir=root / "cache",
        work_dir=root / "work", task="svc", task_version="1",
    )


def pid_tensor() -> dict[str, torch.Tensor]:
    """An artifact whose content names the process that built it."""
    return {"weights": torch.full((4,), float(os.getpid()))}


# --- streams ------------------------------------------------------------------------------------

def test_same_purpose_same_sequence_and_any_change_another(tmp_path: Path) -> None:
    def draw(seed: int, *purpose: object) -> torch.Tensor:
        return torch.rand(8, generator=make_ctx(tmp_path, seed).stream(*purpose))

    reference = draw(3, "bank", 256)
    assert torch.equal(reference, draw(3, "bank", 256))
    for other in (draw(4, "bank", 256), draw(3, "bank", 2048), draw(3, "eval", 256), draw(3, "bank")):
        assert not torch.equal(reference, other)
    rng = make_ctx(tmp_path, 3).numpy_stream("bank", 256)
    assert np.array_equal(rng.random(8), numpy_stream(3, "bank", 256).random(8))
    assert not np.array_equal(numpy_stream(3, "bank", 256).random(8), numpy_stream(3, "eval", 256).random(8))
    assert torch_stream(3, "bank", 256).initial_seed() == derive_seed(3, "bank", 256) < 2**63


# --- the artifact cache ---------------------------------------------------------------------------

def test_a_loaded_artifact_names_the_trial_that_built_it(tmp_path: Path) -> None:
    builder, loader = make_ctx(tmp_path), make_ctx(tmp_path)
    builder.trial_id, loader.trial_id = "b1d4", "10ad"
    builder.cached("table", IDENTITY, lambda: {"w": torch.ones(2)})
    loader.cached("table", IDENTITY, lambda: {"w": torch.zeros(2)})
    built, loaded = builder.logger.details["cache"]["table"], loader.logger.details["cache"]["table"]
    assert (built["loaded"], built["built_by"]) == (False, "b1d4")
    assert (loaded["loaded"], loaded["built_by"], loaded["sha256"]) == (True, "b1d4", built["sha256"])


def test_built_once_then_loaded_with_the_same_content(tmp_path: Path) -> None:
    builds: list[int] = []

    def build() -> dict[str, torch.Tensor]:
        builds.append(1)
        return {"weights": torch.arange(6.0), "note": torch.tensor(2)}

    first_ctx, second_ctx = make_ctx(tmp_path), make_ctx(tmp_path)
    first = first_ctx.cached("table", IDENTITY, build, restore=lambda p: p["weights"] * p["note"])
    second = second_ctx.cached("table", IDENTITY, build, restore=lambda p: p["weights"] * p["note"])
    assert builds == [1] and torch.equal(first, second) and torch.equal(first, 2 * torch.arange(6.0))
    entry = first_ctx.logger.details["cache"]["table"]
    assert entry["loaded"] is False and second_ctx.logger.details["cache"]["table"] == dict(entry, loaded=True)

    assert entry["built_by"] == "unknown"  # a context that names no trial
    make_ctx(tmp_path, seed=1).cached("table", IDENTITY, build)  # another seed is another artifact
    make_ctx(tmp_path).cached("table", {**IDENTITY, "width": 5}, build)  # and so is another identity
    assert len(builds) == 3


def test_build_leaves_the_global_rng_where_a_load_would(tmp_path: Path) -> None:
    def build() -> dict[str, torch.Tensor]:
        return {"noise": torch.rand(100)}  # draws from the global RNG

    results = []
    for _ in range(2):  # first builds, second loads: the trial's next draw is the same
        torch.manual_seed(0)
        make_ctx(tmp_path).cached("noise", IDENTITY, build)
        results.append(torch.rand(3))
    assert torch.equal(results[0], results[1])


def test_leftover_tmp_and_lock_files_are_never_read(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    path = artifact_path(ctx.cache_dir, "svc", "table", artifact_key("svc", "1", "table", 0, "cpu", IDENTITY))
    path.parent.mkdir(parents=True)
    (path.parent / f".{path.name}.crashed.tmp").write_bytes(b"half of a torch.save")  # a writer that died
    path.with_name(path.name + ".lock").touch()
    value = ctx.cached("table", IDENTITY, lambda: {"weights": torch.ones(3)})
    assert torch.equal(value["weights"], torch.ones(3)) and ctx.logger.details["cache"]["table"]["loaded"] is False
    assert path.is_file()


@pytest.mark.parametrize("damage", ["truncated", "altered"])
def test_a_truncated_or_altered_artifact_is_rebuilt_not_loaded(tmp_path: Path, damage: str) -> None:
    def build() -> dict[str, torch.Tensor]:
        return {"weights": torch.arange(4.0)}

    ctx = make_ctx(tmp_path)
    ctx.cached("table", IDENTITY, build)
    path = artifact_path(ctx.cache_dir, "svc", "table", artifact_key("svc", "1", "table", 0, "cpu", IDENTITY))
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    else:  # a valid torch file with other weights
        torch.save({"weights": torch.full((4,), 666.0)}, path)
    again = make_ctx(tmp_path)
    value = again.cached("table", IDENTITY, build)
    assert torch.equal(value["weights"], torch.arange(4.0))
    assert again.logger.details["cache"]["table"]["loaded"] is False
    assert make_ctx(tmp_path).cached("table", IDENTITY, build)["weights"].equal(torch.arange(4.0))


def test_the_record_names_the_bytes_loaded_so_a_replaced_artifact_shows(tmp_path: Path) -> None:
    """Whoever can write the cache can replace an artifact together with its ``.sha256``; it then loads, but
    the trial's details carry the hash of what was loaded, which differs from the builder's."""
    ctx = make_ctx(tmp_path)
    ctx.cached("table", IDENTITY, lambda: {"weights": torch.arange(4.0)})
    path = artifact_path(ctx.cache_dir, "svc", "table", artifact_key("svc", "1", "table", 0, "cpu", IDENTITY))
    built = ctx.logger.details["cache"]["table"]["sha256"]
    assert built == hashlib.sha256(path.read_bytes()).hexdigest()
    unchanged = make_ctx(tmp_path)
    unchanged.cached("table", IDENTITY, lambda: {"weights": torch.zeros(4)})
    assert unchanged.logger.details["cache"]["table"] == {**ctx.logger.details["cache"]["table"], "loaded": True}

    torch.save({"weights": torch.full((4,), 666.0)}, path)
    path.with_name(path.name + ".sha256").write_text(hashlib.sha256(path.read_bytes()).hexdigest())
    replaced = make_ctx(tmp_path)
    value = replaced.cached("table", IDENTITY, lambda: {"weights": torch.arange(4.0)})
    entry = replaced.logger.details["cache"]["table"]
    assert torch.equal(value["weights"], torch.full((4,), 666.0)) and entry["loaded"] is True
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() != built


def test_a_write_that_fails_halfway_leaves_no_artifact(tmp_path: Path) -> None:
    target = tmp_path / "artifact.pt"

    def half_then_crash(handle) -> None:
        handle.write(b"partial bytes")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, half_then_crash)
    assert list(tmp_path.iterdir()) == []


def test_a_build_that_fails_stores_nothing_and_the_next_trial_builds(tmp_path: Path) -> None:
    def failing() -> dict[str, torch.Tensor]:
        raise RuntimeError("diverged")

    with pytest.raises(RuntimeError, match="diverged"):
        make_ctx(tmp_path).cached("table", IDENTITY, failing)
    value = make_ctx(tmp_path).cached("table", IDENTITY, lambda: {"weights": torch.zeros(2)})
    assert torch.equal(value["weights"], torch.zeros(2))


def _race_worker(root: str, builds_log: str, start: multiprocessing.synchronize.Barrier, out: str) -> None:
    def build() -> dict[str, torch.Tensor]:
        with open(builds_log, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        time.sleep(1.0)  # hold the lock while the other process arrives
        return pid_tensor()

    ctx = make_ctx(Path(root))
    start.wait()
    value = ctx.cached("shared", IDENTITY, build)
    torch.save({"weights": value["weights"], "loaded": ctx.logger.details["cache"]["shared"]["loaded"]}, out)


@pytest.mark.integration  # two processes
def test_two_processes_racing_build_once_and_share_the_content(tmp_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(2)
    builds_log = tmp_path / "builds.log"
    outs = [tmp_path / f"out{n}.pt" for n in range(2)]
    workers = [spawn.Process(target=_race_worker, args=(str(tmp_path), str(builds_log), start, str(out)))
               for out in outs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    builders = builds_log.read_text().split()
    assert len(builders) == 1
    results = [torch.load(out, weights_only=True) for out in outs]
    assert sorted(r["loaded"] for r in results) == [False, True]
    for result in results:
        assert torch.equal(result["weights"], torch.full((4,), float(builders[0])))


# --- the training loop ----------------------------------------------------------------------------

def test_fit_logs_curves_returns_and_records_the_final_values(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    final = ctx.fit(7, lambda step: {"loss": 1.0 / (step + 1), "acc": step / 10}, name="warmup", log_every=3)
    assert final == {"loss": 1.0 / 7, "acc": 0.6}
    assert [step for step, _ in ctx.logger.curves["warmup/loss"]] == [0, 3, 6]
    assert ctx.logger.curves["warmup/acc"][-1] == [6, 0.6]
    assert ctx.fit(2, lambda step: 0.5, name="plain") == {"loss": 0.5}
    assert ctx.logger.details["fit"] == {"warmup": {"steps": 7, "final": final},
                                         "plain": {"steps": 2, "final": {"loss": 0.5}}}


def test_fit_stops_at_the_first_non_finite_value(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    seen: list[int] = []

    def step(index: int) -> dict[str, float]:
        seen.append(index)
        return {"loss": 1.0, "energy": float("inf") if index == 2 else 0.0}

    with pytest.raises(NonFiniteLoss, match="energy at step 2"):
        ctx.fit(10, step, name="train", log_every=100)
    assert seen == [0, 1, 2]


def test_cpu_trials_run_deterministic_kernels_without_loading_the_compiler_stack() -> None:
    """The kernels' determinism flag is set as ``torch.use_deterministic_algorithms`` sets it, and a compiler
    imported afterwards agrees with it; importing that compiler for the flag alone would cost every trial
    process seconds."""
    import subprocess
    import sys

    script = (
        "import sys, torch\n"
        "from harness.services.seeding import seed_everything\n"
        "seed_everything(0, torch.device('cpu'))\n"
        "print(torch.are_deterministic_algorithms_enabled(), 'torch._inductor' in sys.modules)\n"
        "import torch._inductor.config as config\n"
        "print(config.deterministic)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    env.pop("TORCHINDUCTOR_DETERMINISTIC", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=hang_guard(600))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True"]
