"""`harness compare`: the shift of every metric with its interval over seeds (paired by seed when
both runs share their seeds, Welch otherwise), changed claims first with exit 1, one plot, and
one-line usage errors that write nothing. Real toy runs for different seeds and profiles;
synthetic folders where exact numbers are asserted."""
from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pytest
import scipy.stats
from click.testing import CliRunner
from records import make_record

from harness import api
from harness.analysis.stats.paired_stats import paired_difference, welch_difference
from harness.cli import main
from harness.store import RunFolder

METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
    "qps": {"direction": "higher", "unit": "queries/s", "kind": "speed"},
}
CLAIMS = [{"contrast": "treat-vs-control", "metric": "acc", "test": "superior"}]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(autouse=True)
def keep_sigterm():
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def make_run(root: Path, seeds, treat_gain: float, suite: str = "synth") -> Path:
    """control acc 0.80 + 0.01 * seed; treat = control + treat_gain + a small seed-dependent wobble."""
    folder = RunFolder(root, suite, "default")
    folder.save_suite({
        "schema": 1, "suite": suite, "profile": "default", "task": "synth", "task_version": "1", "seeds": list(seeds),
        "sweep": {}, "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
        "contrasts": [{"name": "treat-vs-control", "treatment": "treat", "control": "control", "margins": {}}],
        "validity": None, "claims": CLAIMS, "metrics": METRICS, "device_class": "cpu",
    })
    for seed in seeds:
        control = 0.80 + 0.01 * seed
        for arm, acc in (("control", control), ("treat", control + treat_gain + 0.002 * (seed % 3))):
            folder.save_trial(make_record(f"{arm}-{seed}", arm, seed, suite=suite, environment={"git_commit": "a" * 40},
                                          metrics={"acc": acc, "qps": 1000.0 + seed}))
    return folder.path


def test_welch_interval_matches_the_textbook_formula():
    equal = welch_difference([2, 3, 4, 5], [1, 2, 3, 4])
    assert equal.df == pytest.approx(6.0) and equal.mean_difference == 1.0
    half = 2.446912 * math.sqrt(5 / 3 / 4 * 2)  # t(0.975, 6) from tables; both variances 5/3
    assert (equal.interval.low, equal.interval.high) == pytest.approx((1 - half, 1 + half), abs=1e-5)
    unequal = welch_difference([1.0, 1.1, 0.9], [0.0, 2.0, 4.0, 1.0, 3.0])
    assert unequal.df == pytest.approx(4.05315, abs=1e-4)  # (0.01/3 + 2.5/5)^2 / ((0.01/3)^2/2 + (2.5/5)^2/4)
    assert welch_difference([1.0], [2.0, 3.0]).interval is None
    assert welch_difference([1.0, 1.0], [0.5, 0.5]).interval.low == 0.5


def test_same_seeds_are_paired_and_a_changed_claim_exits_1(tmp_path):
    a = make_run(tmp_path / "a", range(5), treat_gain=0.05)
    b = make_run(tmp_path / "b", range(5), treat_gain=-0.01)
    result = invoke("compare", a, b, "--out", tmp_path / "cmp")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    first_change = next(i for i, line in enumerate(lines) if line.startswith("PRIMARY CLAIM"))
    assert "PASS" in lines[first_change] and "FAIL" in lines[first_change]
    assert first_change < next(i for i, line in enumerate(lines) if line.startswith("shifts"))
    summary = json.loads((tmp_path / "cmp" / "compare-synth.json").read_text())
    assert summary["method"] == "paired" and summary["claim_changed"] is True
    shifts = {(s["arm"], s["metric"]): s for s in summary["shifts"]}
    treat = shifts[("treat", "acc")]
    expected = paired_difference({s: 0.80 + 0.01 * s - 0.01 + 0.002 * (s % 3) for s in range(5)},
                                 {s: 0.80 + 0.01 * s + 0.05 + 0.002 * (s % 3) for s in range(5)})
    assert treat["shift"] == pytest.approx(-0.06) and treat["n"] == 5 and treat["moved"] is True
    assert (treat["ci_low"], treat["ci_high"]) == pytest.approx((expected.interval.low, expected.interval.high))
    control = shifts[("control", "acc")]
    assert control["shift"] == 0 and control["moved"] is False  # the same values seed by seed
    assert (tmp_path / "cmp" / "compare-synth.png").stat().st_size > 10_000


