"""The toy task with seeds trained as one model: K weight vectors stacked, each seed's batches drawn from its
own generator, one SGD over the stack. The spine's seed-batch tests run it (a real batched model, seconds)."""
from __future__ import annotations

from typing import Sequence

import torch
from pydantic import Field

from harness.measure.memory import tensor_bytes
from harness.tasks.base import TrialContext
from toy_task import ToyParams, ToyTask


class StackedToyParams(ToyParams):
    fail_batched: bool = False  # the batched run raises (its seeds must rerun alone)
    fail_seed: int = Field(-1, ge=-1, description="this seed fails alone and batched (-1: none)")
    alone: bool = False  # an arm the task does not batch (its seeds run one at a time)


class StackedToy(ToyTask):
    name = "stacked_toy"
    Params = StackedToyParams
    seed_batching = True

    @classmethod
    def batches_seeds(cls, params: StackedToyParams) -> bool:
        return not params.alone

    def run(self, params: StackedToyParams, ctx: TrialContext) -> dict[str, float]:
        if ctx.seed == params.fail_seed:
            raise RuntimeError(f"seed {ctx.seed} was configured to fail")
        return super().run(params, ctx)

    def run_seeds(self, params: StackedToyParams, contexts: Sequence[TrialContext]) -> list[dict[str, float]]:
        if params.fail_batched or any(ctx.seed == params.fail_seed for ctx in contexts):
            raise RuntimeError("this batch was configured to fail")
        data = torch.Generator().manual_seed(1234)  # as ToyTask.run: a fixed problem
        truth = torch.randn(params.features, generator=data)
        x = torch.randn(2 * params.samples, params.features, generator=data)
        y = (x @ truth + 0.5 * torch.randn(2 * params.samples, generator=data) > 0).float()
        x_train, y_train, x_test, y_test = x[: params.samples], y[: params.samples], x[params.samples :], y[params.samples :]
        rows, states = [], []
        for ctx in contexts:  # each seed's initial weights and batch order from its own global generator
            ctx.seed_globals()
            rows.append(0.1 * torch.randn(params.features))
            states.append(torch.get_rng_state())
        weight = torch.stack(rows).requires_grad_()
        optimiser = torch.optim.SGD([weight], lr=params.lr, momentum=params.momentum)

        def step(index: int) -> list[dict[str, float]]:
            batches = []
            for i, state in enumerate(states):
                torch.set_rng_state(state)
                batches.append(torch.randint(0, params.samples, (32,)))
                states[i] = torch.get_rng_state()
            logits = torch.einsum("kbf,kf->kb", x_train[torch.stack(batches)], weight)
            losses = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, y_train[torch.stack(batches)], reduction="none").mean(1)
            optimiser.zero_grad()
            losses.sum().backward()
            optimiser.step()
            return [{"loss": loss} for loss in losses.tolist()]

        TrialContext.fit_seeds(contexts, params.steps, step, name="train")
        results = []
        with torch.no_grad():
            for row in weight:
                logits = x_test @ row
                results.append({
                    "accuracy": ((logits > 0).float() == y_test).float().mean().item(),
                    "loss": torch.nn.functional.binary_cross_entropy_with_logits(logits, y_test).item(),
                    "samples_per_s": 1.0, "param_bytes": float(tensor_bytes(row)),
                    "budget/steps": float(params.steps), "budget/examples": float(params.steps * 32),
                })
        return results
