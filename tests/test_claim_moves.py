"""The gate and `harness compare` judge a claim on its evidence, not its label alone.

A label change whose t statistic lay within NEAR_T of its critical value in both runs is a warning
("near the boundary"); a label change further out is a regression; an estimate that moves by more
than SPREAD_Z standard errors of the difference fails even when the label holds; a smaller move
passes. Unit tests on constructed evidence, then the same rules through `harness gate` and
`harness compare` on synthetic runs whose claim sits a known distance from its critical value.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import scipy.stats
from click.testing import CliRunner

import test_compare
from harness.analysis.compare.claim_moves import NEAR_T, SPREAD_Z, ClaimEvidence, claim_evidence, decision_bounds, judge
from harness.analysis.decide.claims import ClaimResult, ReferenceEffect
from harness.analysis.stats.paired_stats import mean_estimate
from harness.cli import main
from harness.suite.schema import ClaimSpec
from test_gating_baseline import CLAIM, make_run, shift
from test_gating_report import table_rows

CRITICAL = 2.5
SE = 0.01


def at_t(result: str, t: float, bound: float = 0.0, critical: float = CRITICAL, se: float = SE) -> ClaimEvidence:
    """A claim whose t statistic against ``bound`` is ``t``."""
    return ClaimEvidence(result, bound + t * se, se, critical, (bound,))


def test_a_flip_near_the_boundary_is_a_warning():
    move = judge(at_t("pass", CRITICAL + 0.2), at_t("inconclusive", CRITICAL - 0.2), None)
    assert not move.regression and move.near_boundary
    assert "near the boundary" in move.rule and "PASS -> INCONCLUSIVE" in move.rule


def test_a_flip_far_from_the_boundary_is_a_regression_even_within_the_estimate_tolerance():
    before, after = at_t("pass", CRITICAL + 1.0), at_t("inconclusive", CRITICAL - 1.0)
    assert abs(after.estimate - before.estimate) < SPREAD_Z * math.hypot(SE, SE)  # the estimate check passes it
    move = judge(before, after, None)
    assert move.regression and not move.near_boundary and "(changed)" in move.rule


def test_the_near_tolerance_is_the_stated_one():
    just_inside = judge(at_t("pass", CRITICAL + NEAR_T - 0.01), at_t("inconclusive", CRITICAL - 0.1), None)
    just_outside = judge(at_t("pass", CRITICAL + NEAR_T + 0.01), at_t("inconclusive", CRITICAL - 0.1), None)
    assert just_inside.near_boundary and not just_inside.regression
    assert just_outside.regression and not just_outside.near_boundary


def test_a_big_estimate_move_with_the_same_label_is_a_regression():
    before, after = at_t("pass", 5.0), at_t("pass", 5.0 + 4.5)  # 4.5 se > 3 x sqrt(2) se
    move = judge(before, after, None)
    assert move.regression and "moved by" in move.rule and "3 standard errors" in move.rule


def test_a_small_estimate_move_with_the_same_label_passes():
    move = judge(at_t("pass", 5.0), at_t("pass", 5.0 + 4.0), None)  # 4 se < 3 x sqrt(2) se = 4.24 se
    assert not move.regression and not move.near_boundary


def test_a_near_flip_whose_estimate_moved_beyond_its_tolerance_is_a_regression():
    """A relative margin's bound moves with its reference effect: each run near its own bound, the
    estimate itself far from where it was."""
    before, after = at_t("pass", CRITICAL + 0.1), at_t("inconclusive", CRITICAL - 0.1, bound=1.0)
    move = judge(before, after, None)
    assert move.regression and not move.near_boundary and "moved by" in move.rule


def test_from_surely_above_to_surely_below_is_never_near():
    move = judge(at_t("pass", CRITICAL + 0.1), at_t("fail", -CRITICAL - 0.1, se=SE), 1.0)
    assert move.regression


def test_crossing_the_other_critical_value_is_judged_at_it():
    """Undecided to 'surely below' crosses -critical: near only when both t lie near -critical."""
    assert judge(at_t("inconclusive", -CRITICAL + 0.2), at_t("fail", -CRITICAL - 0.2), None).near_boundary
    assert judge(at_t("inconclusive", CRITICAL - 0.2), at_t("fail", -CRITICAL - 0.2), 1.0).regression


def test_a_holm_step_that_moves_the_critical_value_under_an_unchanged_estimate_is_near():
    """Another claim's result changed, so this one is tested at another Holm level: its own evidence is
    the same, its critical t moved past it."""
    before = at_t("inconclusive", 7.9, critical=8.0)
    after = at_t("pass", 7.9, critical=7.7)
    move = judge(before, after, None)
    assert move.near_boundary and not move.regression


def test_a_label_change_the_statistic_does_not_explain_is_a_regression():
    """A premise, a dropped pair or a reference effect changed the label: the labels are compared."""
    move = judge(at_t("pass", CRITICAL + 0.1), at_t("vacuous", CRITICAL + 0.1), None)
    assert move.regression


def test_without_stored_evidence_labels_are_compared_as_before():
    old = ClaimEvidence("pass")  # a baseline saved before claims stored their evidence
    assert judge(old, at_t("inconclusive", CRITICAL - 0.1), 0.05).regression
    assert not judge(old, at_t("pass", 50.0), 0.05).regression


def test_one_seed_falls_back_to_the_suite_tolerance():
    before = ClaimEvidence("insufficient pairs", 0.10)
    assert not judge(before, ClaimEvidence("insufficient pairs", 0.14), 0.05).regression
    assert judge(before, ClaimEvidence("insufficient pairs", 0.16), 0.05).regression


def test_a_deterministic_claim_must_keep_its_estimate():
    exact = ClaimEvidence("pass", 1.0, 0.0, 2.0, (0.0,))
    assert not judge(exact, exact, None).regression
    assert judge(exact, ClaimEvidence("pass", 1.0 + 1e-6, 0.0, 2.0, (0.0,)), None).regression


def claim(test: str, sign_key_estimate: list[float], **spec) -> ClaimResult:
    estimate = mean_estimate(sign_key_estimate)
    reference = spec.pop("reference_margin", None)
    claim_spec = ClaimSpec(contrast="t-vs-c", metric="loss", test=test, **spec)
    effect = None if reference is None else ReferenceEffect("c-vs-none", 1.0, None, 3, reference, True, "")
    return ClaimResult(claim_spec, "t-vs-c", "", "loss", "inconclusive", estimate.n, estimate.mean, estimate.interval,
                       "", reference=effect, mean_estimate=estimate, nominal_level=0.025)


@pytest.mark.parametrize(("test", "spec", "sign", "bounds"), [
    ("superior", {}, 1, (0.0,)),
    ("superior", {"margin": 0.2}, -1, (-0.2, 0.0)),  # lower is better: better by 0.2 is a difference of -0.2
    ("non_inferior", {"relative_margin": 0.5, "reference": "c-vs-none", "reference_margin": 0.3}, 1, (-0.3, 0.0)),
    ("equivalent", {"margin": 0.1, "reference": "c-vs-none", "reference_margin": 0.1}, 1, (-0.1, 0.1)),
    ("ratio", {"min": 0.9}, 1, (0.9,)),
    ("equal", {}, 1, ()),
])
def test_decision_bounds_are_where_the_claim_is_read(test, spec, sign, bounds):
    assert decision_bounds(claim(test, [0.1, 0.2, 0.3], **spec), sign) == pytest.approx(bounds)


def test_a_claims_evidence_is_what_its_test_read():
    result = claim("superior", [0.1, 0.2, 0.3], margin=0.05)
    evidence = claim_evidence(result, 1)
    assert evidence.estimate == pytest.approx(0.2) and evidence.standard_error == pytest.approx(0.1 / math.sqrt(3))
    assert evidence.boundary_t == pytest.approx(scipy.stats.t.isf(0.025, 2)) and evidence.result == "inconclusive"
    assert claim_evidence(result, 1, "PASS (INVALID: does not count)").result == "PASS (INVALID: does not count)"


# -- through `harness gate`: a superiority claim at a known t --------------------------------------------
# make_run's paired differences over seeds 0-4 are base - 0.01 * seed (base 0.05, moved by shifting
# treat's acc): standard error 0.01 * sd(0..4) / sqrt(5), and one claim in its Holm family, so its
# critical t is t(0.975, 4).
SEEDS = (0, 1, 2, 3, 4)
GATE_SE = 0.01 * math.sqrt(2.5) / math.sqrt(5)
GATE_CRITICAL = float(scipy.stats.t.isf(0.025, 4))


def shift_to_t(t: float):
    """Shift treat so that the claim's t statistic against 0 is ``t``."""
    return shift("treat", "acc", t * GATE_SE + 0.02 - 0.05)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def save_at(tmp_path: Path, t: float) -> Path:
    result = invoke("baseline", "save", make_run(tmp_path / "reference", shift_to_t(t), seeds=SEEDS, claims=[CLAIM]),
                    "--out", tmp_path / "baselines")
    assert result.exit_code == 0, result.output
    return tmp_path / "baselines" / "synth-smoke-cpu.json"


