"""A suite may name the same treatment/control pair twice (one claim per contrast and metric, so a second
test of the pair, e.g. non-inferiority beside superiority, gets a contrast of its own name): each claim is
read once, under the name it gives, and the baseline gates the pair's values once. And the verdict a contrast
row gets: where its paired interval lies against 0 in the metric's direction, or inside the declared margin."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from records import make_record
from test_gating_baseline import invoke, make_run, shift

from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.verdicts import (
    BETTER, EQUIVALENT, INCONCLUSIVE, INFO, INSUFFICIENT, WORSE, evaluate_contrasts, verdict,
)
from harness.analysis.run_results import index_results, load_results
from harness.analysis.stats.paired_stats import paired_difference
from harness.suite.stored import StoredSuite

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


# -- the rows of a run: names, order, margins, q-values ---------------------------------------------------

ROW_METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality"},
    "err": {"direction": "lower", "unit": "fraction", "kind": "quality"},
    "nmse": {"direction": "lower", "unit": "", "kind": "quality"},
    "note": {"direction": "none", "unit": "", "kind": "info"},
}
CONTROL5 = [0.80 + 0.01 * s for s in SEEDS5]


def plus(gain: float) -> list[float]:
    """The control's values plus ``gain`` and the treatment's seed-to-seed noise."""
    return [c + gain + w for c, w in zip(CONTROL5, WOBBLE)]


def rows_of(values: dict[str, dict[str, list]], *, seeds: tuple[int, ...] = tuple(SEEDS5), margins=None,
            confidence: float = 0.95):
    """The contrast rows of an in-memory run of the contrast treat-vs-control. ``values`` maps an arm label
    (``arm`` or ``arm@setting``, a swept arm) to its metrics, each a value per seed (None or past the end:
    not reported)."""
    trials, labels = [], {}
    for label, metrics in values.items():
        arm = label.split("@")[0]
        labels.setdefault(arm, []).append(label)
        for s in seeds:
            reported = {k: v[s] for k, v in metrics.items() if s < len(v) and v[s] is not None}
            if reported:
                trials.append(make_record(f"{label}-{s}", arm, s, arm_label=label, metrics=reported))
    meta = {"suite": "rows", "profile": "default", "seeds": list(seeds), "sweep": {}, "metrics": ROW_METRICS,
            "confidence": confidence, "arms": {arm: {"labels": names} for arm, names in labels.items()},
            "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control",
                           "margins": margins or {}}], "claims": []}
    return evaluate_contrasts(index_results(Path("."), StoredSuite.from_stored(meta), trials))


def test_a_contrast_row_keeps_the_declared_margin_its_verdict_reads():
    """acc and err unchanged (an interval within +-0.004): acc, with a margin of 0.01, is equivalent; err,
    with none declared, is inconclusive."""
    rows = {row.key: row for row in rows_of({"control": {"acc": CONTROL5, "err": CONTROL5},
                                             "treat": {"acc": plus(0.0), "err": plus(0.0)}},
                                            margins={"acc": 0.01})}
    assert (rows["acc"].margin, rows["acc"].verdict) == (0.01, EQUIVALENT)
    assert (rows["err"].margin, rows["err"].verdict) == (0.0, INCONCLUSIVE)


def test_q_values_are_benjamini_hochberg_over_the_tested_rows_only():
    """Directed rows with an interval get scipy's Benjamini-Hochberg q-value over all of them (their p-values
    scipy's paired t test); an informational row and one with a single pair are not tested: no q-value."""
    single = [0.5, None, None, None, None]
    treat = {"acc": plus(0.01), "err": plus(0.002), "nmse": plus(-0.003), "nmse@64": single, "note": plus(0.0)}
    control = {"acc": CONTROL5, "err": CONTROL5, "nmse": CONTROL5, "nmse@64": [0.4], "note": CONTROL5}
    rows = {row.key: row for row in rows_of({"control": control, "treat": treat})}
    assert (rows["note"].verdict, rows["nmse@64"].verdict) == (INFO, INSUFFICIENT)
    assert rows["note"].q_value is None and rows["nmse@64"].q_value is None
    tested = ["acc", "err", "nmse"]
    p_values = [scipy.stats.ttest_rel(treat[k], control[k]).pvalue for k in tested]
    assert [rows[k].difference.estimate.p_value for k in tested] == pytest.approx(p_values, rel=1e-9)
    expected = scipy.stats.false_discovery_control(p_values)
    assert [rows[k].q_value for k in tested] == pytest.approx(list(expected), rel=1e-9)
    assert [rows[k].q_value for k in tested] != pytest.approx(p_values)  # adjusted, not the raw p-values


def test_the_rows_of_a_family_follow_its_numeric_qualifiers():
    """nmse@64 before nmse@256 before nmse@1024 (by value, not as text)."""
    keys = ("nmse@1024", "nmse@256", "nmse@64")
    rows = rows_of({"control": {k: CONTROL5 for k in keys}, "treat": {k: plus(0.001) for k in keys}})
    assert [row.key for row in rows] == ["nmse@64", "nmse@256", "nmse@1024"]


def test_a_key_with_no_seed_on_both_arms_gets_no_row_and_the_keys_after_it_still_do():
    """treat reports acc on seeds 0-1 only, control on seeds 2-4 only: no pair, no acc row; err and nmse
    (sorted after it) are still compared."""
    rows = rows_of({"control": {"acc": [None, None, 0.8, 0.8, 0.8], "err": CONTROL5, "nmse": CONTROL5},
                    "treat": {"acc": [0.9, 0.9], "err": plus(-0.01), "nmse": plus(0.01)}})
    assert [(row.key, row.verdict) for row in rows] == [("err", BETTER), ("nmse", WORSE)]


def test_a_contrast_rows_interval_is_at_the_runs_confidence_and_counts_seeds_missing_on_both_arms():
    """At confidence 0.8 the row's interval is scipy's t interval at 0.8; seed 5 of the run's six reported
    on neither arm is a dropped pair."""
    treat = plus(0.001)
    (row,) = rows_of({"control": {"acc": CONTROL5}, "treat": {"acc": treat}}, seeds=tuple(range(6)),
                     confidence=0.8)
    differences = np.subtract(treat, CONTROL5)
    low, high = scipy.stats.t.interval(0.8, len(differences) - 1, loc=differences.mean(),
                                       scale=scipy.stats.sem(differences))
    assert (row.difference.interval.low, row.difference.interval.high) == pytest.approx((low, high), rel=1e-9)
    assert row.difference.n == 5 and row.difference.dropped == (5,)


def test_a_swept_treatment_gives_a_row_per_setting_named_by_its_labels_under_the_declared_contrast():
    rows = rows_of({"control": {"acc": CONTROL5}, "treat@lr=0.1": {"acc": plus(0.01)},
                    "treat@lr=1": {"acc": plus(-0.01)}})
    assert [(row.variant.name, row.variant.declared_name, row.verdict) for row in rows] == [
        ("treat@lr=0.1-vs-control", "treat-vs-control", BETTER),
        ("treat@lr=1-vs-control", "treat-vs-control", WORSE)]
