"""Premises and validity are read at the look's spent level, and a positive control that cannot fail
is named.

A sequential design reads its premises and its validity again at every look. Read at the unadjusted
claim level, a premise exactly at its bound 'holds' at some look of 3-24 in about one run in nine;
read at each look's nominal level under the design's alpha spending, no more often than the claim
level (the A/A simulation below, on the code the harness reads premises with).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from records import make_record

from harness.analysis.decide.claims import last_look_premises
from harness.analysis.decide.looks import claim_alpha, looks_taken, run_design, spent_level, stored_schedule
from harness.analysis.decide.premises import HOLDS, OPEN, bound_status
from harness.analysis.decide.verdicts import UNDETERMINED, VALID, evaluate_validity
from harness.analysis.present.run_summary import validity_text
from harness.analysis.present.summary_json import summary_document
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.run_results import RunResults, index_results
from harness.analysis.stats.paired_stats import mean_estimate
from harness.analysis.stats.sequential_design import Schedule, nominal_levels
from harness.suite.stored import StoredSuite

ALPHA = 0.025
METRICS = {"acc": {"direction": "higher", "unit": "fraction", "kind": "quality"},
           "score": {"direction": "higher", "unit": "", "kind": "quality"}}


def run_of(arms: dict[str, dict[str, list[float]]], sequential: dict | None = None, premises: list | None = None,
           validity: dict | None = None, confidence: float | None = None) -> RunResults:
    seeds = list(range(len(next(iter(next(iter(arms.values())).values())))))
    trials = [make_record(f"{arm}-{s}", arm, s, metrics={k: v[s] for k, v in values.items()})
              for arm, values in arms.items() for s in seeds]
    meta = {"suite": "spent", "profile": "default", "seeds": seeds, "sweep": {}, "metrics": METRICS,
            "arms": {arm: {"labels": [arm]} for arm in arms},
            "contrasts": [{"treatment": arm, "control": "control", "name": f"{arm}-vs-control"}
                          for arm in arms if arm != "control"],
            "claims": [{"contrast": f"{next(a for a in arms if a != 'control')}-vs-control", "metric": "score",
                        "test": "superior"}],
            "sequential": sequential, "premises": premises or [], "validity": validity}
    if confidence is not None:
        meta["confidence"] = confidence
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


# A premise whose 6 values clear 1.0 at the claim level (t = 3.4 > 2.57), but not at the spent level of
# look 4 of 3..12 under O'Brien-Fleming spending (a nominal level far below 0.025).
SCORES = [1.9, 2.6, 1.5, 2.4, 2.1, 1.3]
PREMISE = [{"name": "regime", "arm": "treat", "metric": "score", "at_least": 1.0}]


def test_a_fixed_design_reads_premises_at_the_claim_level():
    results = run_of({"control": {"score": [0.0] * 6}, "treat": {"score": SCORES}}, premises=PREMISE)
    assert spent_level(results) == pytest.approx(ALPHA)
    (premise,) = last_look_premises(results)
    assert premise.status == HOLDS


def test_a_sequential_look_reads_premises_at_its_spent_level():
    results = run_of({"control": {"score": [0.0] * 6}, "treat": {"score": SCORES}},
                     sequential={"first": 3, "max_seeds": 12}, premises=PREMISE)
    level = spent_level(results)
    assert level == pytest.approx(nominal_levels(tuple(range(3, 13)), ALPHA)[3]) and level < ALPHA / 5
    (premise,) = last_look_premises(results)
    assert premise.status == OPEN  # held at 0.025, still open at the look's own level
    assert premise.low < 1.0


def test_a_claims_one_sided_level_is_the_two_sided_intervals_tail():
    assert claim_alpha(0.95) == pytest.approx(0.025) and claim_alpha(0.9) == pytest.approx(0.05)
    assert claim_alpha(0.99) == pytest.approx(0.005)


def _scores(seeds: int, sequential: dict | None = None, confidence: float | None = None) -> RunResults:
    return run_of({"control": {"score": [0.0] * seeds}, "treat": {"score": (SCORES * 2)[:seeds]}},
                  sequential=sequential, confidence=confidence)


def test_a_run_without_a_sequential_design_is_fixed_at_its_seeds():
    results = _scores(6)
    assert run_design(results) == Schedule(6, 6) and looks_taken(results, run_design(results)) == (6,)
    assert stored_schedule(None, 5) == Schedule(5, 5)
    assert stored_schedule(None, 1) == Schedule(1, 1) and stored_schedule(None, 0) == Schedule(1, 1)


def test_a_sequential_run_takes_the_looks_its_seeds_reach():
    sequential = {"first": 3, "max_seeds": 12, "batch": 2}
    results = _scores(6, sequential)
    design = run_design(results)
    assert (design.first, design.max_seeds, design.batch, design.looks) == (3, 12, 2, (3, 5, 7, 9, 11, 12))
    assert looks_taken(results, design) == (3, 5)  # the look at 7 seeds is not reached
    reached = _scores(7, sequential)
    assert looks_taken(reached, run_design(reached)) == (3, 5, 7)  # a look exactly at the seeds it has
    early = _scores(2, sequential)
    assert looks_taken(early, run_design(early)) == (2,)  # before the first look: what it has


def test_the_spent_level_is_the_latest_looks_nominal_level_at_the_runs_confidence():
    sequential = {"first": 3, "max_seeds": 12}
    looks = tuple(range(3, 13))
    assert spent_level(_scores(5, sequential)) == pytest.approx(nominal_levels(looks, ALPHA)[2], rel=1e-12)
    assert spent_level(_scores(3, sequential)) == pytest.approx(nominal_levels(looks, ALPHA)[0], rel=1e-12)
    assert spent_level(_scores(5, sequential, confidence=0.9)) == pytest.approx(nominal_levels(looks, 0.05)[2],
                                                                              rel=1e-12)
    assert spent_level(_scores(5, confidence=0.9)) == pytest.approx(0.05)  # a fixed design: the claim level
    last = spent_level(_scores(12, sequential))
    assert last == pytest.approx(nominal_levels(looks, ALPHA)[-1], rel=1e-12) and last < ALPHA


def test_a_sequential_look_reads_validity_at_its_spent_level():
    control = [0.5 + 0.01 * s for s in range(6)]
    positive = [c + d for c, d in zip(control, (0.03, 0.05, 0.01, 0.04, 0.02, 0.035))]
    arms = {"control": {"score": control, "acc": control}, "treat": {"score": control, "acc": control},
            "positive": {"score": positive, "acc": positive}}
    validity = {"control": "control", "positive": "positive", "metric": "score"}
    assert evaluate_validity(run_of(arms, validity=validity)).status == VALID
    spent = evaluate_validity(run_of(arms, sequential={"first": 3, "max_seeds": 12}, validity=validity))
    assert spent.status == UNDETERMINED  # the same interval, read at look 4's level, reaches 0


def test_a_positive_control_at_the_metric_ceiling_on_every_seed_is_named_as_unable_to_fail():
    control = [0.40, 0.45, 0.42, 0.50]
    oracle = {"acc": [1.0] * 4, "score": [1.0] * 4}
    arms = {"control": {"acc": control, "score": control}, "treat": {"acc": control, "score": control},
            "oracle": oracle}
    results = run_of(arms, validity={"control": "control", "positive": "oracle", "metric": "acc"})
    validity = evaluate_validity(results)
    assert validity.status == VALID and [c.arm_label for c in validity.cannot_fail] == ["oracle"]
    assert validity_text(validity) == "OK (but positive control oracle cannot fail)"
    document = summary_document(analyse(results), ())
    assert document["validity"]["cannot_fail"] == ["oracle"]
    # the same arm on an unbounded metric, or one seed below the ceiling, can fail: not flagged
    assert not evaluate_validity(run_of(arms, validity={"control": "control", "positive": "oracle",
                                                        "metric": "score"})).cannot_fail
    arms["oracle"] = {"acc": [1.0, 1.0, 0.98, 1.0], "score": [1.0] * 4}
    assert not evaluate_validity(run_of(arms, validity={"control": "control", "positive": "oracle",
                                                        "metric": "acc"})).cannot_fail


def _false_hold_rate(first: int, last: int, spent: bool, paths: int, seed: int) -> float:
    """Share of A/A runs (true mean exactly at the premise's bound) in which the premise holds at some
    look first..last (batch 1), read as the harness reads it at each look."""
    looks = tuple(range(first, last + 1))
    levels = nominal_levels(looks, ALPHA) if spent else (ALPHA,) * len(looks)
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(paths):
        values = rng.standard_normal(last)
        held += any(bound_status(mean_estimate(values[:n]), 0.0, None, level)[0] == HOLDS
                    for n, level in zip(looks, levels))
    return held / paths


@pytest.mark.slow
@pytest.mark.parametrize("last", [16, 24])
def test_a_premise_at_its_bound_holds_no_more_often_than_the_claim_level_over_every_look(last):
    paths = 4000
    spent = _false_hold_rate(3, last, spent=True, paths=paths, seed=last)
    naive = _false_hold_rate(3, last, spent=False, paths=paths, seed=last)
    ceiling = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / paths)  # binomial bound at the nominal level
    assert spent <= ceiling, spent
    assert naive > ceiling, naive  # the unadjusted reading, on the same draws, does not hold its level


def test_a_fixed_design_with_a_skewness_bound_reads_the_level_calibrated_to_the_seeds_it_has():
    """A design whose first look is its last (first == max_seeds) is fixed; read at 4 of its 6 seeds, its
    level is the one calibrated to 4 seeds, not to the 6 it would have had."""
    results = _scores(4, {"first": 6, "max_seeds": 6, "skew_bound": 1.0})
    assert not run_design(results).sequential
    assert spent_level(results) == nominal_levels((4,), ALPHA, skew_bound=1.0)[0]
    assert spent_level(results) != nominal_levels((6,), ALPHA, skew_bound=1.0)[0]
