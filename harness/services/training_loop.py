"""The training loop every task shares: progress bar, curves, non-finite check, final values.

A task keeps its optimiser, schedule and loss in a ``step(index)`` function that does one
update and returns the loss (or a dict of named values); ``fit`` owns everything else.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Protocol, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

StepResult = float | Mapping[str, float]


class TrialLogger(Protocol):
    """What a task may call while it runs (implemented by the executor)."""

    def log_metric(self, key: str, value: float, step: int) -> None:
        """A step metric (training curve); stored in the trial JSON and mirrored to MLflow."""

    def record(self, key: str, value: Any) -> None:
        """JSON-able detail kept with the trial (per-document values for pairing, tables)."""

    def progress(self, total: int, description: str = "", share: float = 1.0) -> "ProgressHandle":
        """A progress bar inside the trial (e.g. over training steps); ``share``: the part of its time that is
        this trial's (a loop training several seeds' models as one gives each 1/K)."""

    def add_training_flops(self, flops: float) -> None:
        """FLOPs a training loop of the trial did (counted by ``fit``): the phase table's achieved FLOP/s."""


class ProgressHandle(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


class NonFiniteLoss(RuntimeError):
    """A loss became NaN or infinite: the trial is recorded as failed."""


StopRule = Callable[[int, Mapping[str, float]], bool]  # (step index, its values) -> stop after this step


def fit(
    logger: TrialLogger, steps: int, step: Callable[[int], StepResult], name: str, log_every: int = 1,
    until: StopRule | None = None,
) -> dict[str, float]:
    """Run ``step`` for indices 0..steps-1; curves ``<name>/<value>`` every log_every steps and at the last.

    A float result is named ``loss``. Any non-finite value raises NonFiniteLoss at once. ``until``,
    when given, ends training early after the first step it returns True for (``steps`` is then a
    cap): a declared stopping criterion instead of a step count. Returns the values of the last step
    run, with ``steps_run``.
    """
    progress = logger.progress(steps, name)
    values: dict[str, float] = {}
    run = 0
    counted = 0
    try:
        for index in range(steps):
            result, counted = counted_step(step, index) if index == 0 else (step(index), counted)
            values = _checked(result, name, index)
            run = index + 1
            stop = until is not None and until(index, values)
            if index % log_every == 0 or index == steps - 1 or stop:
                _log(logger, name, values, index)
            progress.advance()
            if stop:
                break
    finally:
        progress.close()
        logger.add_training_flops(float(counted) * run)
    return {**values, "steps_run": float(run)} if until is not None else values


def fit_together(
    loggers: Sequence[TrialLogger], steps: int, step: Callable[[int], Sequence[StepResult]], name: str,
    log_every: int = 1,
) -> list[dict[str, float]]:
    """``fit`` for several models trained as one (seeds in a batch): ``step`` returns one result per logger,
    each checked and logged as ``fit`` would; every model runs ``steps``. Returns each one's last values."""
    progress = [logger.progress(steps, name, share=1 / len(loggers)) for logger in loggers]
    values: list[dict[str, float]] = [{} for _ in loggers]
    counted, run = 0, 0
    try:
        for index in range(steps):
            results, counted = counted_step(step, index) if index == 0 else (step(index), counted)
            if len(results) != len(loggers):
                raise ValueError(f"{name}: the step returned {len(results)} results for {len(loggers)} models")
            values = [_checked(result, name, index) for result in results]
            run = index + 1
            for logger, value, bar in zip(loggers, values, progress):
                if index % log_every == 0 or index == steps - 1:
                    _log(logger, name, value, index)
                bar.advance()
    finally:
        for bar, logger in zip(progress, loggers):
            bar.close()
            logger.add_training_flops(float(counted) * run / len(loggers))  # each model's share
    return values


def counted_step(step: Callable[[int], Any], index: int) -> tuple[Any, int]:
    """``step(index)`` and the FLOPs it did, as torch counts them (matrix products, convolutions, attention;
    elementwise work is not counted): the first step of a loop stands for every step of it."""
    with FlopCounterMode(display=False) as counter:
        result = step(index)
    return result, counter.get_total_flops()


def _checked(result: StepResult, name: str, index: int) -> dict[str, float]:
    """A step's result as named floats (a float is ``loss``); NonFiniteLoss on any non-finite value."""
    values = {"loss": float(result)} if isinstance(result, (int, float)) else {
        str(key): float(value) for key, value in result.items()
    }
    bad = sorted(key for key, value in values.items() if not math.isfinite(value))
    if bad:
        raise NonFiniteLoss(f"{name}: non-finite {', '.join(bad)} at step {index} ({values})")
    return values


def _log(logger: TrialLogger, name: str, values: Mapping[str, float], index: int) -> None:
    for key, value in values.items():
        logger.log_metric(f"{name}/{key}", value, index)


def optimizer_step(
    loss: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
    clip_norm: float | None = None,
    clip_sets: Sequence[Sequence[torch.Tensor]] | None = None,
) -> None:
    """zero_grad, backward, optional clip of the gradients to clip_norm, step, schedule step. The clip
    takes the optimiser's parameters as one set, or each of ``clip_sets`` on its own (the models of a
    seed batch, each clipped as it would be alone)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if clip_norm is not None:
        sets = clip_sets if clip_sets is not None else [[p for group in optimizer.param_groups for p in group["params"]]]
        for parameters in sets:
            torch.nn.utils.clip_grad_norm_(list(parameters), clip_norm)
    optimizer.step()
    if schedule is not None:
        schedule.step()
