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

from harness.analysis.claim_status import INSUFFICIENT, NO_ANSWER, VACUOUS
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
    assert all(c.detail.startswith("treatment and control bit-identical on every seed; ") for c in decided)


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
    assert not ratio.in_family  # every ratio exactly 1: no sampling error, no Holm family to join


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
    assert loss.p_adjusted is None  # counted at p = 1 in the others' Holm, but shows no adjusted p of its own
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


def test_a_sequential_claim_has_no_holm_adjusted_p_and_counts_the_designs_looks():
    """Holm's adjusted p belongs to a fixed design; a sequential claim is decided by its spent levels, so it
    shows none (the p_holm column stays empty) and says how many looks its design has."""
    control = {"acc": [0.70 + 0.01 * i for i in range(8)]}
    treat = {"acc": [c + 0.05 + d for c, d in zip(control["acc"], SPREAD)]}
    design = Schedule(3, 8)
    (fixed,) = evaluate_claims(two_arm_run(control, treat, [claim("acc")]))
    (sequential,) = evaluate_claims(two_arm_run(control, treat, [claim("acc")], sequential=design.describe()))
    assert (fixed.status, fixed.sequential, fixed.looks) == (PASS, False, 1)
    assert fixed.p_adjusted == pytest.approx(fixed.p_value)  # alone in its family: Holm leaves it as it is
    assert (sequential.status, sequential.sequential) == (PASS, True)
    assert sequential.look < sequential.looks == len(design.looks)  # stopped early, out of the design's looks
    assert sequential.p_value is not None and sequential.p_adjusted is None


HOLM_CONTROL = {"acc": [0.70 + 0.01 * i for i in range(8)], "loss": [0.40 + 0.01 * i for i in range(8)]}


def _holm_pair(loss_shift: float):
    """acc surely better; loss moved by ``loss_shift`` (higher is worse): two claims of one Holm family."""
    treat = {"acc": [c + 0.05 + d for c, d in zip(HOLM_CONTROL["acc"], SPREAD)],
             "loss": [c + loss_shift + d for c, d in zip(HOLM_CONTROL["loss"], reversed(SPREAD))]}
    return evaluate_claims(two_arm_run(HOLM_CONTROL, treat, [claim("acc"), claim("loss")]))


def test_holm_tests_a_fail_at_the_step_it_failed_at_and_a_pass_at_its_own():
    """Holm runs separately for passing and for failing: acc passes at its first step (alpha / 2), loss fails at
    its first step (alpha / 2), and each claim's deciding interval is read at the level it was decided at."""
    acc, loss = _holm_pair(0.05)
    assert (acc.status, loss.status) == (PASS, FAIL)
    assert acc.level == pytest.approx(ALPHA / 2) and loss.level == pytest.approx(ALPHA / 2)
    for result in (acc, loss):
        assert result.nominal_level == pytest.approx(result.level)  # a fixed design's one look spends it all
        expected = result.mean_estimate.interval_at(result.level)
        shown = result.decision_interval
        assert (shown.low, shown.high) == pytest.approx((expected.low, expected.high))
    assert loss.decision_interval.low > 0  # surely higher, so surely worse
    assert acc.detail == "one-sided t vs 0 (better side)"  # the test's own account of what it computed
    assert acc.interval is not None and acc.interval == acc.mean_estimate.interval  # the plain t interval shown


def test_an_undecided_claim_beside_a_pass_is_tested_at_holms_next_step():
    """acc passes at alpha / 2; loss, unmoved, is then compared at alpha (the family minus acc), and says so."""
    acc, loss = _holm_pair(0.0)
    assert (acc.status, loss.status) == (PASS, INCONCLUSIVE)
    assert acc.level == pytest.approx(ALPHA / 2) and loss.level == pytest.approx(ALPHA)
    assert not loss.skew_blocked and loss.result_text == "INCONCLUSIVE"


def test_a_claim_without_spread_fails_exactly_when_surely_worse():
    """A constant difference (exact in binary) has no sampling error: out of the Holm family, at the claim level,
    a loss 0.125 higher on every seed FAILs (not better) and a gain of 0.125 PASSes."""
    control = {"acc": [0.5, 0.75, 0.625, 0.5625, 0.6875, 0.59375], "loss": [0.25, 0.5, 0.375, 0.25, 0.5, 0.375]}
    treat = {"acc": [v + 0.125 for v in control["acc"]], "loss": [v + 0.125 for v in control["loss"]]}
    acc, loss = evaluate_claims(two_arm_run(control, treat, [claim("acc"), claim("loss")]))
    assert not acc.in_family and not loss.in_family
    assert (acc.status, loss.status) == (PASS, FAIL) and loss.result_text == "FAIL (not better)"
    assert acc.level == pytest.approx(ALPHA) and loss.level == pytest.approx(ALPHA)


