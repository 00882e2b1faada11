"""The er2 distillation recipe: the converged stop rule, the gain's learning rate, the q/k positions fed."""
from __future__ import annotations

import pytest
import torch

from harness.mechanisms.pdelta.er2 import SelectiveCompressedPDelta2Layer
from harness.services.loop import fit
from harness.tasks.er2.distill import mean_abs_gain, parameter_groups
from harness.tasks.er2.positions import fed_capture, fed_qk
from harness.tasks.er2.recipe import WARMUP, Convergence
from harness.tasks.er2.teacher import rotate


class Logger:
    def __init__(self) -> None:
        self.curves: dict[str, list[tuple[int, float]]] = {}

    def log_metric(self, key: str, value: float, step: int) -> None:
        self.curves.setdefault(key, []).append((step, value))

    def record(self, key, value) -> None:
        pass

    def progress(self, total, description=""):
        class Bar:
            def advance(self, n=1):
                pass

            def close(self):
                pass

        return Bar()


def run(rule: Convergence, series) -> tuple[dict[str, float], Logger]:
    logger = Logger()
    return fit(logger, rule.cap, lambda i: series(i), "distil", log_every=1000, until=rule), logger


def test_flat_values_stop_after_two_windows_and_the_decay():
    rule = Convergence(cap=1000, window=10, tolerance=0.01, decay=5)
    final, logger = run(rule, lambda i: {"loss": 1.0, "gain": 0.3})
    assert rule.converged_at == 20 and final["steps_run"] == 25.0
    assert logger.curves["distil/loss"][-1][0] == 24  # the last step run is logged


def test_values_still_moving_run_to_the_cap_and_decay_before_it():
    rule = Convergence(cap=100, window=10, tolerance=0.01, decay=5)
    final, _ = run(rule, lambda i: {"loss": 1.0, "gain": 0.1 + 0.01 * i})  # the gain grows 0.1 per window
    assert rule.converged_at is None and rule.decay_start == 95 and final["steps_run"] == 100.0
    assert rule.last_change["gain"] > 0.01 and rule.last_change["loss"] == 0.0


def test_a_falling_loss_holds_the_stop_until_its_change_is_below_tolerance():
    rule = Convergence(cap=10_000, window=10, tolerance=0.01, decay=5, watch=("loss",))
    final, _ = run(rule, lambda i: {"loss": 1.0 + 0.995 ** i})  # relative change per window shrinks below 1% near 430
    steps = int(final["steps_run"]) - 5
    mean = [sum(1.0 + 0.995 ** i for i in range(a, a + 10)) / 10 for a in (steps - 20, steps - 10)]
    assert abs(mean[1] - mean[0]) / mean[0] < 0.01 and 200 < steps < 1000
    before = [sum(1.0 + 0.995 ** i for i in range(a, a + 10)) / 10 for a in (steps - 30, steps - 20)]
    assert abs(before[1] - before[0]) / before[0] >= 0.01  # the window before it did not pass


def test_rate_warms_up_holds_then_decays_to_one_over_decay():
    rule = Convergence(cap=200, window=10, tolerance=0.01, decay=4)
    assert rule.rate(0) == pytest.approx(1 / WARMUP) and rule.rate(WARMUP) == 1.0
    assert [rule.rate(s) for s in (195, 196, 197, 198, 199)] == [1.0, 1.0, 0.75, 0.5, 0.25]  # the last at 1/decay
    rule.decay_start = 60
    assert [rule.rate(s) for s in (59, 60, 63)] == [1.0, 1.0, 0.25]
    with pytest.raises(ValueError, match="cap"):
        Convergence(cap=4, window=10, tolerance=0.01, decay=4)


def test_the_gain_gets_its_own_learning_rate_only_when_there_is_one():
    raw = SelectiveCompressedPDelta2Layer(2, 1, 8, feature_dim=8, residual_dim=4, residual_mode="raw")
    groups = parameter_groups(raw, 2e-3, 10.0)
    assert [g["lr"] for g in groups] == [2e-3, pytest.approx(2e-2)] and groups[1]["params"] == [raw.residual_gain]
    assert sum(len(g["params"]) for g in groups) == len(list(raw.parameters()))
    none = SelectiveCompressedPDelta2Layer(2, 1, 8, feature_dim=8, residual_mode="none")
    assert len(parameter_groups(none, 2e-3, 10.0)) == 1 and mean_abs_gain(none) == 0.0
    with torch.no_grad():
        raw.residual_gain.copy_(torch.tensor([3.0, -0.5]))
    assert mean_abs_gain(raw) == pytest.approx((1.5 + 0.5) / 2)  # as applied: clamped to the seed's 1.5


def test_unrotated_feeding_recovers_the_projections_and_rotated_is_the_identity():
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 40, 16, dtype=torch.float64), torch.randn(2, 2, 40, 16, dtype=torch.float64)
    rq, rk = rotate(q, 10000.0), rotate(k, 10000.0)
    assert not torch.allclose(rq, q)
    uq, uk = fed_qk(rq, rk, "unrotated", 10000.0)
    assert torch.allclose(uq, q, atol=1e-12) and torch.allclose(uk, k, atol=1e-12)
    assert fed_qk(rq, rk, "rotated", 10000.0) == (rq, rk)
    captured = {"q": rq, "k": rk, "v": k, "out": q}
    fed = fed_capture(captured, "unrotated", 10000.0)
    assert fed["v"] is k and fed["out"] is q and torch.allclose(fed["q"], q, atol=1e-12)
    with pytest.raises(ValueError, match="known: rotated, unrotated"):
        fed_qk(rq, rk, "roped", 10000.0)
