"""`harness compare` of runs whose seeds overlap pairs the seeds both have (the paired interval, not
Welch's) and names the seeds it left out."""
from __future__ import annotations

import json

import pytest

from test_compare import invoke, make_run

from harness.analysis.stats.paired_stats import paired_difference


def test_overlapping_seeds_are_paired_on_the_common_ones_and_the_rest_named(tmp_path):
    a = make_run(tmp_path / "a", range(10, 14), treat_gain=0.05)  # seeds 10-13
    b = make_run(tmp_path / "b", range(10, 13), treat_gain=0.02)  # seeds 10-12
    result = invoke("compare", a, b)
    assert result.exit_code in (0, 1), result.output
    assert "paired by seed on the 3 seeds both runs have" in result.stdout
    assert "left out, seeds of A only: 13" in result.stdout
    summary = json.loads((b / "compare" / "compare-synth.json").read_text())
    assert summary["method"] == "paired" and summary["left_out_seeds"] == {"A": [13]}
    shifts = {(s["arm"], s["metric"]): s for s in summary["shifts"]}
    treat = shifts[("treat", "acc")]
    wobble = {s: 0.002 * (s % 3) for s in range(10, 13)}
    expected = paired_difference({s: 0.80 + 0.01 * s + 0.02 + wobble[s] for s in range(10, 13)},
                                 {s: 0.80 + 0.01 * s + 0.05 + wobble[s] for s in range(10, 13)})
    assert treat["n"] == 3 and treat["a_n"] == 3 and treat["shift"] == pytest.approx(-0.03)
    assert (treat["ci_low"], treat["ci_high"]) == pytest.approx((expected.interval.low, expected.interval.high))
    assert shifts[("control", "acc")]["shift"] == pytest.approx(0.0)  # seed 13's value left out of A's mean


def test_one_common_seed_is_not_enough_to_pair(tmp_path):
    a = make_run(tmp_path / "a", range(0, 3), treat_gain=0.05)
    b = make_run(tmp_path / "b", range(2, 5), treat_gain=0.05)
    result = invoke("compare", a, b)
    assert "fewer than two seeds in common: unpaired Welch" in result.stdout
    assert json.loads((b / "compare" / "compare-synth.json").read_text())["left_out_seeds"] == {}
