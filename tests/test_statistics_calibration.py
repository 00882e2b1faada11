"""The statistics against known truth: special functions against tables and simulation, A/A runs
whose false BETTER/WORSE rate must sit at the nominal level, and planted effects found with the
power the method predicts. Rates are asserted with exact binomial tolerances (99.9% two-sided), so
a correct method fails about once in a thousand runs and a wrong one (the old bootstrap rule:
26% false verdicts at 3 seeds) fails every time.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from fault_injection import harness_here
from records import make_record

from harness.analysis.decide.run_decisions import analyse
from harness.analysis.decide.verdicts import BETTER, WORSE
from harness.analysis.run_results import index_results
from harness.suite.stored import StoredSuite
from harness.analysis.stats.paired_stats import (
    benjamini_hochberg,
    critical_t,
    detectable_effect,
    holm_adjust,
    mean_estimate,
    minimum_detectable_effect,
    sign_flip_p_value,
    smallest_sign_flip_p,
    t_sf,
    t_power,
)

ALPHA = 0.05
TESTS = Path(__file__).resolve().parent


def binomial_bounds(trials: int, p: float, coverage: float = 0.999) -> tuple[int, int]:
    """The central interval holding ``coverage`` of Binomial(trials, p)."""
    low, high = scipy.stats.binom.interval(coverage, trials, p)
    return int(low), int(high)


# --- special functions -------------------------------------------------------------------------

@pytest.mark.parametrize(("df", "table"), [(1, 12.706204736174705), (2, 4.302652729911275), (4, 2.7764451051977987),
                                           (9, 2.2621571627409915), (30, 2.0422724563012373)])
def test_the_critical_t_matches_published_tables(df, table):
    assert critical_t(0.025, df + 1) == pytest.approx(table, rel=1e-8)
    assert t_sf(table, df) == pytest.approx(0.025, abs=1e-10)


@pytest.mark.parametrize(("n", "shift"), [(2, 4.0), (3, 2.5), (5, 3.0), (10, 2.0)])
def test_noncentral_t_power_matches_simulation(n, shift):
    rng = np.random.default_rng(n)
    draws = 40_000
    sample = rng.normal(shift / math.sqrt(n), 1.0, size=(draws, n))
    statistic = sample.mean(1) / (sample.std(1, ddof=1) / math.sqrt(n))
    critical = critical_t(0.025, n)
    predicted = t_power(shift / math.sqrt(n), n, 0.025)
    low, high = binomial_bounds(draws, predicted)
    assert low <= int(np.sum(statistic > critical)) <= high


def test_minimum_detectable_effect_has_the_stated_power():
    mde = minimum_detectable_effect(sd=2.0, n=6, alpha=ALPHA)
    assert t_power(mde / 2.0, 6, ALPHA) == pytest.approx(0.8, abs=1e-6)
    assert minimum_detectable_effect(sd=0.0, n=6, alpha=ALPHA) == 0.0
    assert minimum_detectable_effect(sd=1.0, n=1, alpha=ALPHA) is None
    # more seeds, or a wider level, detect smaller effects
    assert minimum_detectable_effect(1.0, 10, ALPHA) < minimum_detectable_effect(1.0, 5, ALPHA)
    assert minimum_detectable_effect(1.0, 5, 2 * ALPHA) < minimum_detectable_effect(1.0, 5, ALPHA)


def test_the_detectable_effect_is_the_designs_so_the_mde_scales_with_the_spread_and_is_found_once():
    """A sequential run re-analyses its earlier looks at every new one: the design's part of the MDE (its
    effect in sd) is found once per (n, level), and each spread scales it exactly."""
    level = 0.0031  # a level no other test asks for
    first = minimum_detectable_effect(1.0, 7, level)
    hits = detectable_effect.cache_info().hits
    assert minimum_detectable_effect(3.0, 7, level) == pytest.approx(3.0 * first, rel=1e-14)
    assert detectable_effect.cache_info().hits == hits + 1
    assert t_power(first, 7, level) == pytest.approx(0.8, abs=1e-9)


def test_sign_flip_p_is_exact_and_bounded_below_by_two_over_two_to_the_n():
    assert sign_flip_p_value([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == pytest.approx(2 / 64)
    assert sign_flip_p_value([1.0, 2.0, 3.0]) == pytest.approx(2 / 8) == smallest_sign_flip_p(3)
    assert smallest_sign_flip_p(5) > ALPHA > smallest_sign_flip_p(6)
    # [3, -1, 2]: patterns with |sum| >= 4 are (+,+,+), (+,-,+), and their negatives: 4 of 8
    assert sign_flip_p_value([3.0, -1.0, 2.0]) == pytest.approx(4 / 8)


def test_holm_and_benjamini_hochberg_on_a_worked_example():
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm_adjust(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])


@pytest.mark.integration  # calibration by simulation
def test_interval_coverage_is_nominal_at_three_seeds():
    rng = np.random.default_rng(11)
    covered = sum(
        (est := mean_estimate(rng.normal(0.3, 1.0, 3))).interval.low <= 0.3 <= est.interval.high for _ in range(4000)
    )
    low, high = binomial_bounds(4000, 0.95)
    assert low <= covered <= high


# --- A/A and planted effects through the analysis -----------------------------------------------

def synthetic_run(seeds: int, replicates: int, effect: float, rng: np.random.Generator):
    """Run results of a two-arm suite whose treatment is control + effect + fresh noise, per replicate."""
    meta = {
        "suite": "calibration", "profile": "default", "seeds": list(range(seeds)),
        "sweep": {"replicate": list(range(replicates))},
        "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
        "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"}],
        "metrics": {"score": {"direction": "higher", "unit": "", "kind": "quality", "key": True}},
    }
    trials = []
    for replicate in range(replicates):
        for seed in range(seeds):
            shared = rng.normal(0.0, 3.0)
            for arm, shift in (("control", 0.0), ("treat", effect)):
                trials.append(make_record(f"{arm}-{seed}-{replicate}", arm, seed, point={"replicate": replicate},
                                          metrics={"score": shared + shift + rng.normal()}))
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


@pytest.mark.integration  # calibration by simulation
@pytest.mark.parametrize("seeds", [3, 5, 10])
def test_aa_false_better_worse_rate_is_nominal(seeds):
    rows = analyse(synthetic_run(seeds, 1500, 0.0, np.random.default_rng(seeds))).rows
    false = sum(row.verdict in (BETTER, WORSE) for row in rows)
    low, high = binomial_bounds(len(rows), ALPHA)
    assert len(rows) == 1500 and low <= false <= high


@pytest.mark.integration  # calibration by simulation
@pytest.mark.parametrize(("seeds", "effect"), [(3, 2.5), (5, 1.2), (10, 0.8)])
def test_planted_effect_is_found_with_the_predicted_power(seeds, effect):
    rows = analyse(synthetic_run(seeds, 1000, effect, np.random.default_rng(100 + seeds))).rows
    found = sum(row.verdict == BETTER for row in rows)
    sd_of_difference = math.sqrt(2.0)  # two independent N(0, 1) draws; the shared offset cancels
    shift = effect * math.sqrt(seeds) / sd_of_difference
    predicted = t_power(shift / math.sqrt(seeds), seeds, ALPHA / 2)
    assert 0.3 < predicted < 0.9  # a planted effect the testbed is sized to find only sometimes
    low, high = binomial_bounds(len(rows), predicted)
    assert low <= found <= high


# --- the same through `harness run` --------------------------------------------------------------

AA_SUITE = """\
suite: aa
description: A/A calibration, 40 independent replicates
task: calibration_task:CalibrationTask
seeds: [0, 1, 2]
sweep: {replicate: [%s]}
arms:
  a: {tag: a}
  b: {tag: b}
contrasts:
  - {treatment: b, control: a}
"""


@pytest.mark.integration  # calibration by simulation
def test_aa_suite_run_end_to_end_reports_nominal_false_rate(tmp_path):
    suite = tmp_path / "aa.yaml"
    suite.write_text(AA_SUITE % ", ".join(str(i) for i in range(40)))
    done = harness_here("run", str(suite), "--no-mlflow", "--results", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "r" / "aa" / "default" / "report" / "summary.json").read_text())
    rows = [row for row in summary["contrasts"] if row["metric"] == "score"]
    assert len(rows) == 40 and all(row["n"] == 3 and row["method"] == "paired Student-t" for row in rows)
    false = sum(row["verdict"] in ("better", "worse") for row in rows)
    assert false <= binomial_bounds(40, ALPHA)[1]  # the old bootstrap rule gave ~11 of 40
    assert summary["statistics"]["confidence"] == 0.95 and "exploratory contrasts" in done.stdout
