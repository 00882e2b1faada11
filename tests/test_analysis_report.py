"""Paired statistics, verdicts, claims, validity, failed trials, plots and `harness report`.

Every test writes a synthetic results folder in the documented format (suite.json plus one
JSON per trial, through the store) whose differences are constructed, so the expected verdict
follows from the construction.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib.image
import numpy as np
import pytest
from click.testing import CliRunner
from records import make_record

from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.decide.verdicts import evaluate_validity, verdict
from harness.analysis.present.run_report import build_report
from harness.analysis.present.summary_json import summary_document
from harness.analysis.present.verdict_tables import render_report, render_verdict_table
from harness.analysis.run_results import load_results
from harness.analysis.stats.paired_stats import critical_t, minimum_detectable_effect, paired_difference
from harness.cli import main
from harness.store import RunFolder

SEEDS = [0, 1, 2, 3, 4]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
    "err": {"direction": "lower", "unit": "nats", "kind": "quality", "key": True},
    "size": {"direction": "lower", "unit": "", "kind": "quality", "key": True},
    "noisy": {"direction": "higher", "unit": "", "kind": "quality", "key": True},
    "bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"},
    "speed": {"direction": "higher", "unit": "items/s", "kind": "speed"},
    "note": {"direction": "none", "unit": "", "kind": "info"},
}
# treatment - control per seed, by construction
DIFFS = {
    "acc": [0.10, 0.12, 0.09, 0.11, 0.10],  # higher is better: better
    "err": [0.20, 0.25, 0.18, 0.22, 0.20],  # lower is better: worse
    "size": [0.01, -0.01, 0.005, 0.0, -0.005],  # inside the 0.05 margin: equivalent
    "noisy": [1.0, -1.0, 0.5, -0.5, 0.2],  # straddles 0, no margin: inconclusive
    "bytes": [0.0] * 5,
    "note": [3.0] * 5,
}


def suite_meta(**overrides: Any) -> dict[str, Any]:
    meta = {
        "schema": 1, "suite": "synth", "profile": "default", "task": "synth", "task_version": "1",
        "description": "synthetic", "seeds": SEEDS, "sweep": {},
        "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
        "contrasts": [{"name": "treat-vs-control", "treatment": "treat", "control": "control", "margins": {"size": 0.05}}],
        "validity": None, "claims": [], "gate": {"default_tolerance": 0.05, "tolerances": {}},
        "metrics": METRICS, "device": "cpu", "device_class": "cpu", "device_name": "synthetic cpu",
    }
    meta.update(overrides)
    return meta


def record(arm: str, seed: int, metrics: dict[str, float], label: str | None = None, point: dict | None = None,
           status: str = "finished", error: str | None = None, **extra: Any) -> dict[str, Any]:
    """The fields of one record; ``write_run`` names it and checks it (``make_record``)."""
    return {
        "arm": arm, "arm_label": label or arm, "seed": seed, "point": point or {}, "status": status, "error": error,
        "metrics": metrics if status == "finished" else {}, "curves": extra.get("curves", {}),
        "details": extra.get("details", {}), "environment": {"device": "cpu", "git_commit": "0" * 40},
        "started_at": "2026-01-01T00:00:00+00:00", "wall_seconds": 1.0,
    }


def write_run(root: Path, meta: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    folder = RunFolder(root, meta["suite"], meta["profile"])
    folder.save_suite(meta)
    for n, rec in enumerate(records):
        folder.save_trial(make_record(f"t{n:04d}", **{**rec, "suite": meta["suite"], "profile": meta["profile"]}))
    return folder.path


def control_values(seed: int) -> dict[str, float]:
    rng = np.random.default_rng(100 + seed)  # seed-to-seed variation shared by both arms
    return {"acc": 0.6 + 0.1 * rng.random(), "err": 1.0 + rng.random(), "size": 2.0 + rng.random(),
            "noisy": 5.0 + rng.random(), "bytes": 4096.0, "speed": 1000.0 * (1 + rng.random()), "note": rng.random()}


def paired_records(seeds: list[int] = SEEDS, diffs: dict[str, list[float]] = DIFFS) -> list[dict[str, Any]]:
    records = []
    for n, seed in enumerate(seeds):
        control = control_values(seed)
        treated = {k: v + diffs[k][n] if k in diffs else v for k, v in control.items()}
        records += [record("control", seed, control), record("treat", seed, treated)]
    return records


def verdicts_by_metric(run_dir: Path) -> dict[str, str]:
    return {row.key: row.verdict for row in analyse(load_results(run_dir)).rows}


# --- statistics ---------------------------------------------------------------------------

def test_paired_difference_matches_direct_numpy_computation():
    rng = np.random.default_rng(7)
    control = {seed: float(v) for seed, v in enumerate(rng.normal(10, 2, 6))}
    treatment = {seed: control[seed] + float(d) for seed, d in enumerate(rng.normal(0.5, 0.3, 6))}
    treatment[99] = 1.0  # unpaired: ignored
    control[5] = float("nan")  # not finite: the pair is dropped
    result = paired_difference(treatment, control)

    seeds = [0, 1, 2, 3, 4]
    diffs = np.array([treatment[s] - control[s] for s in seeds])
    assert result.pair_keys == tuple(seeds)
    np.testing.assert_allclose(result.differences, diffs)
    assert result.mean_difference == pytest.approx(diffs.mean())
    assert result.relative_change == pytest.approx(diffs.mean() / abs(np.mean([control[s] for s in seeds])))
    t_975_df4 = 2.7764451051977987  # Student-t table
    half = t_975_df4 * diffs.std(ddof=1) / np.sqrt(5)
    assert (result.interval.low, result.interval.high) == pytest.approx((diffs.mean() - half, diffs.mean() + half))
    assert result.dropped == (5, 99)  # both are counted, not silently lost



def test_pairs_are_matched_by_seed_when_one_side_lost_a_seed():
    """A failed treatment trial leaves a gap: the control's other seeds must not slide into it."""
    treatment = {0: 1.0, 2: 3.0, 3: 5.0}  # seed 1 failed on the treatment side
    control = {3: 4.0, 0: 0.0, 1: 10.0, 2: 1.0}  # stored in another order than the seeds
    result = paired_difference(treatment, control, expected=[0, 1, 2, 3])
    assert result.pair_keys == (0, 2, 3)
    assert result.control == (0.0, 1.0, 4.0)
    assert result.differences == (1.0, 2.0, 1.0)
    assert result.dropped == (1,)