def test_a_claim_with_a_dropped_pair_can_still_fail_but_not_pass():
    """A missing (non-finite) pair cannot help a claim: a sure gain is left INCONCLUSIVE, a sure loss still FAILs."""
    control = {"acc": [0.70 + 0.01 * i for i in range(8)]}
    better = [c + 0.05 + d for c, d in zip(control["acc"], SPREAD)]
    worse = [c - 0.05 + d for c, d in zip(control["acc"], SPREAD)]
    (gain,) = evaluate_claims(two_arm_run(control, {"acc": better[:-1] + [float("nan")]}, [claim("acc")]))
    (loss,) = evaluate_claims(two_arm_run(control, {"acc": worse[:-1] + [float("nan")]}, [claim("acc")]))
    assert (gain.status, gain.dropped, gain.n) == (INCONCLUSIVE, 1, 7)
    assert (loss.status, loss.dropped, loss.n) == (FAIL, 1, 7)
    assert "1 pair(s) dropped" in loss.detail


def test_two_pairs_decide_with_their_own_interval():
    """Two pairs are enough for a t interval: a sure gain short of a large margin is SHORT OF MARGIN, read off the
    deciding interval at the claim level (one degree of freedom)."""
    control = {"acc": [0.5, 0.6]}
    treat = {"acc": [0.55, 0.6501]}  # differences 0.05, 0.0501: sure, and far below the margin 1
    (result,) = evaluate_claims(two_arm_run(control, treat, [claim("acc", margin=1.0)]))
    assert result.n == 2 and result.status == SHORT
    expected = scipy.stats.t.interval(1 - 2 * ALPHA, 1, loc=0.05005, scale=0.0001 / np.sqrt(2) / np.sqrt(2))
    assert (result.decision_interval.low, result.decision_interval.high) == pytest.approx(expected, rel=1e-6)


def test_summary_json_says_a_plain_claim_was_not_skew_blocked():
    """``skew_blocked`` is a boolean in summary.json: false (not null) for a claim t and the sign-flip test agree on."""
    from harness.analysis.decide.run_decisions import analyse
    from harness.analysis.present.summary_json import summary_document

    control = {"acc": [0.70 + 0.01 * i for i in range(8)]}
    treat = {"acc": [c + 0.05 + d for c, d in zip(control["acc"], SPREAD)]}
    (document_claim,) = summary_document(analyse(two_arm_run(control, treat, [claim("acc")])), ())["claims"]
    assert document_claim["result"] == PASS and document_claim["skew_blocked"] is False


def test_a_sequential_claim_left_open_is_decided_on_every_look_after_another_claim_stops():
    """acc passes early and is not tested again; loss, unmoved, is still read at each later look, through to the
    last, where it is decided on every seed at that look's level."""
    design = Schedule(3, 8, futility=None)
    treat = {"acc": [c + 0.05 + d for c, d in zip(HOLM_CONTROL["acc"], SPREAD)],
             "loss": [c + d for c, d in zip(HOLM_CONTROL["loss"], reversed(SPREAD))]}
    acc, loss = evaluate_claims(two_arm_run(HOLM_CONTROL, treat, [claim("acc"), claim("loss")],
                                            sequential=design.describe()))
    assert acc.status == PASS and acc.look < len(design.looks)
    assert (loss.status, loss.n, loss.look, loss.looks) == (INCONCLUSIVE, 8, len(design.looks), len(design.looks))
    assert loss.level == pytest.approx(ALPHA)  # Holm's next step: the family minus acc
    assert loss.nominal_level == pytest.approx(design.levels(design.looks, ALPHA)[-1])


FAMILY_CONTROL = {"acc": [0.70 + 0.01 * i for i in range(6)]}
FAMILY_TREAT = {"acc": [c + 0.05 + d for c, d in zip(FAMILY_CONTROL["acc"], SPREAD)]}