def test_different_seeds_are_compared_unpaired(tmp_path):
    a = make_run(tmp_path / "a", range(4), treat_gain=0.05)
    b = make_run(tmp_path / "b", range(4, 8), treat_gain=0.05)
    result = invoke("compare", a, b)
    assert result.exit_code == 0, result.output
    assert "no verdict, validity status or primary claim changed" in result.stdout
    summary = json.loads((b / "compare" / "compare-synth.json").read_text())
    assert summary["method"] == "Welch"
    control = next(s for s in summary["shifts"] if s["arm"] == "control" and s["metric"] == "acc")
    expected = welch_difference([0.80 + 0.01 * s for s in range(4, 8)], [0.80 + 0.01 * s for s in range(4)])
    assert control["shift"] == pytest.approx(0.04)
    assert (control["ci_low"], control["ci_high"]) == pytest.approx((expected.interval.low, expected.interval.high))
    assert expected.interval.high - expected.interval.low == pytest.approx(
        2 * scipy.stats.t.ppf(0.975, expected.df) * math.sqrt(2 * 0.0001 * 5 / 3 / 4))


@pytest.mark.integration  # two suite runs
def test_two_toy_runs_with_different_seeds_and_profiles(tmp_path, toy_suite):
    runs = (("a", "smoke", [0, 1]), ("b", "smoke", [2, 3]), ("default", "default", [0]))
    for name, profile, seeds in runs:
        options = api.RunOptions(profile=profile, seeds=seeds, results=tmp_path / name, mlflow=False)
        assert api.run(toy_suite, options).exit_code in (0, 1)
    seeds = invoke("compare", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "seeds")
    summary = json.loads((tmp_path / "seeds" / "compare-toy.json").read_text())
    assert seeds.exit_code == (1 if summary["claim_changed"] else 0), seeds.output
    assert summary["method"] == "Welch"
    cells = {(s["arm"], s["point"], s["metric"]) for s in summary["shifts"]}
    assert {(arm, "features=4", metric) for arm in ("sgd", "momentum", "slow_lr") for metric in ("accuracy", "loss")} <= cells
    assert all(s["ci_low"] <= s["shift"] <= s["ci_high"] for s in summary["shifts"] if s["ci_low"] is not None)
    assert (tmp_path / "seeds" / "compare-toy.png").is_file()
    profiles = invoke("compare", tmp_path / "a", tmp_path / "default", "--out", tmp_path / "profiles")
    assert profiles.exit_code == 1, profiles.output  # the default profile adds features=8: claims smoke never made
    assert "PRIMARY CLAIM" in profiles.stdout and "absent" in profiles.stdout
    header = profiles.stdout.splitlines()[:2]
    assert "(smoke, seeds 0,1)" in header[0] and "(default, seeds 0)" in header[1]


@pytest.mark.parametrize("case", ["different suites", "missing", "different suite sets"])
def test_bad_comparisons_fail_in_one_line_and_write_nothing(tmp_path, case):
    a = make_run(tmp_path / "a", range(3), 0.05)
    if case == "different suites":
        b = make_run(tmp_path / "b", range(3), 0.05, suite="other")
    elif case == "missing":
        b = tmp_path / "nowhere"
    else:
        make_run(tmp_path / "b", range(3), 0.05)
        make_run(tmp_path / "b", range(3), 0.05, suite="other")
        a, b = tmp_path / "a", tmp_path / "b"
    before = sorted(tmp_path.rglob("*"))
    result = invoke("compare", a, b)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
    assert sorted(tmp_path.rglob("*")) == before


def test_a_side_whose_run_ended_early_is_named_and_exits_1(tmp_path):
    """The same numbers on both sides would compare clean; a run that stopped before every trial was stored
    is partial, as report and gate say, so compare says so too."""
    a = make_run(tmp_path / "a", range(5), treat_gain=0.05)
    b = make_run(tmp_path / "b", range(5), treat_gain=0.05)
    assert invoke("compare", a, b, "--out", tmp_path / "cmp").exit_code == 0
    RunFolder(tmp_path / "b", "synth", "default").mark_incomplete()
    result = invoke("compare", a, b, "--out", tmp_path / "cmp")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("error: B: INCOMPLETE RUN") for line in result.stderr.splitlines())
