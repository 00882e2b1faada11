"""The claim statistics against known truth: a strict test never passes on an exactly zero difference
(inclusive bounds only where the test says so), the Holm family leaves out only claims whose observed
spread is zero and keeps an untestable claim at p = 1, a two-sided FAIL is held to the claim level,
rows where t and the sign-flip test disagree are flagged, and an A/A design that extends for an open
premise keeps its false PASS rate."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

from records import make_record

from harness.analysis.claim_status import NO_ANSWER
from harness.analysis.decide.claims import FAIL, INCONCLUSIVE, PASS, SHORT, evaluate_claims
from harness.analysis.run_results import RunResults, index_results
from harness.suite.stored import StoredSuite
from harness.analysis.stats.paired_stats import paired_difference
from harness.analysis.stats.sequential_design import Schedule

ALPHA = 0.025
METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality"},
    "loss": {"direction": "lower", "unit": "nats", "kind": "quality"},
    "param_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"},
    "peak_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"},
    "size": {"direction": "none", "unit": "", "kind": "quality"},
    "signal": {"direction": "none", "unit": "", "kind": "info"},
}


def two_arm_run(control: dict[str, list[float]], treat: dict[str, list[float]], claims: list[dict[str, Any]],
                sequential: dict | None = None, premises: list | None = None) -> RunResults:
    seeds = list(range(len(next(iter(control.values())))))
    trials = []
    for arm, values in (("control", control), ("treat", treat)):
        for seed in seeds:
            metrics = {key: series[seed] for key, series in values.items()}
            trials.append(make_record(f"{arm}-{seed}", arm, seed, metrics=metrics))
    meta = {"suite": "strict", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": METRICS,
            "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": claims, "sequential": sequential, "premises": premises or []}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def claim(metric: str, test: str = "superior", **extra: Any) -> dict[str, Any]:
    return {"contrast": "treat-vs-control", "metric": metric, "test": test, **extra}


IDENTICAL = {"acc": [0.8, 0.82, 0.79, 0.81], "loss": [0.4, 0.41, 0.39, 0.4], "param_bytes": [1024.0] * 4}


def test_an_arm_identical_to_its_control_never_passes_a_claim():
    """Not better, and not a tie either: the two arms are one, so no claim between them has an answer."""
    results = two_arm_run(IDENTICAL, dict(IDENTICAL), [claim("acc"), claim("loss"), claim("param_bytes"),
                                                        claim("param_bytes", "ratio", min=1.0, max=1.0)])
    decided = evaluate_claims(results)
    assert [c.estimate for c in decided] == [0.0, 0.0, 0.0, 1.0]
    assert all(c.status == NO_ANSWER for c in decided), [(c.key, c.status) for c in decided]


SPREAD = (0.003, -0.002, 0.004, -0.001, 0.0, -0.004, 0.002, -0.002)


@pytest.mark.parametrize("gain, margin, expected", [
    (0.05, 0.0, PASS),        # a clear gain, no margin
    (0.05, 0.01, PASS),       # clearly beyond the margin
    (0.004, 0.0, PASS),       # a small but sure gain passes a plain superiority claim...
    (0.004, 0.01, SHORT),     # ...and is surely short of one whose margin says it is too small to matter
    (0.0, 0.01, FAIL),        # nothing at all: decided, not left open
    (0.01, 0.01, INCONCLUSIVE),  # right at the margin: neither side is sure
])
def test_a_superiority_margin_moves_the_boundary_of_both_pass_and_fail(gain, margin, expected):
    control = {"acc": [0.70 + 0.01 * i for i in range(8)], "loss": [0.4] * 8}
    treat = {"acc": [c + gain + d for c, d in zip(control["acc"], SPREAD)], "loss": [0.4] * 8}
    extra = {"margin": margin} if margin else {}
    (result,) = evaluate_claims(two_arm_run(control, treat, [claim("acc", **extra)]))
    assert result.status == expected, (result.interval, result.detail)
    assert result.statement == (f"superior (by more than {margin:g})" if margin else "superior")
    assert result.mde is not None and result.mde > margin  # what it could find lies beyond the margin


def test_a_superiority_margin_is_oriented_by_the_metric_direction():
    control = {"acc": [0.7] * 8, "loss": [0.40 + 0.01 * i for i in range(8)]}
    lower = {"acc": [0.7] * 8, "loss": [c - 0.05 + d for c, d in zip(control["loss"], SPREAD)]}  # 0.05 nats lower
    passes, fails = evaluate_claims(two_arm_run(control, lower, [claim("loss", margin=0.02), claim("loss", margin=0.08)]))
    assert (passes.status, fails.status) == (PASS, SHORT)  # 0.05 lower: surely better, surely short of 0.08


def test_an_inclusive_bound_passes_on_an_exact_tie():
    treat = {**IDENTICAL, "acc": [0.81, 0.83, 0.8, 0.82]}  # another arm, with the same bytes
    results = two_arm_run(IDENTICAL, treat, [claim("param_bytes", "ratio", min=1.0, max=1.0)])
    (ratio,) = evaluate_claims(results)
    assert ratio.status == PASS and ratio.estimate == 1.0


def test_the_holm_family_leaves_out_only_a_zero_spread_claim_whatever_the_metric_kind():
    control = {"acc": [0.5, 0.75, 0.625, 0.5625, 0.6875, 0.59375], "peak_bytes": [1000.0, 1010, 990, 1005, 998, 1003]}
    treat = {"acc": [v + 0.125 for v in control["acc"]],  # a constant difference (exact in binary): no sampling error
             "peak_bytes": [v - 50 + d for v, d in zip(control["peak_bytes"], (3, -2, 4, 0, -5, 1))]}  # bytes that vary
    acc, peak = evaluate_claims(two_arm_run(control, treat, [claim("acc"), claim("peak_bytes")]))
    assert not acc.in_family and acc.status == PASS and acc.level == pytest.approx(ALPHA)
    assert peak.in_family and peak.status == PASS


def test_a_claim_whose_metric_is_missing_stays_in_the_family_at_p_1():
    rng = np.random.default_rng(4)
    control = {"acc": list(0.7 + 0.02 * rng.standard_normal(6))}
    treat = {"acc": [v + 0.1 + 0.01 * rng.standard_normal() for v in control["acc"]]}
    alone = evaluate_claims(two_arm_run(control, treat, [claim("acc")]))
    with_missing = evaluate_claims(two_arm_run(control, treat, [claim("acc"), claim("loss")]))
    assert alone[0].level == pytest.approx(ALPHA)
    acc, loss = with_missing
    assert loss.status == INCONCLUSIVE and loss.in_family and loss.p_value is None
    assert acc.level == pytest.approx(ALPHA / 2) and acc.p_adjusted == pytest.approx(min(1.0, 2 * acc.p_value))


def test_an_equivalence_fail_is_bonferroni_over_its_two_sides():
    control = {"acc": [0.70, 0.72, 0.69, 0.71, 0.70]}
    shift = [0.30, 0.33, 0.28, 0.31, 0.29]
    treat = {"acc": [c + s for c, s in zip(control["acc"], shift)]}
    reference = {"contrast": "treat-vs-control", "metric": "acc", "test": "equivalent", "margin": 0.05,
                 "reference": "treat-vs-control"}
    (result,) = evaluate_claims(two_arm_run(control, treat, [reference]))
    t = (np.mean(shift) - 0.05) / (np.std(shift, ddof=1) / np.sqrt(5))
    assert result.p_fail == pytest.approx(min(1.0, 2 * scipy.stats.t.sf(t, 4)))


def test_a_claim_t_alone_would_decide_is_left_undecided_naming_the_skew():
    heavy = [10.0, 10.5, 9.5, 10.2, -0.1, -0.2, 0.1, 0.05]  # four seeds far from the other four
    difference = paired_difference(dict(enumerate(heavy)), dict.fromkeys(range(8), 0.0))
    assert difference.estimate.p_value <= 0.05 < difference.sign_flip_p and difference.t_only
    normal = paired_difference(dict(enumerate([1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01])), dict.fromkeys(range(8), 0.0))
    assert not normal.t_only
    control = {"acc": [0.0] * 8}
    (flagged,) = evaluate_claims(two_arm_run(control, {"acc": heavy}, [claim("acc")]))
    # t alone passes it (p < 0.025); the sign-flip test of the claim's own hypothesis at 0 does not
    assert flagged.p_value <= ALPHA < flagged.p_flip
    assert flagged.status == INCONCLUSIVE and flagged.skew_blocked
    assert flagged.result_text.startswith("INCONCLUSIVE (skewed: sample skewness ")


@pytest.mark.slow  # calibration by simulation: about 3 minutes on a loaded 2-core machine
def test_aa_false_pass_rate_holds_when_the_design_extends_for_an_open_premise():
    """A/A paths under a sequential design whose premise (a signal of mean 1, sd 1, at least 0) is open at
    the first looks: the run stops only when every claim and premise is settled, as the runner does."""
    design = Schedule(3, 8)
    premise = [{"name": "signal_present", "arm": "treat", "metric": "signal", "at_least": 0.0}]
    rng = np.random.default_rng(34)
    paths, passes, extended = 400, 0, 0
    for _ in range(paths):
        control = {"acc": list(rng.normal(0, 1, 8))}
        treat = {"acc": [c + rng.normal() for c in control["acc"]], "signal": list(rng.normal(1.0, 1.0, 8))}
        full = two_arm_run(control, treat, [claim("acc")], sequential=design.describe(), premises=premise)
        for n in design.looks:
            (result,) = evaluate_claims(full.first_seeds(n))
            if not result.open:
                break
            extended += result.premise is not None
        passes += result.status == PASS
    _, high = scipy.stats.binom.interval(0.999, paths, ALPHA)
    assert extended > paths  # the premise did keep runs going
    assert passes <= high


def test_a_gain_exactly_at_the_superiority_margin_passes_at_most_at_the_claim_level():
    """Known truth: the gain equals the margin, so every PASS is false; over 400 simulated runs the rate
    stays near the one-sided level (2.5%), and a gain of three times the margin usually passes."""
    rng = np.random.default_rng(11)
    margin, runs = 0.01, 400

    def pass_rate(gain: float) -> float:
        passes = 0
        for _ in range(runs):
            control = list(0.7 + 0.02 * rng.standard_normal(8))
            treat = [c + gain + 0.01 * e for c, e in zip(control, rng.standard_normal(8))]
            (result,) = evaluate_claims(two_arm_run({"acc": control}, {"acc": treat}, [claim("acc", margin=margin)]))
            passes += result.status == PASS
        return passes / runs

    assert pass_rate(margin) <= ALPHA + 3 * (ALPHA * (1 - ALPHA) / runs) ** 0.5  # 2.5% + 3 standard errors
    assert pass_rate(3 * margin) > 0.8


def _gamma_differences(rng: np.random.Generator, skew: float, runs: int, n: int) -> np.ndarray:
    """Per-seed differences with mean exactly 0 and the given skewness (a shifted, scaled gamma)."""
    shape = (2.0 / abs(skew)) ** 2
    draws = (rng.gamma(shape, 1.0, size=(runs, n)) - shape) / np.sqrt(shape)
    return np.sign(skew) * draws


@pytest.mark.slow  # calibration by simulation: about 2 minutes on a loaded 2-core machine
@pytest.mark.parametrize("n", [6, 8])
def test_the_skew_guard_keeps_normal_data_at_its_level_and_only_ever_removes_false_passes(n):
    """A superiority claim at 0 on differences whose true mean is 0: every PASS is false. On normal
    differences the guarded test keeps its level; on skewed ones (the t test's bad side, skewness -0.8
    and -1.8) it never passes more often than t alone on the same draws, and at 6 pairs and skewness
    -0.8 it holds 1.2x the level. (Beyond that no test of the mean at these n can: docs/statistics.md.)"""
    runs = 2500
    rng = np.random.default_rng(60 + n)
    ceiling = binomial_bound(runs, ALPHA)
    cells = {"normal": rng.standard_normal((runs, n)), **{
        f"skew {skew:+g}": _gamma_differences(rng, skew, runs, n) for skew in (-0.8, -1.8)}}
    for name, draws in cells.items():
        control = {"acc": [0.5] * n}
        guarded = sum(evaluate_claims(two_arm_run(control, {"acc": list(0.5 + row)}, [claim("acc")]))[0].status == PASS
                      for row in draws)
        t = draws.mean(1) / (draws.std(1, ddof=1) / np.sqrt(n))
        t_alone = int(np.sum(scipy.stats.t.sf(t, n - 1) <= ALPHA))
        assert guarded <= t_alone, name
        if name == "normal" or (n == 6 and name == "skew -0.8"):
            assert guarded <= binomial_bound(runs, 1.2 * ALPHA if name != "normal" else ALPHA), (name, guarded)


def binomial_bound(runs: int, rate: float) -> int:
    """The count a binomial(runs, rate) exceeds with probability 0.001 at most."""
    return int(scipy.stats.binom.ppf(0.999, runs, rate))
