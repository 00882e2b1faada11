"""The sequential seed design against known truth: A/A runs keep the false PASS rate at the nominal
level under optional stopping, naive peeking (a fixed-n test at every look) does not, planted effects
are found with the power the design predicts and with fewer seeds than the fixed design of that power.

Every run goes through ``evaluate_claims`` on in-memory results, the same path a report takes; rates
are asserted with exact binomial tolerances (99.9% two-sided), as in test_statistics_calibration.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from records import make_record

from harness.analysis.decide.claims import FAIL, FUTILE, PASS, evaluate_claims
from harness.analysis.decide.looks import stored_schedule
from harness.analysis.run_results import RunResults, index_results
from harness.core.stored_fields import as_stored
from harness.suite.schema import SEQUENTIAL
from harness.suite.stored import StoredSuite
from harness.analysis.stats.sequential_design import (
    Schedule,
    fixed_seeds_for_power,
    nominal_levels,
    operating_characteristics,
    spent,
)

ALPHA = 0.025  # one-sided level of a claim at 95% confidence
FIRST = 3


def binomial_bounds(trials: int, p: float, coverage: float = 0.999) -> tuple[int, int]:
    low, high = scipy.stats.binom.interval(coverage, trials, p)
    return int(low), int(high)


def sequential_run(differences: np.ndarray, design: Schedule) -> RunResults:
    """A two-arm run whose per-seed treatment - control differences are given, declared sequential."""
    meta = {
        "suite": "seq", "profile": "default", "seeds": list(range(len(differences))),
        "sequential": design.describe(),
        "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
        "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
        "claims": [{"contrast": "treat-vs-control", "metric": "score", "test": "superior"}],
        "metrics": {"score": {"direction": "higher", "unit": "", "kind": "quality", "key": True}},
    }
    trials = []
    for seed, difference in enumerate(differences):
        for arm, value in (("control", 10.0 + seed), ("treat", 10.0 + seed + difference)):
            trials.append(make_record(f"{arm}-{seed}", arm, seed, metrics={"score": float(value)}))
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def decide(paths: np.ndarray, design: Schedule) -> list:
    return [evaluate_claims(sequential_run(path, design))[0] for path in paths]


def naive_peeking_passes(paths: np.ndarray, design: Schedule) -> int:
    """A fixed-n one-sided t test at level ALPHA at every look: what the design must not do."""
    hits = np.zeros(len(paths), dtype=bool)
    for n in design.looks:
        sample = paths[:, :n]
        t = sample.mean(1) / (sample.std(1, ddof=1) / math.sqrt(n))
        hits |= scipy.stats.t.sf(t, n - 1) <= ALPHA
    return int(hits.sum())


# -- the boundaries ----------------------------------------------------------------------------------

def test_one_look_is_the_fixed_test_and_spending_reaches_alpha_at_the_last_look():
    assert nominal_levels((5,), ALPHA) == (ALPHA,)
    for spending in ("obrien_fleming", "pocock"):
        assert spent(1.0, ALPHA, spending) == ALPHA and spent(0.0, ALPHA, spending) == 0.0
        levels = nominal_levels(Schedule(3, 12, spending=spending).looks, ALPHA, spending)
        assert all(0 < level < ALPHA for level in levels)  # every look is stricter than a fixed test
    # O'Brien-Fleming keeps almost nothing for the first look, Pocock spends early
    obf, pocock = (nominal_levels(Schedule(3, 12).looks, ALPHA, s) for s in ("obrien_fleming", "pocock"))
    assert obf[0] < 1e-4 < pocock[0] and obf[-1] > pocock[-1]


def test_design_rejects_what_it_cannot_run():
    for bad in (dict(first=5, max_seeds=4), dict(first=3, max_seeds=6, batch=0),
                dict(first=3, max_seeds=6, spending="haybittle")):
        with pytest.raises(ValueError):
            Schedule(**bad)
    assert Schedule(3, 10, batch=3).looks == (3, 6, 9, 10)


# -- A/A: optional stopping keeps the error rate --------------------------------------------------------

@pytest.mark.integration  # calibration by simulation
@pytest.mark.parametrize("max_seeds", [6, 12, 20])
def test_aa_false_pass_rate_under_sequential_looks_is_nominal_and_naive_peeking_is_not(max_seeds):
    design = Schedule(FIRST, max_seeds)
    paths = np.random.default_rng(max_seeds).normal(0.0, 1.0, size=(1000, max_seeds))
    results = decide(paths, design)
    low, high = binomial_bounds(len(paths), ALPHA)
    false_pass = sum(r.status == PASS for r in results)
    false_fail = sum(r.status == FAIL for r in results)
    assert false_pass <= high and false_fail <= high
    naive = naive_peeking_passes(paths, design)
    assert naive > high, f"naive peeking passed {naive} of {len(paths)}: the test could not tell it apart"


# -- planted effects: power as predicted, fewer seeds than the fixed design ----------------------------

@pytest.mark.integration  # calibration by simulation
@pytest.mark.parametrize(("max_seeds", "effect_in_sd"), [(6, 1.5), (12, 1.0)])
def test_planted_effect_power_matches_the_design_and_uses_fewer_seeds_than_fixed(max_seeds, effect_in_sd):
    design = Schedule(FIRST, max_seeds)
    predicted = operating_characteristics(design, effect_in_sd, ALPHA)
    assert 0.5 < predicted.power < 0.95  # an effect the design finds often, not always
    paths = np.random.default_rng(1000 + max_seeds).normal(effect_in_sd, 1.0, size=(600, max_seeds))
    results = decide(paths, design)
    found = sum(r.status == PASS for r in results)
    low, high = binomial_bounds(len(paths), predicted.power)
    # The plan assumes the t test alone. A claim also needs the sign-flip test at its bound where the
    # pairs can reach the level: at 6 seeds (1/64 under the last look's level) that asks for every
    # difference on the better side, and costs power that the plan does not show; only a blocked
    # decision separates the two.
    blocked = sum(r.skew_blocked for r in results)
    assert low <= found + blocked and found <= high
    if max_seeds > 6:
        assert low <= found
    used = np.mean([r.n if r.status in (PASS, FAIL, FUTILE) else max_seeds for r in results])
    fixed = fixed_seeds_for_power(effect_in_sd, ALPHA, predicted.power)
    assert used < fixed, f"sequential used {used:.2f} seeds on average, the fixed design of equal power {fixed}"
    assert abs(used - predicted.expected_seeds) < 0.5  # the plan's prediction of the cost holds


def test_a_clear_effect_stops_early_and_a_null_one_is_futile():
    design = Schedule(FIRST, 12)
    rng = np.random.default_rng(5)
    (clear,) = evaluate_claims(sequential_run(rng.normal(4.0, 1.0, 12), design))
    assert clear.status == PASS and clear.n < 12 and clear.look == clear.n - FIRST + 1
    assert clear.decision_interval.low > 0 and clear.boundary_t is not None
    (null,) = evaluate_claims(sequential_run(np.array([0.3, -0.3, 0.1, -0.1, 0.2, -0.2, 0.0, 0.05] + [0.0] * 4),
                                             design))
    assert null.status == FUTILE and "conditional power" in null.detail and null.n < 12
    no_futility = Schedule(FIRST, 12, futility=None)
    (kept,) = evaluate_claims(sequential_run(np.array([0.3, -0.3, 0.1, -0.1, 0.2, -0.2, 0.0, 0.05] + [0.0] * 4),
                                             no_futility))
    assert kept.status == "inconclusive" and kept.n == 12


def test_futility_waits_for_its_share_of_max_seeds_and_is_stored_only_when_set():
    """An early look's estimate is too noisy to give up on: with futility_from 0.5 a null claim stays
    open before 6 of 12 seeds and may stop from then on; the operating characteristics follow."""
    null = np.array([0.3, -0.3, 0.1, -0.1, 0.2, -0.2, 0.0, 0.05] + [0.0] * 4)
    (early,) = evaluate_claims(sequential_run(null, Schedule(FIRST, 12)))
    late = Schedule(FIRST, 12, futility_from=0.5)
    (waited,) = evaluate_claims(sequential_run(null, late))
    assert early.status == FUTILE and early.n < 6
    assert waited.status == FUTILE and waited.n == 6 and "from 6 seeds" in late.futility_phrase()
    assert [n for n in late.looks if late.may_stop_futile(n)] == [6, 7, 8, 9, 10, 11]
    assert stored_schedule(SEQUENTIAL.read(late.describe(), "sequential"), 3) == late
    assert "futility_from" not in Schedule(FIRST, 12).describe()  # designs locked before it existed stay equal
    for bad in (1.0, -0.1, "half", True):
        with pytest.raises(ValueError, match="futility_from"):
            Schedule(FIRST, 12, futility_from=bad)
    # fewer stops for futility means more seeds used under the null
    assert operating_characteristics(late, 0.0, ALPHA, paths=4000).expected_seeds > \
        operating_characteristics(Schedule(FIRST, 12), 0.0, ALPHA, paths=4000).expected_seeds


# -- planning ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("effect_in_sd", [0.6, 1.0, 2.0])
def test_fixed_seeds_for_power_is_the_fewest_that_reach_it_by_simulation(effect_in_sd):
    n = fixed_seeds_for_power(effect_in_sd, ALPHA, 0.8)
    rng = np.random.default_rng(int(effect_in_sd * 10))

    def simulated_power(seeds: int) -> float:
        sample = rng.normal(effect_in_sd, 1.0, size=(20_000, seeds))
        t = sample.mean(1) / (sample.std(1, ddof=1) / math.sqrt(seeds))
        return float(np.mean(scipy.stats.t.sf(t, seeds - 1) <= ALPHA))

    assert simulated_power(n) > 0.8 - 0.015
    if n > 2:
        assert simulated_power(n - 1) < 0.8 + 0.015


def test_plan_reads_each_claims_effect_from_a_pilot_run(tmp_path):
    from harness import api
    from harness.store import RunFolder
    differences = np.array([1.0, 1.5, 0.5, 1.2, 0.8])
    results = sequential_run(differences, Schedule(5, 5))
    folder = RunFolder(tmp_path / "pilot", "seq", "default")
    folder.save_suite({**as_stored(results.stored), "sequential": None})
    for trial in results.finished:
        folder.save_trial(dataclasses.replace(trial, trial=dataclasses.replace(trial.trial, suite="seq", profile="default")))
    suite = tmp_path / "seq.yaml"
    suite.write_text("suite: seq\ntask: calibration_task:CalibrationTask\nseeds: [0, 1, 2]\n"
                     "sequential: {max_seeds: 8}\narms:\n  control: {tag: a}\n  treat: {tag: b}\n"
                     "contrasts:\n  - {treatment: treat, control: control}\n"
                     "claims:\n  - {contrast: treat-vs-control, metric: score, test: superior}\n")
    (plan,) = api.plan_seeds(suite, pilot=tmp_path / "pilot")
    (row,) = plan.rows
    t = differences.mean() / (differences.std(ddof=1) / math.sqrt(5))
    assert row.effect_in_sd == pytest.approx(t / math.sqrt(5), rel=1e-6)
    assert row.fixed_seeds == fixed_seeds_for_power(row.effect_in_sd, ALPHA, 0.8)
    assert plan.design.looks == (3, 4, 5, 6, 7, 8) and 3 <= row.sequential.expected_seeds <= 8
    with pytest.raises(api.UsageError, match="--from"):
        api.plan_seeds(suite, pilot=tmp_path / "missing")


def test_a_vacuous_claim_whose_reference_becomes_established_is_decided_normally():
    """Non-inferiority of treat to control needs control-vs-weak established; its first seeds do not show it."""
    design = Schedule(FIRST, 10, futility=None)
    reference = [3.0, -2.5, 2.0, 2.6, 2.4, 2.5, 2.7, 2.3, 2.6, 2.4]  # control - weak: noisy first, then clear
    closeness = [0.01, -0.02, 0.0, 0.01, -0.01, 0.02, 0.0, -0.01, 0.01, 0.0]  # treat - control: ~0
    meta = {
        "suite": "seq", "profile": "default", "seeds": list(range(10)), "sequential": design.describe(),
        "arms": {a: {"labels": [a]} for a in ("control", "treat", "weak")},
        "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"},
                      {"treatment": "control", "control": "weak", "name": "control-vs-weak"}],
        "claims": [{"contrast": "treat-vs-control", "metric": "score", "test": "non_inferior", "margin": 0.5,
                    "reference": "control-vs-weak"}],
        "metrics": {"score": {"direction": "higher", "unit": "", "kind": "quality", "key": True}},
    }
    trials = []
    for seed in range(10):
        control = 10.0 + seed
        for arm, value in (("control", control), ("treat", control + closeness[seed]),
                           ("weak", control - reference[seed])):
            trials.append(make_record(f"{arm}-{seed}", arm, seed, metrics={"score": value}))
    results = index_results(Path("."), StoredSuite.from_stored(meta), trials)
    (at_first_look,) = evaluate_claims(results.first_seeds(FIRST))
    assert at_first_look.status == "vacuous"
    (claim,) = evaluate_claims(results)
    assert claim.status == PASS and claim.reference.established and claim.n > FIRST


def test_design_errors_name_the_setting_and_its_allowed_range():
    cases = [(dict(first=5, max_seeds=4), "first look 5 must lie in [1, max_seeds=4]"),
             (dict(first=0, max_seeds=4), "first look 0 must lie in [1, max_seeds=4]"),
             (dict(first=3, max_seeds=6, batch=0), "batch must be at least 1, got 0"),
             (dict(first=3, max_seeds=6, spending="haybittle"),
              "spending 'haybittle' is not one of obrien_fleming, pocock"),
             (dict(first=3, max_seeds=6, futility_from=1.0), "futility_from 1.0 is not a fraction in [0, 1)"),
             (dict(first=3, max_seeds=6, futility_from=2), "futility_from 2 is not a fraction in [0, 1)"),
             (dict(first=3, max_seeds=6, skew_bound=0.0), "skew_bound 0.0 is not a skewness in (0, ")]
    for bad, message in cases:
        with pytest.raises(ValueError) as refused:
            Schedule(**bad)
        assert str(refused.value).startswith(message), (bad, str(refused.value))


def test_design_accepts_every_setting_at_the_edges_of_its_range():
    assert Schedule(1, 4).looks == (1, 2, 3, 4)  # a first look at one seed
    assert Schedule(4, 4).looks == (4,) and not Schedule(4, 4).sequential  # the fixed design
    assert Schedule(2, 5, batch=1).looks == (2, 3, 4, 5)
    assert Schedule(2, 6, batch=2).looks == (2, 4, 6)
    assert Schedule(3, 6, spending="pocock").spending == "pocock"
    assert Schedule(3, 6, futility_from=0).may_stop_futile(3)
    assert Schedule(3, 6, futility_from=0.5).may_stop_futile(3) and not Schedule(3, 6, futility_from=0.51).may_stop_futile(3)
    assert Schedule(3, 6, skew_bound=1.0).skew_bound == 1.0 and Schedule(3, 6, skew_bound=None).skew_bound is None


def test_a_designs_levels_follow_its_own_spending_at_the_asked_alpha():
    looks = (3, 4, 5, 6, 7, 8)
    for spending in ("obrien_fleming", "pocock"):
        design = Schedule(3, 8, spending=spending)
        assert design.levels(looks, ALPHA) == nominal_levels(looks, ALPHA, spending)
        assert design.levels(looks, ALPHA / 2) == nominal_levels(looks, ALPHA / 2, spending)
        assert design.levels(looks, ALPHA)[-1] < design.levels(looks, 2 * ALPHA)[-1]
    assert Schedule(3, 8).levels(looks, ALPHA) != Schedule(3, 8, spending="pocock").levels(looks, ALPHA)
    assert Schedule(3, 8).levels((3, 8), ALPHA) == nominal_levels((3, 8), ALPHA)


def test_a_design_with_a_skewness_bound_reads_its_calibrated_levels():
    design = Schedule(3, 4, skew_bound=1.0)
    calibrated = design.levels(design.looks, ALPHA)
    assert calibrated == nominal_levels(design.looks, ALPHA, skew_bound=1.0)
    assert calibrated != nominal_levels(design.looks, ALPHA)  # the normal-theory levels it replaces
