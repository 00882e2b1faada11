"""A suite may name the same treatment/control pair twice (one claim per contrast and metric, so a second
test of the pair, e.g. non-inferiority beside superiority, gets a contrast of its own name): each claim is
read once, under the name it gives, and the baseline gates the pair's values once. And the verdict a contrast
row gets: where its paired interval lies against 0 in the metric's direction, or inside the declared margin."""
from __future__ import annotations

import json
from pathlib import Path

from test_gating_baseline import invoke, make_run, shift

from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.verdicts import (
    BETTER, EQUIVALENT, INCONCLUSIVE, INFO, INSUFFICIENT, WORSE, evaluate_contrasts, verdict,
)
from harness.analysis.run_results import load_results
from harness.analysis.stats.paired_stats import paired_difference

CLAIMS = [{"contrast": "treat-vs-control", "metric": "acc", "test": "superior"},
          {"contrast": "treat-again-control", "metric": "acc", "test": "superior", "margin": 0.01}]


def named_twice(root: Path) -> Path:
    run = make_run(root, claims=CLAIMS)
    suite_file = run / "suite.json"
    stored = json.loads(suite_file.read_text())
    stored["contrasts"].append({"name": "treat-again-control", "treatment": "treat", "control": "control",
                                "margins": {}})
    suite_file.write_text(json.dumps(stored))
    return run


def test_each_claim_on_a_pair_named_twice_is_read_once_under_its_own_name(tmp_path: Path):
    results = load_results(named_twice(tmp_path / "run"))
    read = sorted((claim.contrast, claim.key) for claim in evaluate_claims(results))
    assert read == [("treat-again-control", "acc"), ("treat-vs-control", "acc")]


def test_a_pair_named_twice_is_gated_once_and_passes_against_itself(tmp_path: Path):
    saved = invoke("baseline", "save", named_twice(tmp_path / "reference"), "--out", tmp_path / "baselines")
    assert saved.exit_code == 0, saved.output
    values = json.loads((tmp_path / "baselines" / "synth-smoke-cpu.json").read_text())["values"]
    contrasts = [(v["subject"], v["metric"]) for v in values if v["check"] == "contrast"]
    assert len(contrasts) == len(set(contrasts)) and ("treat-vs-control", "acc") in contrasts
    claims = sorted(v["subject"] for v in values if v["check"] == "claim")
    assert claims == ["treat-again-control", "treat-vs-control"]
    gated = invoke("gate", named_twice(tmp_path / "current"), "--baselines-dir", tmp_path / "baselines")
    assert gated.exit_code == 0, gated.output


# -- the verdict of a contrast row --------------------------------------------------------------------

SEEDS5 = range(5)
WOBBLE = (0.004, -0.003, 0.002, -0.001, 0.000)  # the treatment's seed-to-seed noise around its gain


def gained(gain: float):
    """The paired difference of a treatment that adds ``gain`` (plus a little noise) to the control, seed by seed."""
    control = {s: 0.80 + 0.01 * s for s in SEEDS5}
    return paired_difference({s: control[s] + gain + WOBBLE[s] for s in SEEDS5}, control)


def test_contrast_rows_of_a_run_read_each_metric_in_its_own_direction(tmp_path: Path):
    """acc (higher) and err (lower) both improve: better; bytes unchanged: equivalent at no margin; a
    metric without a direction: info; a key only one arm reported gets no row."""
    def edit(values):
        values["treat"].pop("latency")
        values["control"].pop("qps")

    run = load_results(make_run(tmp_path / "run", edit, seeds=tuple(SEEDS5)))
    rows = {row.key: row.verdict for row in evaluate_contrasts(run)}
    assert rows == {"acc": BETTER, "err": BETTER, "bytes": EQUIVALENT, "note": INFO}


def test_contrast_rows_of_a_run_whose_treatment_got_worse_say_worse(tmp_path: Path):
    def edit(values):
        shift("treat", "acc", -0.10)(values)
        shift("treat", "err", +0.10)(values)

    run = load_results(make_run(tmp_path / "run", edit, seeds=tuple(SEEDS5)))
    rows = {row.key: row.verdict for row in evaluate_contrasts(run)}
    assert rows["acc"] == WORSE and rows["err"] == WORSE


def test_an_interval_entirely_on_one_side_of_zero_is_better_or_worse_by_the_metrics_direction():
    up, down = gained(0.01), gained(-0.01)
    assert up.interval.low > 0 and down.interval.high < 0
    assert verdict(up, "higher") == BETTER and verdict(down, "higher") == WORSE
    assert verdict(down, "lower") == BETTER and verdict(up, "lower") == WORSE
    assert verdict(up, "none") == INFO
    assert verdict(paired_difference({0: 0.9}, {0: 0.8}), "higher") == INSUFFICIENT


def test_an_interval_across_zero_is_equivalent_inside_the_margin_and_inconclusive_past_it():
    flat = gained(0.0)
    assert -0.003 < flat.interval.low < 0 < 0.003 < flat.interval.high < 0.004
    for direction in ("higher", "lower"):
        assert verdict(flat, direction, 0.01) == EQUIVALENT
        assert verdict(flat, direction, 0.003) == INCONCLUSIVE  # inside on the low side only
        assert verdict(flat, direction, 0.002) == INCONCLUSIVE
        assert verdict(flat, direction) == INCONCLUSIVE  # no margin declared: nothing is equivalent


def test_an_interval_reaching_exactly_to_the_margin_is_equivalent():
    """The margin's bounds belong to it: an interval ending at exactly -margin or +margin is equivalent,
    and so is an unchanged metric (an interval of exactly 0) at no margin."""
    leaning_down, leaning_up = gained(-0.001), gained(0.001)
    assert leaning_down.interval.high < -leaning_down.interval.low
    assert verdict(leaning_down, "higher", -leaning_down.interval.low) == EQUIVALENT
    assert -leaning_up.interval.low < leaning_up.interval.high
    assert verdict(leaning_up, "lower", leaning_up.interval.high) == EQUIVALENT
    unchanged = paired_difference({s: 4096.0 for s in SEEDS5}, {s: 4096.0 for s in SEEDS5})
    assert verdict(unchanged, "lower", 0.0) == EQUIVALENT and verdict(unchanged, "higher", 0.0) == EQUIVALENT
