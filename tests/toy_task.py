"""A small real task that exercises the spine: logistic regression trained with SGD.

Arms differ by optimiser settings, so treatment vs control is a genuine comparison; knobs
make a trial fail, kill its process, produce a NaN loss, or run slowly (for interrupt tests).
"""
from __future__ import annotations

import os
import time

import torch
from pydantic import Field

from harness.tasks.base import Metric, Task, TaskParams, TrialContext
from harness.measure.memory import tensor_bytes


class ToyParams(TaskParams):
    steps: int = Field(60, ge=1)
    lr: float = Field(0.1, gt=0)
    momentum: float = Field(0.0, ge=0, lt=1)
    features: int = Field(8, ge=1)
    samples: int = Field(256, ge=2)
    fail: bool = False
    exit_process: bool = False  # the worker process dies mid-trial, as on an OOM kill
    nan_at_step: int = Field(-1, ge=-1, description="-1: never")
    seconds_per_step: float = Field(0.0, ge=0)


class ToyTask(Task):
    name = "toy"
    version = "2"
    Params = ToyParams
    description = "logistic regression on a fixed synthetic problem (spine tests)"
    smoke_params = {"steps": 20}
    metrics = (
        Metric(name="accuracy", direction="higher", unit="fraction", kind="quality", description="held-out accuracy",
               key=True),
        Metric(name="loss", direction="lower", unit="nats", kind="quality", description="final held-out loss", key=True),
        Metric(name="samples_per_s", direction="higher", unit="samples/s", kind="speed",
               description="training throughput"),
        Metric(name="param_bytes", direction="lower", unit="bytes", kind="memory", description="bytes of the weights"),
        Metric(name="budget/steps", direction="none", unit="steps", kind="info",
               description="optimizer steps the arm trained"),
        Metric(name="budget/examples", direction="none", unit="examples", kind="info",
               description="training examples the arm saw"),
    )

    def run(self, params: ToyParams, ctx: TrialContext) -> dict[str, float]:
        if params.fail:
            raise RuntimeError("this trial was configured to fail")
        if params.exit_process:
            os._exit(1)
        data = torch.Generator().manual_seed(1234)  # the problem is fixed; the seed drives init and order
        truth = torch.randn(params.features, generator=data)
        x = torch.randn(2 * params.samples, params.features, generator=data)
        y = (x @ truth + 0.5 * torch.randn(2 * params.samples, generator=data) > 0).float()
        x_train, y_train, x_test, y_test = x[: params.samples], y[: params.samples], x[params.samples :], y[params.samples :]
        weight = (0.1 * torch.randn(params.features)).requires_grad_()
        optimiser = torch.optim.SGD([weight], lr=params.lr, momentum=params.momentum)
        bar = ctx.logger.progress(params.steps, "train")
        started = time.perf_counter()
        for step in range(params.steps):
            batch = torch.randint(0, params.samples, (32,))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(x_train[batch] @ weight, y_train[batch])
            if step == params.nan_at_step:
                loss = loss * float("nan")
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            ctx.logger.log_metric("train/loss", loss.item(), step)
            bar.advance()
            if params.seconds_per_step:
                time.sleep(params.seconds_per_step)
        elapsed = time.perf_counter() - started
        with torch.no_grad():
            logits = x_test @ weight
            test_loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y_test).item()
            accuracy = ((logits > 0).float() == y_test).float().mean().item()
        return {
            "accuracy": accuracy,
            "loss": test_loss,
            "samples_per_s": params.steps * 32 / elapsed,
            "param_bytes": float(tensor_bytes(weight)),
            "budget/steps": float(params.steps),
            "budget/examples": float(params.steps * 32),
        }
