"""When distillation stops: a fixed step budget, or a declared convergence criterion.

Warm-up, then a constant learning rate until every watched value (by default the transfer loss and
the mean |residual gain|) has converged: its mean over the last ``window`` steps differs from the mean over
the window before by less than ``tolerance``, relative. Then the learning rate decays linearly to
zero over ``decay`` steps and training stops (warm-up / stable / decay). ``cap`` bounds the steps:
if the values have not converged by ``cap - decay``, the decay starts there and the run records
that it did not converge. With nothing watched the rule never fires and every run trains exactly
``cap`` steps under the same schedule: the fixed budget that gives every arm of a seed the same steps.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

WARMUP = 20
GAIN_FLOOR = 0.05  # a gain near zero counts as converged once it moves less than tolerance x 0.05
WATCHABLE = ("loss", "nmse", "gain")  # what a distillation step reports (distill.distil_step)
LATE_SPAN = 0.1  # the share of the steps a convergence premise reads the loss's last fall over


def late_fall(losses: Sequence[float], span: float = LATE_SPAN) -> float:
    """How much the training loss still fell at the end of training: 1 - the mean over the last ``span``
    of the steps / the mean over the ``span`` before it (window means, so one noisy batch does not decide).
    Near 0 for an arm that has converged, negative where the loss rose; 0 with a single step."""
    if not 0.0 < span <= 0.5:
        raise ValueError(f"span must be in (0, 0.5], got {span}")
    if len(losses) < 2:
        return 0.0
    width = max(1, round(len(losses) * span))
    last, before = losses[-width:], losses[-2 * width:-width]
    before_mean = sum(before) / len(before)
    return 1.0 - (sum(last) / len(last)) / max(before_mean, 1e-12)


@dataclass
class Convergence:
    """The stop rule and the learning-rate multiplier of the warm-up / stable / decay schedule."""

    cap: int
    window: int
    tolerance: float
    decay: int
    watch: tuple[str, ...] = ("loss", "gain")
    decay_start: int | None = None  # first step of the decay, set when converged (or by the cap)
    converged_at: int | None = None  # steps run when the criterion held
    last_change: dict[str, float] = field(default_factory=dict)
    _history: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.window < 1 or self.decay < 1 or self.cap < self.decay + 1:
            raise ValueError(f"cap ({self.cap}) must exceed decay ({self.decay}); window ({self.window}) >= 1")
        unknown = [key for key in self.watch if key not in WATCHABLE]
        if unknown:
            raise ValueError(f"the stop rule cannot watch {', '.join(map(repr, unknown))}; valid: {', '.join(WATCHABLE)}")

    def rate(self, step: int) -> float:
        """Learning-rate multiplier at ``step`` (used by a LambdaLR)."""
        warm = min(1.0, (step + 1) / WARMUP)
        start = self.decay_start if self.decay_start is not None else self.cap - self.decay
        if step < start:
            return warm
        return warm * max(0.0, 1.0 - (step - start) / self.decay)  # the last step runs at 1/decay

    def __call__(self, index: int, values: Mapping[str, float]) -> bool:
        """Stop after step ``index``? Tracks the window means while the rate is constant."""
        done = index + 1
        if self.decay_start is None:
            for key in self.watch:
                if key in values:
                    self._history.setdefault(key, []).append(float(values[key]))
            if done % self.window == 0 and done >= 2 * self.window and self._converged():
                self.converged_at = done
                self.decay_start = done
            elif done >= self.cap - self.decay:
                self.decay_start = self.cap - self.decay
        return done >= min(self.cap, self.decay_start + self.decay) if self.decay_start is not None else False

    def _converged(self) -> bool:
        w = self.window
        for key, series in self._history.items():
            last, before = sum(series[-w:]) / w, sum(series[-2 * w : -w]) / w
            floor = GAIN_FLOOR if key == "gain" else 1e-8
            self.last_change[key] = abs(last - before) / max(abs(before), floor)
        return bool(self.last_change) and all(change < self.tolerance for change in self.last_change.values())