def test_a_claim_on_a_metric_without_a_direction_is_inconclusive_saying_so():
    control = {**FAMILY_CONTROL, "size": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
    treat = {**FAMILY_TREAT, "size": [2.0, 2.5, 3.5, 5.0, 5.5, 7.0]}
    (size,) = evaluate_claims(two_arm_run(control, treat, [claim("size")]))
    assert (size.status, size.detail, size.p_value, size.n) == (INCONCLUSIVE, "metric has no direction", None, 6)


@pytest.mark.parametrize("reporting", ["treat", "control"])
def test_a_metric_one_arm_does_not_report_is_undecided_and_keeps_its_place_in_the_family(reporting):
    """peak_bytes reported by one arm only: no claim on it can be tested, and it counts at p = 1 in the
    Holm family, so acc is tested at alpha / 2."""
    arms = {"treat": dict(FAMILY_TREAT), "control": dict(FAMILY_CONTROL)}
    arms[reporting]["peak_bytes"] = [1000.0 + s for s in range(6)]
    acc, peak = evaluate_claims(two_arm_run(arms["control"], arms["treat"], [claim("acc"), claim("peak_bytes")]))
    assert (peak.status, peak.detail, peak.contrast, peak.key) == (
        INCONCLUSIVE, "metric not reported by both arms", "treat-vs-control", "peak_bytes")
    assert peak.in_family and peak.p_value is None and peak.n == 0
    assert acc.status == PASS and acc.level == pytest.approx(ALPHA / 2)


def test_a_metric_with_no_seed_finite_on_both_sides_is_undecided_and_keeps_its_place_in_the_family():
    control = {**FAMILY_CONTROL, "peak_bytes": [1000.0, float("nan")] * 3}
    treat = {**FAMILY_TREAT, "peak_bytes": [float("nan"), 990.0] * 3}
    acc, peak = evaluate_claims(two_arm_run(control, treat, [claim("acc"), claim("peak_bytes")]))
    assert (peak.status, peak.detail, peak.contrast, peak.key) == (
        INCONCLUSIVE, "no seed finished on both sides", "treat-vs-control", "peak_bytes")
    assert peak.in_family and peak.p_value is None and peak.family == acc.family
    assert peak.point == acc.point  # the run's one point, named as the tested claim names it
    assert acc.status == PASS and acc.level == pytest.approx(ALPHA / 2)


def test_a_claim_on_a_metric_family_tests_each_reported_key_in_numeric_order():
    """``loss`` names loss@64, loss@256 and loss@1024: one result each, in the order of their sizes."""
    sizes = (1024, 64, 256)
    control = {f"loss@{size}": [0.4 + 0.01 * s for s in range(6)] for size in sizes}
    treat = {key: [v - 0.05 + d for v, d in zip(values, SPREAD)] for key, values in control.items()}
    decided = evaluate_claims(two_arm_run(control, treat, [claim("loss")]))
    assert [r.key for r in decided] == ["loss@64", "loss@256", "loss@1024"]
    assert all(r.status == PASS for r in decided)


@pytest.mark.parametrize("n", [3, 6])
def test_a_claims_skewness_is_scipys_bias_corrected_g1_of_its_differences(n):
    control = {"acc": [0.5] * n}
    differences = [0.3, 0.05, 0.1, 0.02, 0.4, 0.07][:n]
    (result,) = evaluate_claims(two_arm_run(control, {"acc": [0.5 + d for d in differences]}, [claim("acc")]))
    diffs = [t - 0.5 for t in (0.5 + d for d in differences)]
    assert result.skewness == pytest.approx(scipy.stats.skew(diffs, bias=False))
    assert abs(result.skewness - scipy.stats.skew(diffs, bias=True)) > 1e-3


def test_no_skewness_below_three_pairs_or_without_spread():
    two = evaluate_claims(two_arm_run({"acc": [0.5, 0.6]}, {"acc": [0.6, 0.65]}, [claim("acc")]))[0]
    constant = evaluate_claims(two_arm_run({"acc": [0.5, 0.75, 0.625, 0.5]}, {"acc": [0.625, 0.875, 0.75, 0.625]},
                                           [claim("acc")]))[0]
    assert two.n == 2 and two.skewness is None
    assert constant.n == 4 and constant.skewness is None and constant.status == PASS


def test_a_claim_t_alone_would_fail_is_left_undecided_naming_the_skew():
    """The mirror of the skewed pass: t alone fails the claim; the sign-flip test of failing does not reach."""
    heavy = [10.0, 10.5, 9.5, 10.2, -0.1, -0.2, 0.1, 0.05]
    (flagged,) = evaluate_claims(two_arm_run({"acc": [0.0] * 8}, {"acc": [-h for h in heavy]}, [claim("acc")]))
    assert flagged.p_fail <= ALPHA < flagged.p_flip_fail
    assert flagged.status == INCONCLUSIVE and flagged.skew_blocked


def test_one_pair_is_insufficient_and_still_names_its_reference():
    reference = claim("acc", "non_inferior", margin=0.01, reference="treat-vs-control")
    (result,) = evaluate_claims(two_arm_run({"acc": [0.5]}, {"acc": [0.6]}, [reference]))
    assert result.status == INSUFFICIENT and result.detail == "1 pair(s): a t interval needs at least 2"
    assert result.reference is not None and result.reference.contrast == "treat-vs-control" and result.reference.n == 1


def test_a_claim_whose_reference_is_not_established_is_vacuous_saying_why():
    control = {"acc": [0.70 + 0.01 * i for i in range(6)]}
    treat = {"acc": [c + d for c, d in zip(control["acc"], SPREAD)]}  # treat does not surely beat control
    reference = claim("acc", "non_inferior", margin=0.01, reference="treat-vs-control")
    (result,) = evaluate_claims(two_arm_run(control, treat, [reference]))
    assert result.status == VACUOUS and not result.reference.established
    assert result.detail == result.reference.reason and result.detail.startswith("vacuous: reference treat-vs-control")


def test_an_untestable_claim_on_a_metric_without_a_direction_is_outside_the_family():
    """A superiority claim on ``size`` (no better direction) could never be tested for sampling error: with no
    seed finite on both sides it is undecided, and not counted in acc's Holm family (acc is tested at alpha)."""
    control = {**FAMILY_CONTROL, "size": [1.0, float("nan")] * 3}
    treat = {**FAMILY_TREAT, "size": [float("nan"), 2.0] * 3}
    acc, size = evaluate_claims(two_arm_run(control, treat, [claim("acc"), claim("size")]))
    assert (size.status, size.detail, size.in_family) == (INCONCLUSIVE, "no seed finished on both sides", False)
    assert acc.status == PASS and acc.level == pytest.approx(ALPHA)


@pytest.mark.parametrize("partial", ["treat", "control"])
def test_a_swept_metric_one_arm_reports_only_at_another_point_is_not_reported_at_this_one(partial):
    """At k=1 only one arm reports peak_bytes (the other reports it at k=2 only): not reported by both arms
    there; at k=2 both do, and the claim is tested."""
    seeds = range(6)

    def metrics(arm: str, k: int, s: int) -> dict[str, float]:
        out = {"acc": 0.7 + 0.01 * s + (0.05 + SPREAD[s] if arm == "treat" else 0.0)}
        if arm != partial or k == 2:
            out["peak_bytes"] = 1000.0 + s - (50.0 + SPREAD[s] if arm == "treat" else 0.0)
        return out

    trials = [make_record(f"{arm}-{k}-{s}", arm, s, point={"k": k}, metrics=metrics(arm, k, s))
              for arm in ("treat", "control") for k in (1, 2) for s in seeds]
    meta = {"suite": "swept", "profile": "default", "seeds": list(seeds), "sweep": {"k": [1, 2]}, "metrics": METRICS,
            "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [claim("peak_bytes")], "sequential": None, "premises": []}
    at_1, at_2 = evaluate_claims(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    assert (at_1.point, at_1.status, at_1.detail) == ("k=1", INCONCLUSIVE, "metric not reported by both arms")
    assert (at_2.point, at_2.status, at_2.n) == ("k=2", PASS, 6)


def test_a_reference_on_a_lower_is_better_metric_is_established_by_a_sure_drop():
    """The reference contrast is read in better-is-positive units: a loss 0.05 lower on every seed (give or take)
    establishes it beyond the 0.01 margin, and the non-inferiority claim is tested, not left vacuous."""
    control = {"loss": [0.40 + 0.01 * i for i in range(8)]}
    treat = {"loss": [c - 0.05 + d for c, d in zip(control["loss"], SPREAD)]}
    reference = claim("loss", "non_inferior", margin=0.01, reference="treat-vs-control")
    (result,) = evaluate_claims(two_arm_run(control, treat, [reference]))
    assert result.reference.established and result.reference.estimate == pytest.approx(-0.05 + np.mean(SPREAD))
    assert result.status == PASS


def test_a_ratio_claim_with_spread_is_tested_in_the_holm_family():
    """Ratios that vary have sampling error: the ratio claim joins acc's Holm family, so acc is tested at alpha / 2."""
    control = {**FAMILY_CONTROL, "peak_bytes": [1000.0, 1010, 990, 1005, 998, 1003]}
    ratios = (0.9, 0.92, 0.88, 0.91, 0.9, 0.89)
    treat = {**FAMILY_TREAT, "peak_bytes": [v * r for v, r in zip(control["peak_bytes"], ratios)]}
    acc, ratio = evaluate_claims(two_arm_run(control, treat, [claim("acc"), claim("peak_bytes", "ratio", max=0.95)]))
    assert ratio.in_family and ratio.status == PASS and ratio.estimate == pytest.approx(0.9)
    assert acc.status == PASS and acc.level == pytest.approx(ALPHA / 2)
