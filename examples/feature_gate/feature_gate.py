"""A complete harness task in one file: the template for adding a fourth mechanism.

The mechanism: a learned gate per input feature (sigmoid, L1-penalised) in front of a linear
regressor. Its premise: when only a few features carry signal, gating out the rest lowers held-out
error. The control it must beat is the same regressor without gates (``model: linear``), trained
with the same steps, optimiser and data. Two controls make the verdict mean something:

- positive (``oracle``): the regressor reads only the truly informative features. It must beat the
  control, or the workload has no room for any feature selection to help;
- negative (``shuffled``): gates fixed on as many random features. It must not beat the control, or
  shrinking the input alone (not choosing it) is what helps.

Everything a trial draws comes from ``ctx.stream(purpose)``: every arm of a seed sees the same
problem and the same minibatch order, so treatment and control are paired by seed.
"""
from __future__ import annotations

import time
from typing import Literal

import torch
from pydantic import Field

from harness.measure.memory import tensor_bytes
from harness.tasks.base import Metric, Task, TaskParams, TrialContext


class FeatureGateParams(TaskParams):
    """Every numeric param declares its bounds (the contract test checks it): a suite value outside
    them is refused at validation, with file, line and key, before anything trains."""

    model: Literal["linear", "gated", "oracle", "shuffled"] = "linear"
    features: int = Field(32, ge=2, le=4096)
    informative: int = Field(4, ge=1, le=4096)
    samples: int = Field(128, ge=8, le=1_000_000)
    noise: float = Field(0.5, ge=0.0, le=100.0)
    steps: int = Field(300, ge=1, le=100_000)
    lr: float = Field(0.05, gt=0.0, le=10.0)
    l1: float = Field(0.01, ge=0.0, le=10.0, description="weight of the mean gate in the loss (gated only)")


def _problem(ctx: TrialContext, params: FeatureGateParams) -> dict[str, torch.Tensor]:
    """The seed's regression problem: built once per seed and shared by every arm (``ctx.cached``)."""
    generator = ctx.stream("problem")
    weights = torch.zeros(params.features)
    weights[: params.informative] = 1.0 + torch.rand(params.informative, generator=generator)
    x = torch.randn(3 * params.samples, params.features, generator=generator)
    y = x @ weights + params.noise * torch.randn(3 * params.samples, generator=generator)
    return {"x": x, "y": y}


class FeatureGateTask(Task):
    name = "feature_gate"
    version = "1"  # part of every trial's id: bump it whenever a change can move a result
    Params = FeatureGateParams
    description = "learned feature gates vs a plain linear regressor on sparse synthetic regression"
    metrics = (
        Metric(name="test_mse", direction="lower", unit="squared error", kind="quality",
               description="held-out mean squared error", key=True),
        Metric(name="gate_open", direction="none", unit="fraction", kind="info",
               description="mean gate (1 for the ungated models)"),
        Metric(name="param_bytes", direction="lower", unit="bytes", kind="memory",
               description="bytes of the trained parameters"),
        Metric(name="fit_samples_per_s", direction="higher", unit="samples/s", kind="speed",
               description="training throughput"),
    )
    smoke_params = {"steps": 40, "samples": 64}

    def run(self, params: FeatureGateParams, ctx: TrialContext) -> dict[str, float]:
        if params.informative > params.features:
            raise ValueError(f"informative ({params.informative}) must not exceed features ({params.features})")
        data = ctx.cached("problem", params.model_dump(include={"features", "informative", "samples", "noise"}),
                          lambda: _problem(ctx, params))
        n = params.samples
        x_train, y_train = data["x"][:n].to(ctx.device), data["y"][:n].to(ctx.device)
        x_test, y_test = data["x"][2 * n :].to(ctx.device), data["y"][2 * n :].to(ctx.device)

        weight = torch.zeros(params.features, device=ctx.device, requires_grad=True)
        gate_logits = torch.full((params.features,), 2.0, device=ctx.device, requires_grad=params.model == "gated")
        mask = torch.ones(params.features, device=ctx.device)
        if params.model == "oracle":
            mask = (torch.arange(params.features, device=ctx.device) < params.informative).float()
        elif params.model == "shuffled":
            chosen = torch.randperm(params.features, generator=ctx.stream("shuffled"))[: params.informative]
            mask = torch.zeros(params.features).index_fill_(0, chosen, 1.0).to(ctx.device)
        trained = [weight, gate_logits] if params.model == "gated" else [weight]
        optimiser = torch.optim.Adam(trained, lr=params.lr)
        order = ctx.stream("minibatches")

        def gates() -> torch.Tensor:
            return mask * torch.sigmoid(gate_logits) if params.model == "gated" else mask

        def step(_: int) -> dict[str, float]:
            batch = torch.randint(0, n, (32,), generator=order).to(ctx.device)
            fit_loss = torch.mean((x_train[batch] @ (gates() * weight) - y_train[batch]) ** 2)
            loss = fit_loss + (params.l1 * gates().mean() if params.model == "gated" else 0.0)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            return {"loss": loss.item(), "mse": fit_loss.item()}

        started = time.perf_counter()
        ctx.fit(params.steps, step)
        elapsed = time.perf_counter() - started
        with torch.no_grad():
            test_mse = torch.mean((x_test @ (gates() * weight) - y_test) ** 2).item()
            gate_open = gates().mean().item()
        return {
            "test_mse": test_mse,
            "gate_open": gate_open,
            "param_bytes": float(sum(tensor_bytes(p) for p in trained)),
            "fit_samples_per_s": params.steps * 32 / elapsed,
        }
