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
    metrics = (Metric("score", "higher", "", "quality", "effect + N(0, 1) + shared seed offset", key=True),)

    def run(self, params: CalibrationParams, ctx: TrialContext) -> dict[str, float]:
        shared = ctx.numpy_stream("shared", params.replicate).normal(0.0, params.shared_sd)
        own = ctx.numpy_stream("noise", params.tag, params.replicate).normal()
        return {"score": params.effect + shared + float(own)}
