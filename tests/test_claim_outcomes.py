"""A decided claim says which way it went, and timing claims are a Holm family of their own.

A superiority claim with a margin has three decided outcomes, read off the one interval that decided
it: beyond the margin (PASS), better than 0 but surely short of the margin (SHORT OF MARGIN) and
surely not better (FAIL, 'not better'). A non-inferiority PASS whose interval lies above 0 says
'superior too'. Every surface (terminal table, summary.md, summary.json, forest plot, MLflow tag)
reads ``status`` and ``result_text``, so these checks cover the labels at their source and in the
summary and forest plot that render them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from records import make_record
from test_strict_claims import SPREAD, claim, two_arm_run

from harness.analysis.claim_tests.contract import TIMING_FAMILY
from harness.analysis.decide.claims import FAIL, PASS, SHORT, evaluate_claims
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.present.forest_plots import COLOURS, claim_rows
from harness.analysis.present.run_summary import SuiteSummary, mechanism_line, totals_line
from harness.analysis.present.summary_json import summary_document
from harness.analysis.run_results import index_results
from harness.core.stored_fields import as_stored
from harness.suite.stored import StoredSuite

CONTROL = [0.70 + 0.01 * i for i in range(8)]


def _superior(gain: float, margin: float):
    treat = {"acc": [c + gain + d for c, d in zip(CONTROL, SPREAD)], "loss": [0.4] * 8}
    results = two_arm_run({"acc": CONTROL, "loss": [0.4] * 8}, treat, [claim("acc", margin=margin)])
    (result,) = evaluate_claims(results)
    return result, results


@pytest.mark.parametrize("gain, status, text", [
    (0.05, PASS, "PASS"),
    (0.004, SHORT, "SHORT OF MARGIN (better, by less than 0.01)"),
    (-0.02, FAIL, "FAIL (not better)"),
    (0.0, FAIL, "FAIL (short of 0.03, not shown better than 0)"),
])
def test_a_superiority_margin_has_three_decided_outcomes(gain, status, text):
    if gain == 0.0:  # a wider spread and margin: the interval reaches 0, yet lies wholly below the margin
        treat = {"acc": [c + 3 * d for c, d in zip(CONTROL, SPREAD)], "loss": [0.4] * 8}
        (result,) = evaluate_claims(two_arm_run({"acc": CONTROL, "loss": [0.4] * 8}, treat,
                                                [claim("acc", margin=0.03)]))
    else:
        result, _ = _superior(gain, 0.01)
    assert (result.status, result.result_text) == (status, text), result.decision_interval
    low, high = result.decision_interval.low, result.decision_interval.high
    if status == SHORT:
        assert 0 < low and high < 0.01  # the deciding interval lies inside (0, margin)
    if text == "FAIL (not better)":
        assert high <= 0


def test_a_decided_claim_says_how_it_was_tested():
    """The claims table's detail column names the test and its bound, whatever the outcome."""
    passed, _ = _superior(0.05, 0.01)
    failed, _ = _superior(-0.02, 0.01)
    assert passed.detail == failed.detail == "one-sided t vs 0.01 (better side)"


def test_without_a_margin_a_fail_says_not_better():
    result, _ = _superior(-0.02, 0.0)
    assert result.result_text == "FAIL (not better)"


def test_short_of_margin_is_oriented_by_the_metric_direction():
    control = {"acc": [0.7] * 8, "loss": [0.40 + 0.01 * i for i in range(8)]}
    lower = {"acc": [0.7] * 8, "loss": [c - 0.05 + d for c, d in zip(control["loss"], SPREAD)]}  # 0.05 nats lower
    worse = {"acc": [0.7] * 8, "loss": [c + 0.05 + d for c, d in zip(control["loss"], SPREAD)]}
    (short,) = evaluate_claims(two_arm_run(control, lower, [claim("loss", margin=0.08)]))
    (not_better,) = evaluate_claims(two_arm_run(control, worse, [claim("loss", margin=0.08)]))
    assert short.status == SHORT and not_better.result_text == "FAIL (not better)"