def test_t_interval_agrees_with_normal_theory_for_a_large_sample():
    diffs = np.random.default_rng(3).normal(1.0, 2.0, 400)
    result = paired_difference(dict(enumerate(diffs)), dict.fromkeys(range(400), 0.0))
    half_width = 1.96 * diffs.std(ddof=1) / np.sqrt(diffs.size)
    assert result.interval.high - result.interval.low == pytest.approx(2 * half_width, rel=0.1)
    assert (result.interval.low + result.interval.high) / 2 == pytest.approx(diffs.mean(), abs=0.05)


def test_one_pair_has_no_interval_and_says_insufficient_pairs():
    result = paired_difference({0: 2.0}, {0: 1.0})
    assert result.interval is None and result.mean_difference == 1.0
    assert verdict(result, "higher") == "insufficient pairs"
    assert verdict(result, "none") == "info"


# --- verdicts and claims --------------------------------------------------------------------

def test_verdicts_follow_direction_interval_and_margin(tmp_path):
    run_dir = write_run(tmp_path, suite_meta(), paired_records())
    verdicts = verdicts_by_metric(run_dir)
    assert verdicts == {"acc": "better", "err": "worse", "size": "equivalent", "noisy": "inconclusive",
                        "bytes": "equivalent", "speed": "equivalent", "note": "info"}


def test_margin_by_exact_key_wins_over_family(tmp_path):
    meta = suite_meta(contrasts=[{"treatment": "treat", "control": "control", "margins": {"size": 0.0, "size@1": 0.05}}])
    records = [
        record(arm, seed, {"size@1": 1.0 + d, "size@2": 1.0 + d})
        for seed, delta in zip(SEEDS, DIFFS["size"])
        for arm, d in (("control", 0.0), ("treat", delta))
    ]
    assert verdicts_by_metric(write_run(tmp_path, meta, records)) == {"size@1": "equivalent", "size@2": "inconclusive"}


def test_single_seed_verdicts_say_insufficient_pairs(tmp_path):
    run_dir = write_run(tmp_path, suite_meta(seeds=[0]), paired_records([0]))
    assert set(verdicts_by_metric(run_dir).values()) == {"insufficient pairs", "info"}
    assert "- (insufficient pairs)" in render_verdict_table(analyse(load_results(run_dir)))


