"""How the distilled layer sees positions: the probe layer's q/k as attention uses them (RoPE-rotated)
or as projected (un-rotated).

Softmax attention gets positions from the rotation; a recurrent layer gets them from the order it
reads tokens in, and rotated keys make the same key look different at every position, which a
fixed-size state cannot store by content. The controls (teacher, window) always attend with rotated
q/k; only the ER2 layer's input changes.
"""
from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from harness.tasks.er2.distill import Capture
from harness.tasks.er2.teacher import rotate

QK_POSITIONS = ("rotated", "unrotated")


def fed_qk(q: Tensor, k: Tensor, mode: str, base: float) -> tuple[Tensor, Tensor]:
    """The q/k the layer is fed, from the rotated q/k the probe layer attends with."""
    if mode not in QK_POSITIONS:
        raise ValueError(f"unknown qk_positions {mode!r}; known: {', '.join(QK_POSITIONS)}")
    if mode == "rotated":
        return q, k
    return rotate(q, base, inverse=True), rotate(k, base, inverse=True)


def fed_capture(captured: Capture, mode: str, base: float) -> Capture:
    """A capture whose q/k are as the layer is fed (v and the teacher's output unchanged)."""
    q, k = fed_qk(captured["q"], captured["k"], mode, base)
    return {**captured, "q": q, "k": k}


def fed_mixer(layer: Callable[[Tensor, Tensor, Tensor], Tensor], mode: str, base: float) -> Callable[..., Tensor]:
    """The layer as a swap-in for the probe layer's attention, fed q/k per ``mode``."""
    def mixer(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return layer(*fed_qk(q, k, mode, base), v)

    return mixer