def _non_inferior(gain: float):
    """treat vs control non-inferior at 0.02, control vs a weak arm as the reference (a 0.2 gain)."""
    seeds = range(8)
    weak = [c - 0.2 + d for c, d in zip(CONTROL, reversed(SPREAD))]
    arms = {"control": CONTROL, "treat": [c + gain + d for c, d in zip(CONTROL, SPREAD)], "weak": weak}
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={"acc": values[s]}) for arm, values in arms.items()
              for s in seeds]
    meta = {"suite": "ni", "profile": "default", "seeds": list(seeds), "sweep": {},
            "metrics": {"acc": {"direction": "higher", "unit": "fraction", "kind": "quality"}},
            "arms": {arm: {"labels": [arm]} for arm in arms},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"},
                          {"treatment": "control", "control": "weak", "name": "control-vs-weak"}],
            "claims": [claim("acc", "non_inferior", margin=0.02, reference="control-vs-weak")]}
    (result,) = evaluate_claims(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    return result


def test_non_inferiority_says_when_it_is_superior_too_and_when_it_is_worse():
    better, level, worse = _non_inferior(0.03), _non_inferior(0.0), _non_inferior(-0.05)
    assert better.result_text == "PASS (superior too)"
    assert level.result_text == "PASS"
    assert worse.result_text == "FAIL (worse by more than the margin)"


def test_every_surface_shows_short_of_margin():
    result, results = _superior(0.004, 0.01)
    analysis = analyse(results)
    assert "1 SHORT OF MARGIN" in totals_line([SuiteSummary(analysis)])
    assert "SHORT OF MARGIN (better, by less than 0.01)" in SuiteSummary(analysis).render()
    (document_claim,) = summary_document(analysis, ())["claims"]
    assert (document_claim["result"], document_claim["result_text"]) == (SHORT, result.result_text)
    (row,) = [r for r in claim_rows(analysis) if r.result == SHORT]
    assert row.colour == COLOURS[SHORT] and row.bounds == (0.01,)  # the margin is drawn


TIMING_METRICS = {"acc": {"direction": "higher", "unit": "fraction", "kind": "quality"},
                  "loss": {"direction": "lower", "unit": "nats", "kind": "quality"},
                  "tokens_per_s": {"direction": "higher", "unit": "tokens/s", "kind": "speed"}}


def _with_timing(timing_gain: float):
    seeds = range(6)
    control = {"acc": [0.7 + 0.01 * s for s in seeds], "loss": [0.5] * 6, "tokens_per_s": [1000.0 + 10 * s for s in seeds]}
    jitter = (0.004, -0.003, 0.002, -0.001, 0.003, -0.002)
    treat = {"acc": [control["acc"][s] + 0.012 + jitter[s] for s in seeds], "loss": [0.5] * 6,
             "tokens_per_s": [control["tokens_per_s"][s] + timing_gain + 40 * jitter[s] / 0.004 for s in seeds]}
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={k: v[s] for k, v in values.items()})
              for arm, values in (("control", control), ("treat", treat)) for s in seeds]
    meta = {"suite": "timed", "profile": "default", "seeds": list(seeds), "sweep": {}, "metrics": TIMING_METRICS,
            "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [claim("acc"), claim("tokens_per_s")]}
    return evaluate_claims(index_results(Path("."), StoredSuite.from_stored(meta), trials))


def test_timing_claims_are_a_holm_family_of_their_own():
    acc, speed = _with_timing(0.0)
    assert speed.family == TIMING_FAMILY and acc.family != TIMING_FAMILY
    assert acc.level == pytest.approx(0.025) and speed.level == pytest.approx(0.025)  # alone in each family
    acc_fast, _ = _with_timing(500.0)  # the timing claim's outcome does not move the quality claim
    assert (acc.status, acc.level, acc.p_adjusted) == (acc_fast.status, acc_fast.level, acc_fast.p_adjusted)


def _with_mechanism(gain: float, margin: float, mechanism: str):
    treat = {"acc": [c + gain + d for c, d in zip(CONTROL, SPREAD)], "loss": [0.4] * 8}
    results = two_arm_run({"acc": CONTROL, "loss": [0.4] * 8}, treat, [claim("acc", margin=margin)])
    stored = StoredSuite.from_stored({**as_stored(results.stored), "mechanism": mechanism})
    return analyse(index_results(Path("."), stored, list(results.finished)))


@pytest.mark.parametrize("gain, margin, mechanism, side", [
    (0.05, 0.01, "treat", "for"),         # the mechanism is the treatment and passes
    (0.004, 0.01, "treat", "against"),    # better, but short of the margin worth its cost
    (-0.02, 0.0, "treat", "against"),     # not better
    (0.05, 0.0, "control", "against"),    # the mechanism is the control, and the other arm beats it
    (-0.02, 0.0, "control", "for"),       # the other arm is surely not better than the mechanism
    (0.05, 0.0, "elsewhere", ""),         # a claim that does not involve the mechanism favours neither
])
def test_a_decided_claim_says_whether_it_favours_the_mechanism(gain, margin, mechanism, side):
    analysis = _with_mechanism(gain, margin, mechanism)
    (result,) = analysis.claims
    assert result.polarity(mechanism) == side
    summary = SuiteSummary(analysis)
    row = summary.claim_rows()[0][5]
    assert row.endswith(f", {side} {mechanism}") if side else mechanism not in row
    assert f"for {int(side == 'for')} · against {int(side == 'against')}" in mechanism_line([summary])
    document = summary_document(analysis, ())
    assert document["mechanism"] == mechanism and document["claims"][0]["polarity"] == (side or None)


def test_without_a_mechanism_nothing_is_for_or_against():
    result, results = _superior(0.05, 0.01)
    assert result.polarity(None) == ""
    assert mechanism_line([SuiteSummary(analyse(results))]).endswith("no suite names its mechanism")


def test_the_mechanism_must_name_an_arm(tmp_path):
    from fault_injection import harness_here

    suite = tmp_path / "toy.yaml"
    text = (Path(__file__).parent / "suites" / "toy.yaml").read_text()
    suite.write_text(text.replace("\narms:", "\nmechanism: nope\narms:", 1))
    done = harness_here("validate", str(suite))
    assert done.returncode == 2 and "mechanism: unknown arm 'nope'" in done.stdout + done.stderr
    suite.write_text(text.replace("\narms:", "\nmechanism: momentum\narms:", 1))
    assert harness_here("validate", str(suite)).returncode == 0


def test_a_claim_left_vacuous_by_its_reference_reports_the_last_look_it_read() -> None:
    """A sequential claim whose reference is never established stays VACUOUS through every look; its look
    is the last one taken (it read every seed), not the first: the run summary's seeds column and summary.json's
    ``look`` say where the run left it."""
    from test_decision_core_mutants import NON_INFERIOR, ONLY_LOOK_5, reference_run

    base = [1.0, 1.2, 0.8, 1.1, 0.9, 1.0]
    old = [1.05, 1.1, 0.85, 1.05, 0.95, 1.0]  # old does not surely beat base: the reference is not established
    new = [v + 0.3 for v in old]
    (result,) = evaluate_claims(reference_run({"new": new, "old": old, "base": base}, NON_INFERIOR,
                                              {**ONLY_LOOK_5, "futility": None}))
    assert (result.status, result.n, result.look, result.looks) == ("vacuous", 6, 4, 4)


def test_a_family_key_a_later_look_no_longer_tests_keeps_the_result_of_the_last_look_that_did() -> None:
    """A claim on ``nmse`` reads the ``nmse@<size>`` keys only while the bare key is not reported; when later seeds
    report ``nmse`` itself, the sequential run tests that from then on, and the family key's claim is still listed,
    as decided at the last look that read it: its level, look and MDE, not the bare test before multiplicity."""
    seeds = list(range(6))
    noise = [0.02, -0.03, 0.01, 0.0, 0.02, -0.01]

    def metrics(arm: str, s: int) -> dict[str, float]:
        shift = noise[s] if arm == "treat" else 0.0
        return {"nmse@64": 0.5 + 0.01 * s + shift, **({"nmse": 0.4 + 0.01 * s + shift} if s >= 3 else {})}

    trials = [make_record(f"{arm}-{s}", arm, s, metrics=metrics(arm, s)) for arm in ("treat", "control") for s in seeds]
    meta = {"suite": "fam", "profile": "default", "seeds": seeds, "sweep": {},
            "metrics": {"nmse": {"direction": "lower", "unit": "", "kind": "quality"}},
            "arms": {"treat": {"labels": ["treat"]}, "control": {"labels": ["control"]}},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
            "claims": [claim("nmse")], "sequential": {"first": 3, "max_seeds": 6, "futility": None}, "premises": []}
    family_key, bare = evaluate_claims(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    assert (family_key.key, family_key.status, family_key.n, family_key.looks) == ("nmse@64", "inconclusive", 3, 4)
    assert family_key.p_value == pytest.approx(0.5)  # three differences +0.02, -0.03, +0.01: mean 0, t = 0
    assert (family_key.look, family_key.level) == (1, pytest.approx(0.025))
    assert family_key.nominal_level is not None and family_key.mde is not None
    assert (bare.key, bare.n, bare.look, bare.looks) == ("nmse", 3, 4, 4)


def test_leaving_speed_claims_out_keeps_every_claim_declared_after_one() -> None:
    """The gate's view without timings drops the speed claim only: the quality claim declared after it is still
    decided, alone in its family."""
    from test_decision_core_mutants import claims_run

    control = {"score": [0.70 + 0.01 * s for s in range(6)], "seconds": [10.0 + 0.1 * s for s in range(6)]}
    treat = {"score": [c + 0.05 + d for c, d in zip(control["score"], SPREAD)],
             "seconds": [c - 1.0 + d for c, d in zip(control["seconds"], SPREAD)]}
    claims = [{"contrast": "treat-vs-control", "metric": m, "test": "superior"} for m in ("seconds", "score")]
    run = claims_run(treat, control, claims)
    assert [r.key for r in evaluate_claims(run)] == ["seconds", "score"]
    (score,) = evaluate_claims(run, include_speed=False)
    assert (score.key, score.status) == ("score", PASS) and score.level == pytest.approx(0.025)