def test_pairs_are_formed_within_each_sweep_point(tmp_path):
    meta = suite_meta(sweep={"bank_size": [64, 256]})
    records = []
    for seed in SEEDS:
        for bank, base, delta in ((64, 0.5, 0.1), (256, 0.9, -0.1)):
            point = {"bank_size": bank}
            noise = 0.01 * seed
            records += [record("control", seed, {"acc": base + noise}, point=point),
                        record("treat", seed, {"acc": base + noise + delta + 0.001 * seed}, point=point)]
    rows = analyse(load_results(write_run(tmp_path, meta, records))).rows
    assert {(r.point, r.verdict) for r in rows} == {("bank_size=64", "better"), ("bank_size=256", "worse")}
    assert all(r.difference.n == 5 for r in rows)


def test_a_multi_axis_sweep_pairs_whatever_order_the_stored_suite_lists_its_axes(tmp_path):
    # the trials label points in declaration order (entity_len first); suite.json sorts the axes
    meta = suite_meta(sweep={"entity_len": [1, 4], "bank_size": [64]})
    records = []
    for seed in SEEDS:
        for entity_len in (1, 4):
            point = {"entity_len": entity_len, "bank_size": 64}
            records += [record("control", seed, {"acc": 0.5 + 0.01 * seed}, point=point),
                        record("treat", seed, {"acc": 0.6 + 0.011 * seed}, point=point)]
    results = load_results(write_run(tmp_path, meta, records))
    assert results.point_labels() == ["entity_len=1,bank_size=64", "entity_len=4,bank_size=64"]
    rows = analyse(results).rows
    assert {(r.point, r.verdict) for r in rows} == {(p, "better") for p in results.point_labels()}


def claim(metric: str, test: str, **bounds: Any) -> dict[str, Any]:
    return {"contrast": "treat-vs-control", "metric": metric, "test": test, **bounds}


# A reference arm that is clearly worse than the control on every directed metric, so that
# "control-vs-weak" shows the control works (assay sensitivity of non-inferiority/equivalence).
WEAKER = {"acc": -0.3, "err": 1.0, "size": 1.0, "noisy": -3.0}


