"""A known-truth task for calibrating the statistics: each trial reports one draw of N(effect, 1).

Arms differ only in the tag that names their noise stream, so an A/A suite (two arms with effect 0)
has arms identical in distribution but not in value, and a planted effect is exactly ``effect``.
Every sweep point is an independent replicate.
"""
from __future__ import annotations

from harness.tasks.base import Metric, Task, TaskParams, TrialContext


class CalibrationParams(TaskParams):
    effect: float = 0.0
    tag: str = "a"
    replicate: int = 0
    shared_sd: float = 1.0  # seed-level variation both arms share (pairing removes it)


class CalibrationTask(Task):
    name = "calibration"
    version = "1"
    Params = CalibrationParams
    description = "one draw of N(effect, 1) plus a seed-shared offset (statistics calibration)"
    metrics = (Metric(name="score", direction="higher", unit="", kind="quality",
                      description="effect + N(0, 1) + shared seed offset", key=True),)

    def run(self, params: CalibrationParams, ctx: TrialContext) -> dict[str, float]:
        shared = ctx.numpy_stream("shared", params.replicate).normal(0.0, params.shared_sd)
        own = ctx.numpy_stream("noise", params.tag, params.replicate).normal()
        return {"score": params.effect + shared + float(own)}


def sequential_suite(name: str, effects: dict[str, float], max_seeds: int = 12) -> str:
    """A suite file's text: control arm ``a`` and one treatment per ``effects`` entry (its planted effect),
    each with a superiority claim on ``score``, a sequential design from 3 seeds up to ``max_seeds``."""
    arms = "".join(f"  {arm}: {{tag: {arm}, shared_sd: 0.1, effect: {effect}}}\n" for arm, effect in effects.items())
    contrasts = "".join(f"  - {{treatment: {arm}, control: a}}\n" for arm in effects)
    claims = "".join(f"  - {{contrast: {arm}-vs-a, metric: score, test: superior}}\n" for arm in effects)
    return (f"suite: {name}\ntask: calibration_task:CalibrationTask\nseeds: [0, 1, 2]\n"
            f"sequential: {{max_seeds: {max_seeds}}}\narms:\n  a: {{tag: a, shared_sd: 0.1}}\n{arms}"
            f"contrasts:\n{contrasts}claims:\n{claims}")