def gate_at(tmp_path: Path, t: float, *extra):
    run = make_run(tmp_path / f"current-{t}", shift_to_t(t), seeds=SEEDS, claims=[CLAIM])
    return invoke("gate", run, "--baselines-dir", tmp_path / "baselines", *extra)


def test_the_baseline_stores_each_claims_evidence(tmp_path):
    stored = json.loads(save_at(tmp_path, GATE_CRITICAL + 0.2).read_text())
    (entry,) = [v for v in stored["values"] if v["check"] == "claim"]
    assert entry["result"] == "pass" and entry["bounds"] == [0.0]
    assert entry["standard_error"] == pytest.approx(GATE_SE) and entry["boundary_t"] == pytest.approx(GATE_CRITICAL)
    assert entry["estimate"] == pytest.approx((GATE_CRITICAL + 0.2) * GATE_SE) == entry["value"]


def test_the_gate_warns_on_a_flip_near_the_boundary(tmp_path):
    save_at(tmp_path, GATE_CRITICAL + 0.2)
    summary = tmp_path / "summary.md"
    junit = tmp_path / "gate.xml"
    result = CliRunner().invoke(main, ["gate", str(make_run(tmp_path / "near", shift_to_t(GATE_CRITICAL - 0.2),
                                                            seeds=SEEDS, claims=[CLAIM])),
                                       "--baselines-dir", str(tmp_path / "baselines"), "--junit", str(junit)],
                                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 0, result.output
    assert "1 near the boundary" in result.output and "REGRESSION" not in result.output
    warning = next(line for line in result.output.splitlines() if "NEAR THE BOUNDARY" in line)
    assert "PASS -> INCONCLUSIVE" in warning
    (row,) = [row for row in table_rows(summary.read_text()) if row[1] == "claim"]
    assert row[8] == "WARN" and "checks within tolerance, 1 near the boundary)" in summary.read_text()
    assert "warning:" in junit.read_text() and 'failures="0"' in junit.read_text()


def test_the_gate_fails_a_flip_far_from_the_boundary(tmp_path):
    save_at(tmp_path, GATE_CRITICAL + 1.0)
    result = gate_at(tmp_path, GATE_CRITICAL - 1.0)  # moves 2 se: within every value's tolerance
    assert result.exit_code == 1, result.output
    regressions = [line for line in result.output.splitlines() if "REGRESSION" in line]
    assert len(regressions) == 1 and "REGRESSION claim" in regressions[0] and "(changed)" in regressions[0]


def test_the_gate_fails_a_claim_whose_estimate_moved_though_its_label_held(tmp_path):
    save_at(tmp_path, 6.0)
    result = gate_at(tmp_path, 6.0 + 4.5)
    assert result.exit_code == 1, result.output
    claim_line = next(line for line in result.output.splitlines() if "REGRESSION claim" in line)
    assert "PASS -> PASS" in claim_line and "moved by" in claim_line
    assert gate_at(tmp_path, 6.0 + 4.0).exit_code == 0  # 4 se: within 3 x sqrt(2)


def test_a_baseline_without_evidence_still_loads_and_compares_labels(tmp_path):
    path = save_at(tmp_path, GATE_CRITICAL + 0.2)
    stored = json.loads(path.read_text())
    for entry in stored["values"]:
        for key in ("estimate", "standard_error", "boundary_t", "bounds"):
            entry.pop(key, None)
    path.write_text(json.dumps(stored))
    result = gate_at(tmp_path, GATE_CRITICAL - 0.2)
    assert result.exit_code == 1 and "REGRESSION claim" in result.output and "(changed)" in result.output


@pytest.mark.parametrize(("key", "value"), [("standard_error", -1.0), ("boundary_t", "2"), ("bounds", [None]),
                                            ("estimate", math.inf)])
def test_malformed_evidence_is_a_usage_error(tmp_path, key, value):
    path = save_at(tmp_path, GATE_CRITICAL + 0.2)
    stored = json.loads(path.read_text())
    next(v for v in stored["values"] if v["check"] == "claim")[key] = value
    path.write_text(json.dumps(stored).replace("Infinity", "1e999"))
    result = gate_at(tmp_path, GATE_CRITICAL + 0.2)
    assert result.exit_code == 2 and "malformed" in result.output + result.stderr


# -- through `harness compare` -------------------------------------------------------------------------
# test_compare's runs: paired differences gain + 0.002 * (seed % 3) over seeds 0-4.
WOBBLE = [0.002 * (s % 3) for s in range(5)]
COMPARE_SE = mean_estimate(WOBBLE).standard_error
COMPARE_MEAN = sum(WOBBLE) / 5


def compare_at(tmp_path: Path, t_a: float, t_b: float):
    a = test_compare.make_run(tmp_path / "a", range(5), treat_gain=t_a * COMPARE_SE - COMPARE_MEAN)
    b = test_compare.make_run(tmp_path / "b", range(5), treat_gain=t_b * COMPARE_SE - COMPARE_MEAN)
    result = invoke("compare", a, b, "--out", tmp_path / "cmp")
    return result, json.loads((tmp_path / "cmp" / "compare-synth.json").read_text())


def test_compare_reports_a_near_flip_without_failing(tmp_path):
    result, summary = compare_at(tmp_path, GATE_CRITICAL + 0.2, GATE_CRITICAL - 0.2)
    assert result.exit_code == 0, result.output
    assert summary["claim_changed"] is False
    (change,) = [c for c in summary["changes"] if c["what"] == "primary claim"]
    assert change["near_boundary"] is True and (change["a"], change["b"]) == ("PASS", "INCONCLUSIVE")
    assert "primary claim, near the boundary" in result.stdout


def test_compare_fails_a_far_flip_and_a_big_move_under_the_same_label(tmp_path):
    far, summary = compare_at(tmp_path / "far", GATE_CRITICAL + 1.0, GATE_CRITICAL - 1.0)
    assert far.exit_code == 1 and summary["claim_changed"] is True
    moved, summary = compare_at(tmp_path / "moved", 6.0, 6.0 + 4.5)
    assert moved.exit_code == 1, moved.output
    (change,) = [c for c in summary["changes"] if c["what"] == "primary claim"]
    assert (change["a"], change["b"]) == ("PASS", "PASS") and "moved by" in change["why"]