def with_reference(records: list[dict[str, Any]], seeds: list[int] = SEEDS, weaker: dict[str, float] = WEAKER,
                   **overrides: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A suite with a 'weak' arm and the control-vs-weak reference contrast, plus its records."""
    meta = suite_meta(
        arms={name: {"labels": [name]} for name in ("control", "treat", "weak")},
        contrasts=[*suite_meta()["contrasts"], {"treatment": "control", "control": "weak", "margins": {}}],
        seeds=seeds, **overrides,
    )
    weak = [record("weak", seed, {k: v + weaker.get(k, 0.0) for k, v in control_values(seed).items()}) for seed in seeds]
    return meta, records + weak


REFERENCE = "control-vs-weak"


def test_claims_pass_fail_and_inconclusive(tmp_path):
    claims = [
        claim("acc", "superior"),
        claim("err", "superior"),
        claim("err", "non_inferior", margin=0.5, reference=REFERENCE),
        claim("err", "non_inferior", margin=0.1, reference=REFERENCE),
        claim("noisy", "non_inferior", margin=0.1, reference=REFERENCE),
        claim("size", "equivalent", margin=0.05, reference=REFERENCE),
        claim("err", "equivalent", margin=0.1, reference=REFERENCE),
        claim("bytes", "equal"),
        claim("acc", "equal"),
        claim("speed", "ratio", min=0.9, max=1.1),
        claim("speed", "ratio", min=1.5),
        claim("missing_metric", "superior"),
        {**claim("acc", "superior"), "contrast": "nope-vs-control"},
    ]
    meta, records = with_reference(paired_records(), claims=claims)
    results = load_results(write_run(tmp_path, meta, records))
    statuses = [(c.claim.metric, c.claim.test, c.status) for c in evaluate_claims(results)]
    assert statuses == [
        ("acc", "superior", "pass"),
        ("err", "superior", "fail"),
        ("err", "non_inferior", "pass"),
        ("err", "non_inferior", "fail"),
        ("noisy", "non_inferior", "inconclusive"),
        ("size", "equivalent", "pass"),
        ("err", "equivalent", "fail"),
        ("bytes", "equal", "pass"),
        ("acc", "equal", "fail"),
        ("speed", "ratio", "pass"),
        ("speed", "ratio", "fail"),
        ("missing_metric", "superior", "inconclusive"),
        ("acc", "superior", "inconclusive"),
    ]


def test_dropped_pairs_cannot_turn_a_claim_into_a_pass(tmp_path):
    """The treatment's 3 worst of 6 seeds NaN: the 3 left pass (+0.50), all 6 finite are inconclusive (-0.48)."""
    seeds, diffs = list(range(6)), [0.4, 0.5, 0.6, -1.4, -1.45, -1.53]
    records = []
    for seed, diff in zip(seeds, diffs):
        control = control_values(seed)
        records += [record("control", seed, control), record("treat", seed, {**control, "acc": control["acc"] + diff})]
    meta = suite_meta(seeds=seeds, claims=[claim("acc", "superior")])
    (finite,) = evaluate_claims(load_results(write_run(tmp_path / "finite", meta, records)))
    assert (finite.status, finite.n, round(finite.estimate, 2)) == ("inconclusive", 6, -0.48)
    for rec in records[7::2]:  # the treatment's seeds 3, 4 and 5
        rec["metrics"]["acc"] = float("nan")
    (dropped,) = evaluate_claims(load_results(write_run(tmp_path / "dropped", meta, records)))
    assert (dropped.n, dropped.dropped, round(dropped.estimate, 2)) == (3, 3, 0.5)
    assert dropped.status == "inconclusive" and "3 pair(s) dropped" in dropped.detail


def test_a_deterministic_value_on_an_inclusive_bound_passes(tmp_path):
    # bytes: treatment == control in every pair, so the ratio is exactly 1.0 with no spread
    claims = [claim("bytes", "ratio", max=1.0), claim("bytes", "ratio", min=1.0), claim("bytes", "ratio", max=0.99)]
    results = load_results(write_run(tmp_path, suite_meta(claims=claims), paired_records()))
    assert [c.status for c in evaluate_claims(results)] == ["pass", "pass", "fail"]


def test_one_pair_decides_only_the_equal_claim(tmp_path):
    claims = [claim("acc", "superior"), claim("bytes", "equal"), claim("speed", "ratio", min=0.5)]
    results = load_results(write_run(tmp_path, suite_meta(seeds=[0], claims=claims), paired_records([0])))
    assert [c.status for c in evaluate_claims(results)] == ["insufficient pairs", "pass", "insufficient pairs"]


@pytest.mark.parametrize(("weaker", "reference", "expected"), [
    (WEAKER, REFERENCE, "pass"),
    ({"err": 0.0}, REFERENCE, "vacuous"),  # the control is no better than the weak arm: nothing shows it works
    ({"err": 0.3}, REFERENCE, "vacuous"),  # the control works, but by less than the 0.5 margin
    (WEAKER, None, "vacuous"),  # results stored before references were required
])
def test_non_inferiority_needs_an_established_reference_effect(tmp_path, weaker, reference, expected):
    bounds = {"margin": 0.5, **({"reference": reference} if reference else {})}
    meta, records = with_reference(paired_records(), weaker=weaker, claims=[claim("err", "non_inferior", **bounds)])
    results = load_results(write_run(tmp_path, meta, records))
    (result,) = evaluate_claims(results)
    assert result.status == expected
    claim_rows = [line for line in render_report(analyse(results)).splitlines() if "non_inferior (margin 0.5)" in line]
    assert len(claim_rows) == 1 and f" {expected.upper()} " in claim_rows[0]
    if expected == "vacuous":
        assert result.detail.startswith("vacuous") and result.p_adjusted is None  # never a PASS in disguise


def test_relative_margin_is_a_fraction_of_the_reference_effect(tmp_path):
    # err: the treatment is 0.21 worse; the control beats the weak arm by 1.0 (or 0.3)
    strong = [claim("err", "non_inferior", relative_margin=0.5, reference=REFERENCE)]
    meta, records = with_reference(paired_records(), claims=strong)
    (result,) = evaluate_claims(load_results(write_run(tmp_path / "a", meta, records)))
    assert result.status == "pass" and result.reference.margin == pytest.approx(0.5 * 1.0, rel=0.05)
    meta, records = with_reference(paired_records(), weaker={"err": 0.3}, claims=strong)
    (result,) = evaluate_claims(load_results(write_run(tmp_path / "b", meta, records)))
    assert result.status == "fail" and result.reference.margin == pytest.approx(0.15, rel=0.05)


def test_holm_correction_turns_a_lone_pass_into_inconclusive_among_many_claims(tmp_path):
    diffs = [0.2, 1.0, 0.6, 1.4, 0.3]  # one-sided t p ~ 0.017: below 0.025 alone, not after Holm with four
    metrics = {f"m{i}": {"direction": "higher", "unit": "", "kind": "quality"} for i in range(4)}
    records = [record(arm, seed, {name: 10.0 + seed + (d if arm == "treat" else 0.0) for name in metrics})
               for seed, d in zip(SEEDS, diffs) for arm in ("control", "treat")]
    alone = suite_meta(metrics=metrics, claims=[claim("m0", "superior")])
    (result,) = evaluate_claims(load_results(write_run(tmp_path / "alone", alone, records)))
    assert result.status == "pass" and 0.01 < result.p_value < 0.025 and result.p_adjusted == result.p_value
    family = suite_meta(metrics=metrics, claims=[claim(name, "superior") for name in metrics])
    results = evaluate_claims(load_results(write_run(tmp_path / "family", family, records)))
    assert [r.status for r in results] == ["inconclusive"] * 4
    assert all(r.p_adjusted == pytest.approx(4 * result.p_value) for r in results)


def holm_family_run(tmp_path: Path, name: str, diffs: list[float], claims: list[dict[str, Any]]) -> list:
    """Four directed metrics m0..m3 (plus bytes) whose treatment - control differences are ``diffs``."""
    metrics = {f"m{i}": {"direction": "higher", "unit": "", "kind": "quality"} for i in range(4)}
    metrics["bytes"] = METRICS["bytes"]
    records = [record(arm, seed, {**{m: 10.0 + seed + (d if arm == "treat" else 0.0) for m in metrics if m != "bytes"},
                                  "bytes": 4096.0 if arm == "control" else 8192.0})
               for seed, d in zip(SEEDS, diffs) for arm in ("control", "treat")]
    return evaluate_claims(load_results(write_run(tmp_path / name, suite_meta(metrics=metrics, claims=claims), records)))


HOLM_DIFFS = [0.2, 1.0, 0.6, 1.4, 0.3]  # one-sided t p ~ 0.017: within 0.025 alone, not within 0.025 / 4


def test_fail_reads_the_same_holm_level_as_pass(tmp_path):
    worse = [-d for d in HOLM_DIFFS]
    (alone,) = holm_family_run(tmp_path, "alone", worse, [claim("m0", "superior")])
    assert alone.status == "fail" and alone.decision_interval.high < 0
    family = holm_family_run(tmp_path, "family", worse, [claim(f"m{i}", "superior") for i in range(4)])
    # the unadjusted interval lies below 0, but at the level Holm tests each of four claims it does not
    assert [r.status for r in family] == ["inconclusive"] * 4
    assert all(r.interval.high < 0 < r.decision_interval.high for r in family)


def test_mde_is_at_the_level_the_claim_was_tested_at(tmp_path):
    family = holm_family_run(tmp_path, "family", HOLM_DIFFS, [claim(f"m{i}", "superior") for i in range(4)])
    sd = float(np.std(HOLM_DIFFS, ddof=1))
    for result in family:
        assert result.level == pytest.approx(0.025 / 4)
        assert result.mde == pytest.approx(minimum_detectable_effect(sd, 5, 0.025 / 4), rel=1e-9)
        assert result.mde > minimum_detectable_effect(sd, 5, 0.025) * 1.3


def test_deterministic_claims_stay_outside_the_holm_family(tmp_path):
    claims = [claim("m0", "superior"), claim("bytes", "ratio", max=1.5), claim("bytes", "equal")]
    sampled, doubled, equal = holm_family_run(tmp_path, "run", HOLM_DIFFS, claims)
    assert (doubled.status, equal.status) == ("fail", "fail")  # 8192 / 4096 bytes, exactly
    assert not doubled.in_family and sampled.in_family
    assert sampled.status == "pass" and sampled.level == pytest.approx(0.025)  # alone in its family


def test_relative_margin_uses_the_reference_bound_not_its_estimate(tmp_path):
    # the control beats the weak arm by 1.0 on average but with spread: its 95% lower bound is ~0.2
    spread = [0.2, 1.8, 0.5, 1.5, 1.0]
    meta, records = with_reference(paired_records(), weaker={},
                                   claims=[claim("err", "non_inferior", relative_margin=0.5, reference=REFERENCE)])
    for rec in records:
        if rec["arm"] == "weak":
            rec["metrics"]["err"] += spread[SEEDS.index(rec["seed"])]
    (result,) = evaluate_claims(load_results(write_run(tmp_path, meta, records)))
    low = 1.0 - critical_t(0.025, 5) * float(np.std(spread, ddof=1)) / math.sqrt(5)
    assert result.reference.established and result.reference.margin == pytest.approx(0.5 * low, rel=1e-6)
    # the treatment is 0.21 worse: within half the point estimate (0.5), beyond half the bound (~0.1)
    assert result.status == "fail"


def test_claims_come_first_and_state_method_n_confidence_and_mde(tmp_path):
    meta, records = with_reference(paired_records(), claims=[claim("noisy", "superior")])
    text = render_report(analyse(load_results(write_run(tmp_path, meta, records))))
    assert text.index("primary claims") < text.index("exploratory contrasts")
    assert text.count("paired Student-t on seed-paired differences, 95% confidence, 5 seed(s)") == 2
    (result,) = evaluate_claims(load_results(tmp_path / "synth" / "default"))
    sd = float(np.std(DIFFS["noisy"], ddof=1))
    # one-sided 2.5%, 80% power, n = 5: (t_.975,4 + ~t_.80,4) * sd / sqrt(5), a bit above the normal 2.8 sd/sqrt(n)
    assert 2.8 * sd / np.sqrt(5) < result.mde < 4.5 * sd / np.sqrt(5)


def test_swept_treatment_gives_one_contrast_and_claim_per_variant(tmp_path):
    labels = ["split[w=1]", "split[w=2]"]
    meta = suite_meta(
        arms={"control": {"labels": ["control"]}, "split": {"labels": labels}},
        contrasts=[{"treatment": "split", "control": "control", "margins": {}}],
        claims=[{**claim("acc", "superior"), "contrast": "split-vs-control"}],
    )
    records = []
    for seed in SEEDS:
        records.append(record("control", seed, {"acc": 0.5 + 0.01 * seed}))
        records.append(record("split", seed, {"acc": 0.6 + 0.01 * seed}, label=labels[0]))
        records.append(record("split", seed, {"acc": 0.4 + 0.011 * seed}, label=labels[1]))
    analysis = analyse(load_results(write_run(tmp_path, meta, records)))
    assert {(r.variant.name, r.verdict) for r in analysis.rows} == {
        ("split[w=1]-vs-control", "better"), ("split[w=2]-vs-control", "worse")}
    assert [(c.contrast, c.status) for c in analysis.claims] == [
        ("split[w=1]-vs-control", "pass"), ("split[w=2]-vs-control", "fail")]


# --- validity ----------------------------------------------------------------------------------

def validity_run(tmp_path: Path, oracle_delta: float, random_delta: float) -> Path:
    meta = suite_meta(
        arms={name: {"labels": [name]} for name in ("control", "treat", "oracle", "random")},
        validity={"control": "control", "positive": "oracle", "negative": "random", "metric": "acc"},
    )
    records = paired_records()
    for seed in SEEDS:
        base = control_values(seed)["acc"]
        jitter = 0.002 * seed
        records.append(record("oracle", seed, {"acc": base + oracle_delta + jitter}))
        records.append(record("random", seed, {"acc": base + random_delta + jitter}))
    return write_run(tmp_path, meta, records)


def test_valid_suite_when_positive_beats_and_negative_does_not(tmp_path):
    validity = evaluate_validity(load_results(validity_run(tmp_path, 0.3, -0.2)))
    assert validity.valid is True
    assert {(c.role, c.beats_control) for c in validity.checks} == {("positive", True), ("negative", False)}


@pytest.mark.parametrize(("oracle_delta", "random_delta", "culprit"), [(0.3, 0.05, "negative"), (-0.05, -0.2, "positive")])
def test_failed_controls_mark_every_verdict_invalid(tmp_path, oracle_delta, random_delta, culprit):
    analysis = analyse(load_results(validity_run(tmp_path, oracle_delta, random_delta)))
    assert analysis.validity.valid is False
    text = render_report(analysis)
    assert "validity: INVALID" in text and f"{culprit} control" in text
    table_rows = render_verdict_table(analysis).splitlines()[4:]
    assert table_rows and all("(INVALID)" in line for line in table_rows if line.startswith("treat-vs-control"))
    report = summary_document(analysis, plots=[])
    assert report["valid"] is False and report["validity"]["problems"]
    assert not any(row["counts"] for row in report["contrasts"])


def test_too_few_pairs_leave_validity_undetermined_and_claims_uncounted(tmp_path):
    meta = suite_meta(
        seeds=[0], claims=[claim("acc", "superior")],
        arms={name: {"labels": [name]} for name in ("control", "treat", "oracle")},
        validity={"control": "control", "positive": "oracle", "metric": "acc"},
    )
    records = paired_records([0]) + [record("oracle", 0, {"acc": 0.99})]
    analysis = analyse(load_results(write_run(tmp_path, meta, records)))
    assert analysis.validity.status == "undetermined" and analysis.validity.valid is None
    assert not analysis.validity.claims_count
    text = render_report(analysis)
    assert "validity: UNDETERMINED" in text and "INSUFFICIENT PAIRS (UNDETERMINED)" in text
    assert not any(c["counts"] for c in summary_document(analysis, plots=[])["claims"])


# --- failed trials ----------------------------------------------------------------------------

def test_failed_and_unreadable_trials_are_listed_and_excluded(tmp_path):
    records = paired_records()
    records[5] = record("treat", 2, {}, status="failed", error="NaN loss at step 12")
    run_dir = write_run(tmp_path, suite_meta(), records)
    (run_dir / "trials" / "broken.json").write_text("{not json")

    analysis = analyse(load_results(run_dir))
    text = render_report(analysis)
    assert "2 failed trial(s)" in text and "NaN loss at step 12" in text and "broken.json" in text
    report = summary_document(analysis, plots=[])
    failed = {(f["arm"], f["seed"], f["error"]) for f in report["failed_trials"]}
    assert ("treat", 2, "NaN loss at step 12") in failed
    acc = next(row for row in report["contrasts"] if row["metric"] == "acc")
    assert acc["n"] == 4 and 2 not in acc["seeds"] and acc["dropped_seeds"] == [2]
    assert "4 (-1)" in render_verdict_table(analysis)


# --- plots and the report ---------------------------------------------------------------------

def plot_names(paths: list[Path]) -> set[str]:
    return {p.name for p in paths}


def assert_real_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 10_000
    height, width = matplotlib.image.imread(path).shape[:2]
    assert height > 200 and width > 300


def test_report_draws_curves_metric_vs_size_and_detail_scatter(tmp_path):
    meta = suite_meta(
        sweep={"bank_size": [64, 1024]},
        metrics={"recall": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
                 "queries_per_s": {"direction": "higher", "unit": "queries/s", "kind": "speed"}},
        contrasts=[{"treatment": "treat", "control": "control", "margins": {}}],
        detail_scatters=[{"detail": "gate_vs_interference", "x_key": "interference", "y_key": "gate",
                          "title": "gate vs interference", "xlabel": "interference", "ylabel": "gate"}],
    )
    records = []
    for seed in SEEDS[:3]:
        for bank in (64, 1024):
            for arm, lift in (("control", 0.0), ("treat", 0.1)):
                scale = 64 / bank
                records.append(record(
                    arm, seed, {"recall@1": 0.3 * scale + lift, "recall@4": 0.6 * scale + lift, "queries_per_s": 1e6 / bank},
                    point={"bank_size": bank},
                    curves={"train/loss": [[step, 2.0 / (1 + step) + 0.01 * seed] for step in range(0, 50, 5)]},
                    details={"gate_vs_interference": {"interference": [0.1 * i for i in range(8)],
                                                      "gate": [0.05 * i + lift for i in range(8)]}},
                ))
    built = build_report(write_run(tmp_path, meta, records))
    names = plot_names(list(built.plot_paths))
    assert {"recall_at_1_vs_bank_size.png", "recall_at_4_vs_bank_size.png", "queries_per_s_vs_bank_size.png",
            "curve_train_loss_bank_size_64.png", "gate_vs_interference_bank_size_64.png"} <= names
    assert all(p.parent == built.report_dir / "plots" for p in built.plot_paths)
    for path in built.plot_paths:
        assert_real_png(path)
    summary = json.loads(built.summary_path.read_text())
    assert sorted(summary["plots"]) == sorted(f"plots/{n}" for n in names)


def test_report_draws_per_arm_cis_families_by_qualifier_and_state_vs_kv_bytes(tmp_path):
    meta = suite_meta(
        metrics={"nmse": {"direction": "lower", "unit": "", "kind": "quality", "key": True},
                 "state_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory",
                                 "pairs_with": "kv_cache_bytes"},
                 "kv_cache_bytes": {"direction": "none", "unit": "bytes", "kind": "memory", "axis": "context (tokens)"},
                 "loss": {"direction": "lower", "unit": "nats", "kind": "quality", "key": True}},
        contrasts=[{"treatment": "treat", "control": "control", "margins": {}}],
    )
    contexts = (256, 512, 1024)
    records = []
    for seed in SEEDS[:3]:
        for arm, lift in (("control", 0.0), ("treat", -0.05)):
            metrics = {f"nmse@{t}": 0.2 + t / 1e4 + lift + 0.01 * seed for t in contexts}
            metrics |= {f"kv_cache_bytes@{t}": 768.0 * t for t in contexts}
            metrics |= {"state_bytes": 45504.0, "loss": 1.0 + lift}
            records.append(record(arm, seed, metrics))
    built = build_report(write_run(tmp_path, meta, records))
    names = plot_names(list(built.plot_paths))
    assert names == {"loss_per_arm.png", "nmse_by_qualifier.png", "state_bytes_vs_kv_cache_bytes.png",
                     "loss_paired_differences.png", "nmse_paired_differences_by_qualifier.png"}
    for path in built.plot_paths:
        assert_real_png(path)


