"""Seconds of distillation per seed-step when K seeds train as one model (``Task.run_seeds``), K = 1 ... 16.

Each benchmark runs the compressed arm's distillation step of an ER2 suite (its resolved params: shapes,
batch, ranks) on captures of the teacher's shapes, for K seeds stacked along the head axis
(``harness.tasks.er2.seed_batch``); K = 1 is the reference step one-at-a-time training runs. The extra info
holds seconds per seed-step, the step's counted FLOPs (``torch.utils.flop_counter``), the achieved FLOP/s and
the device. The data are random (a step's cost does not depend on the values); its answer positions are the
workload's own::

    tox -e bench -- -k seed_batch
    python tests/benchmarks/test_bench_seed_batch.py [--threads 1] [--device cuda] [--sizes 1 2 4 8 16 32 64]  # a table
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.core.devices import device_name
from harness.suite.loader import load_suites
from harness.tasks.er2.constructed import ConstructedRecallWorkload, ConstructedTeacher
from harness.tasks.er2.distill import cosine, distil_step
from harness.tasks.er2.mechanism.er2 import ER2Layer
from harness.tasks.er2.params import ER2Params
from harness.tasks.er2.seed_batch import distil_seeds_step
from harness.tasks.er2.task import ER2Task, make_workload

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("er2", "er2_passkey", "er2_mqar")
SIZES = (1, 2, 4, 8, 16)


def _params(suite: str) -> ER2Params:
    [resolved] = load_suites(ROOT / "suites" / f"{suite}.yaml", arms=["compressed"])
    return ER2Task.validate_params(resolved.params | resolved.arms["compressed"].params)


def _dims(params: ER2Params) -> tuple[int, int, int, object]:
    """(heads, kv heads, head dim, workload) of the suite's teacher, without training it."""
    if params.teacher.kind == "constructed":
        workload = ConstructedRecallWorkload(params.loads, params.workload.keys)
        config = ConstructedTeacher(workload.layout, params.teacher.code_dim, params.teacher.temperature).config
    else:
        workload = make_workload(params.workload)
        config = params.teacher.config(workload.vocab_size)
    return config.num_heads, config.num_kv_heads, config.head_dim, workload


def distillation(suite: str, seeds: int, device: torch.device, stacked: bool = True) -> Callable[[int], object]:
    """One distillation step of ``seeds`` seeds of the suite's compressed arm (stacked, or K = 1's reference)."""
    params = _params(suite)
    heads, kv_heads, dim, workload = _dims(params)
    generator = torch.Generator().manual_seed(0)
    _, answers = workload.training_batch(params.batch, params.train_context, generator)
    captures = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        shape = (params.batch, heads, params.train_context, dim)
        kv = (params.batch, kv_heads, params.train_context, dim)
        capture = {"q": torch.randn(shape), "k": torch.randn(kv), "v": torch.randn(kv), "out": torch.randn(shape)}
        if params.teacher.kind == "constructed":  # scored at its answers (a trained teacher's pool: everywhere)
            capture["answers"] = answers
        captures.append({name: value.to(device) for name, value in capture.items()})
    layers = [ER2Layer(heads, kv_heads, dim, feature_dim=params.feature_dim, residual_dim=params.residual_dim,
                       code_rank=params.code_rank, chunk_size=params.chunk_size, conv_kernel=params.conv_kernel,
                       residual_mode=params.residual_mode, state_dtype=params.state_dtype,
                       gate_mode=params.residual_gate, gain_limit=params.gain_limit).to(device) for _ in range(seeds)]
    rate = cosine(params.steps)
    if not stacked:
        return distil_step(layers[0], lambda _: captures[0], params.lr, rate, params.gain_lr_scale)
    return distil_seeds_step(layers, [lambda _, c=c: c for c in captures], params.lr, rate, params.gain_lr_scale)


def flops(step: Callable[[int], object]) -> int:
    """FLOPs of one step, forward and backward, as torch counts them."""
    with FlopCounterMode(display=False) as counter:
        step(0)
    return counter.get_total_flops()


def seconds_per_step(step: Callable[[int], object], device: torch.device, repeats: int = 5) -> float:
    """Median wall seconds of one step after two warm-up steps."""
    step(0), step(1)
    times = []
    for index in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        clock = time.perf_counter()
        step(index)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - clock)
    return sorted(times)[len(times) // 2]


@pytest.mark.benchmark(group="seed-batch")
@pytest.mark.parametrize("seeds", SIZES)
@pytest.mark.parametrize("suite", SUITES)
def test_bench_seed_batch_distillation(benchmark, suite, seeds):
    device = torch.device("cpu")
    step = distillation(suite, seeds, device, stacked=seeds > 1)
    counted = flops(step)
    step(0)
    result = benchmark.pedantic(step, args=(1,), rounds=3, iterations=1, warmup_rounds=1)
    mean = benchmark.stats.stats.mean
    benchmark.extra_info.update(seeds=seeds, seconds_per_seed_step=mean / seeds, flops_per_step=counted,
                                flops_per_s=counted / mean, device=device_name(device),
                                threads=torch.get_num_threads())
    assert len(result if isinstance(result, list) else [result]) == (seeds if seeds > 1 else 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--suites", nargs="+", default=list(SUITES))
    parser.add_argument("--threads", type=int, help="torch threads (the suites' trials run at 1)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"device {device_name(device)}, {torch.get_num_threads()} torch thread(s)")
    print(f"{'suite':<12} {'K':>3} {'s/step':>9} {'s/seed-step':>12} {'seeds/s vs K=1':>15} {'GFLOP/step':>11} {'GFLOP/s':>9}")
    for suite in args.suites:
        base = None
        for seeds in args.sizes:
            step = distillation(suite, seeds, device, stacked=seeds > 1)
            counted = flops(step)
            seconds = seconds_per_step(step, device)
            per_seed = seconds / seeds
            base = base or per_seed
            print(f"{suite:<12} {seeds:>3} {seconds:>9.4f} {per_seed:>12.5f} {base / per_seed:>15.2f} "
                  f"{counted / 1e9:>11.3f} {counted / seconds / 1e9:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