def test_rebuilding_the_report_replaces_stale_plots(tmp_path):
    run_dir = write_run(tmp_path, suite_meta(), paired_records())
    stale = run_dir / "report" / "plots" / "old_figure.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(PNG_SIGNATURE)
    first = build_report(run_dir)
    second = build_report(run_dir)
    assert not stale.exists()
    assert plot_names(list(first.plot_paths)) == plot_names(list(second.plot_paths))
    assert first.text == second.text  # deterministic statistics: the same intervals every time


@pytest.mark.parametrize("linked", ["report", "report/plots"])
def test_a_report_folder_linked_outside_the_run_is_never_written_through(tmp_path, linked):
    run_dir = write_run(tmp_path / "results", suite_meta(), paired_records())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.png").write_bytes(PNG_SIGNATURE)
    if linked != "report":
        (run_dir / "report").mkdir()
    (run_dir / linked).symlink_to(elsewhere)
    built = build_report(run_dir)
    assert [p.name for p in elsewhere.iterdir()] == ["precious.png"]  # nothing written there, nothing removed
    assert (elsewhere / "precious.png").read_bytes() == PNG_SIGNATURE
    assert not (run_dir / linked).is_symlink() and built.plot_paths


def test_a_report_killed_while_drawing_is_not_taken_as_the_stored_one(tmp_path, monkeypatch):
    from harness.analysis.present import run_plots, run_report

    run_dir = write_run(tmp_path, suite_meta(), paired_records())
    build_report(run_dir)
    assert run_report.stored_report_text(run_dir) is not None

    def killed(spec, path):
        raise KeyboardInterrupt  # what a SIGKILL mid-plots leaves: some run_plots, no new text

    monkeypatch.setattr(run_plots, "render", killed)
    with pytest.raises(KeyboardInterrupt):
        build_report(run_dir)
    assert run_report.stored_report_text(run_dir) is None  # the next run redraws


def test_report_command_prints_the_verdict_table_for_every_run(tmp_path):
    metrics = {**METRICS, "size": {**METRICS["size"], "key": False}, "noisy": {**METRICS["noisy"], "key": False}}
    write_run(tmp_path, suite_meta(metrics=metrics), paired_records())
    write_run(tmp_path, suite_meta(suite="other", profile="smoke", metrics=metrics), paired_records())
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "== synth / default" in result.output and "== other / smoke" in result.output
    assert "BETTER" in result.output and "WORSE" in result.output
    assert (tmp_path / "other" / "smoke" / "report" / "summary.json").exists()


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_report_command_usage_errors_are_one_line(tmp_path, make):
    target = tmp_path / "nothing" if make == "missing" else tmp_path
    result = CliRunner().invoke(main, ["report", str(target)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
