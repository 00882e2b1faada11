"""`harness baseline save` and `harness gate` on synthetic results folders.

Quality (arm means and each contrast's paired difference) may worsen within a tolerance measured
from the spread over seeds (the suite's tolerance with one seed), bytes must not change, claims must
keep their result, speed is judged only as the treatment/control ratio measured in the same run;
mismatched baselines are refused (exit 2).
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner
from records import make_record

from harness.cli import main
from harness.core.stored_fields import as_stored
from harness.gating.baseline import Baseline, load_baseline
from harness.store import RunFolder, canonical_json

METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
    "err": {"direction": "lower", "unit": "nats", "kind": "quality"},
    "bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"},
    "qps": {"direction": "higher", "unit": "queries/s", "kind": "speed"},
    "latency": {"direction": "lower", "unit": "s", "kind": "speed"},
    "note": {"direction": "none", "unit": "", "kind": "info"},
}
VALUES = {
    "control": {"acc": 0.80, "err": 0.50, "bytes": 4096.0, "qps": 1000.0, "latency": 2.0, "note": 1.0},
    "treat": {"acc": 0.85, "err": 0.45, "bytes": 4096.0, "qps": 1500.0, "latency": 1.5, "note": 2.0},
}
SEEDS = (0, 1)
SEED_NOISE = {"treat": 0.01, "control": 0.02}


def make_run(root: Path, edit: Callable[[dict[str, dict[str, float]]], None] | None = None, *, suite: str = "synth",
             profile: str = "smoke", device_class: str = "cpu", failed: bool = False,
             gate_section: dict[str, Any] | None = None, under_load: bool = False, seeds: tuple[int, ...] = SEEDS,
             claims: list[dict[str, Any]] | None = None, environment: dict[str, str] | None = None) -> Path:
    values = copy.deepcopy(VALUES)
    if edit:
        edit(values)
    folder = RunFolder(root, suite, profile)
    folder.save_suite({
        "schema": 1, "suite": suite, "profile": profile, "task": "synth", "task_version": "1", "seeds": list(seeds),
        "sweep": {}, "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}},
        "contrasts": [{"name": "treat-vs-control", "treatment": "treat", "control": "control", "margins": {}}],
        "validity": None, "claims": claims or [],
        "gate": gate_section or {"default_tolerance": 0.05, "tolerances": {"acc": 0.02}},
        "metrics": METRICS, "device": device_class, "device_class": device_class, "device_name": "synthetic",
    })
    for arm, metrics in values.items():
        for seed in seeds:
            broken = failed and arm == "treat" and seed == 1
            folder.save_trial(make_record(
                f"{arm}-{seed}", arm, seed, suite=suite, profile=profile,
                status="failed" if broken else "finished", error="RuntimeError: boom" if broken else None,
                # seed noise of sd ~0.007 (treat) and ~0.014 (control): gate tolerances come from it
                metrics={} if broken else {k: v + (SEED_NOISE[arm] * seed if METRICS[k]["kind"] == "quality" else 0.0)
                                              for k, v in metrics.items()},
                curves={}, environment={"git_commit": "f" * 40, **(environment or {})},
                details={"speed_measured_under_load": True, "concurrent_trials": 2} if under_load else {},
            ))
    return folder.path


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def baseline(tmp_path) -> Path:
    result = invoke("baseline", "save", make_run(tmp_path / "reference"), "--out", tmp_path / "baselines")
    assert result.exit_code == 0, result.output
    return tmp_path / "baselines" / "synth-smoke-cpu.json"


def gate(tmp_path: Path, edit=None, **run: Any):
    results = make_run(tmp_path / "current", edit, **run)
    return invoke("gate", results, "--baselines-dir", tmp_path / "baselines")


def scale(arm: str, key: str, factor: float):
    return lambda values: values[arm].update({key: values[arm][key] * factor})


def shift(arm: str, key: str, delta: float):
    return lambda values: values[arm].update({key: values[arm][key] + delta})


def test_baseline_holds_quality_bytes_and_speed_ratios_only(baseline):
    stored = json.loads(baseline.read_text())
    assert (stored["suite"], stored["profile"], stored["device_class"]) == ("synth", "smoke", "cpu")
    checks = {(v["check"], v["subject"], v["metric"]) for v in stored["values"]}
    assert ("quality", "treat", "acc") in checks and ("memory", "control", "bytes") in checks
    assert ("speed_ratio", "treat-vs-control", "qps") in checks
    assert not any(metric in ("qps", "latency") and check != "speed_ratio" for check, _, metric in checks)
    assert not any(metric == "note" for _, _, metric in checks)
    ratio = next(v["value"] for v in stored["values"] if v["metric"] == "qps")
    assert ratio == pytest.approx(1500.0 / 1000.0)


def test_gate_passes_on_the_same_results(tmp_path, baseline):
    result = gate(tmp_path)
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output


@pytest.mark.parametrize(
    ("edit", "regressed"),
    [
        (shift("treat", "acc", -0.03), "acc"),  # beyond 3 standard errors: the arm and the contrast regress
        (shift("control", "err", +0.06), "err"),  # beyond 3 standard errors of the control (lower is better)
        (shift("treat", "bytes", +1.0), "bytes"),  # bytes must be exact
        (scale("treat", "qps", 0.5), "qps"),  # treatment throughput halves against the same control
        (scale("treat", "latency", 2.0), "latency"),  # treatment latency doubles against the same control
    ],
)
def test_gate_fails_on_a_regression(tmp_path, baseline, edit, regressed):
    result = gate(tmp_path, edit)
    assert result.exit_code == 1, result.output
    regressions = [line for line in result.output.splitlines() if "REGRESSION" in line]
    assert regressions and all(f" {regressed}:" in line for line in regressions)


@pytest.mark.parametrize(
    "edit",
    [
        shift("treat", "acc", -0.015),  # within 3 standard errors (arm: 0.021, contrast: 0.021)
        shift("control", "err", +0.015),  # within 3 standard errors of the control (0.042) and of the contrast
        lambda v: [scale(arm, "qps", 0.3)(v) for arm in v],  # slower machine: every arm 3x slower, same ratio
        lambda v: [scale(arm, "latency", 5.0)(v) for arm in v],
        shift("treat", "note", 100.0),  # informational metrics are not gated
    ],
)
def test_gate_passes_within_tolerance_and_on_absolute_speed_changes(tmp_path, baseline, edit):
    result = gate(tmp_path, edit)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("edit", [
    shift("treat", "acc", +0.1),  # an arm's improvement passes its own check, but the contrast moved
    shift("control", "err", +0.04),  # within the control's noise (0.042), beyond the paired contrast's (0.021)
    shift("treat", "acc", -0.051),  # the sign of a contrast the baseline was sure of flips
])
def test_a_contrast_whose_sign_the_baseline_is_sure_of_is_gated_both_ways(tmp_path, baseline, edit):
    """An arm that computes something else shows as a contrast that moved, in either direction (a
    one-sided check missed a sharpened router whose recall jumped)."""
    result = gate(tmp_path, edit)
    assert result.exit_code == 1, result.output
    regressions = [line for line in result.output.splitlines() if "REGRESSION" in line]
    assert any("REGRESSION contrast" in line and "either way" in line for line in regressions)


def test_profile_without_speed_gating_ignores_speed_but_not_bytes(tmp_path, baseline):
    no_speed = {"default_tolerance": 0.05, "tolerances": {"acc": 0.02}, "speed": False}
    assert gate(tmp_path, scale("treat", "qps", 0.01), gate_section=no_speed).exit_code == 0
    result = gate(tmp_path, shift("treat", "bytes", 1.0), gate_section=no_speed)
    assert result.exit_code == 1 and "REGRESSION memory" in result.output


def test_speed_measured_under_load_is_neither_saved_nor_gated(tmp_path, baseline):
    # a Ray run (concurrent trials): its speed ratios say nothing, its quality and bytes still count
    assert gate(tmp_path, scale("treat", "qps", 0.01), under_load=True).exit_code == 0
    result = gate(tmp_path, shift("treat", "bytes", 1.0), under_load=True)
    assert result.exit_code == 1 and "REGRESSION memory" in result.output
    saved = invoke("baseline", "save", make_run(tmp_path / "loaded", under_load=True), "--out", tmp_path / "b2")
    assert saved.exit_code == 0, saved.output
    stored = json.loads((tmp_path / "b2" / "synth-smoke-cpu.json").read_text())
    assert stored["values"] and not any(v["check"] == "speed_ratio" for v in stored["values"])


@pytest.mark.parametrize(
    ("run", "named"),
    [({"profile": "default"}, "profile"), ({"suite": "other"}, "suite"), ({"device_class": "cuda"}, "device class")],
)
def test_gate_refuses_a_baseline_of_another_run(tmp_path, baseline, run, named):
    result = invoke("gate", make_run(tmp_path / "current", **run), "--baseline", baseline)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: refusing to gate") and named in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    if named == "device class":  # both classes named, the baseline's first
        assert "device class 'cpu' vs 'cuda'" in result.stderr


def test_gate_refuses_a_baseline_of_another_task_version(tmp_path, baseline):
    run = make_run(tmp_path / "current")
    meta = json.loads((run / "suite.json").read_text())
    (run / "suite.json").write_text(json.dumps({**meta, "task_version": "2"}))
    one_line_usage_error(invoke("gate", run, "--baseline", baseline), "refusing to gate",
                         "task 'synth' version 1, these results ran version 2")


def test_baseline_save_of_several_runs_writes_none_when_one_is_refused(tmp_path):
    root = tmp_path / "results"
    make_run(root, suite="complete")
    next((make_run(root, suite="partial") / "trials").glob("treat-1.json")).unlink()
    out = tmp_path / "baselines"
    out.mkdir()
    killed = out / ".complete-smoke-cpu.json.x1y2.tmp"  # what a save killed mid-write left
    killed.write_text("{")
    os.utime(killed, (0, 0))
    one_line_usage_error(invoke("baseline", "save", root, "--out", out), "partial/smoke", "no result")
    assert list(out.iterdir()) == [killed]  # the complete run's baseline was not written either
    saved = invoke("baseline", "save", root / "complete", "--out", out)
    assert saved.exit_code == 0, saved.output
    assert [p.name for p in out.iterdir()] == ["complete-smoke-cpu.json"]


def test_gate_without_a_matching_baseline_is_a_usage_error(tmp_path, baseline):
    result = gate(tmp_path, profile="default")
    assert result.exit_code == 2
    assert "no baseline" in result.stderr and "synth-default-cpu.json" in result.stderr


def test_gate_lists_metrics_missing_on_either_side(tmp_path, baseline):
    def edit(values):
        del values["treat"]["err"]
        values["treat"]["recall"] = 0.5

    METRICS["recall"] = {"direction": "higher", "unit": "", "kind": "quality"}
    try:
        result = gate(tmp_path, edit)
    finally:
        del METRICS["recall"]
    assert result.exit_code == 1
    assert "MISSING in this run (present in the baseline): quality treat err" in result.output
    assert "not in the baseline" in result.output and "recall" in result.output


def test_failed_trials_fail_the_gate_and_block_a_baseline(tmp_path, baseline):
    result = gate(tmp_path, failed=True)
    assert result.exit_code == 1
    assert "FAILED TRIAL treat seed=1: RuntimeError: boom" in result.output
    refused = invoke("baseline", "save", tmp_path / "current", "--out", tmp_path / "other")
    assert refused.exit_code == 2 and "failed trial" in refused.stderr


def test_one_baseline_file_for_a_root_with_several_runs_is_a_usage_error(tmp_path, baseline):
    root = tmp_path / "current"
    make_run(root)
    make_run(root, suite="other")
    result = invoke("gate", root, "--baseline", baseline)
    assert result.exit_code == 2 and "holds 2 runs" in result.stderr


# --- a gate that cannot pass vacuously -------------------------------------------------------


def one_line_usage_error(result, *fragments: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_baseline_save_refuses_a_run_without_trials(tmp_path):
    run = make_run(tmp_path / "empty")
    for trial in (run / "trials").glob("*.json"):
        trial.unlink()
    one_line_usage_error(invoke("baseline", "save", run, "--out", tmp_path / "b"), "no finished trials")
    assert not (tmp_path / "b").exists()


def test_baseline_save_refuses_an_incomplete_run(tmp_path):
    run = make_run(tmp_path / "partial")
    next((run / "trials").glob("treat-1.json")).unlink()
    one_line_usage_error(invoke("baseline", "save", run, "--out", tmp_path / "b"),
                         "1 of 4 declared trials have no result (first: treat seed=1)", "complete run")


def test_baseline_save_refuses_a_run_with_nothing_to_gate(tmp_path):
    def informational_only(values):
        for arm in values.values():
            for key in list(arm):
                if key != "note":
                    del arm[key]

    run = make_run(tmp_path / "info", informational_only)
    one_line_usage_error(invoke("baseline", "save", run, "--out", tmp_path / "b"), "no quality, memory or speed-ratio values")


def edit_baseline(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    stored = json.loads(path.read_text())
    edit(stored)
    path.write_text(json.dumps(stored))


def set_entry(index: int, **fields: Any):
    return lambda b: b["values"][index].update(fields)


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda b: b.update(values=[]), "values: expected a non-empty list of entries"),
        (lambda b: b.update(values={}), "values: expected a non-empty list of entries"),
        (set_entry(0, check="qualty"), "values[0].check: expected one of quality, memory, speed_ratio, contrast, "
                                       "claim, got 'qualty'"),
        (set_entry(1, value="fast"), "values[1].value: expected a finite number, got 'fast'"),
        (set_entry(1, value=None), "values[1].value: expected a finite number, got None"),
        (set_entry(2, metric=None), "values[2].metric: expected a non-empty string, got None"),
        (set_entry(0, direction="sideways"), "values[0].direction: expected one of higher, lower, none, got 'sideways'"),
        (set_entry(0, direction="none"), "values[0].direction: expected one of higher, lower, got 'none'"),
        (set_entry(0, seeds=[7]), "values[0].seeds: expected a non-empty list of the baseline's seeds, got [7]"),
        (set_entry(0, spread=-1.0), "values[0].spread: expected a non-negative number or null, got -1.0"),
        (set_entry(0, result="pass"), "values[0]: only a claim entry holds a 'result'"),
        (lambda b: b["values"][0].pop("metric"), "values[0].metric: missing (expected a non-empty string)"),
        (lambda b: b["values"].__setitem__(3, "garbage"), "values[3]: expected a mapping, got 'garbage'"),
        (lambda b: b["values"].append(dict(b["values"][0])), "appears twice"),
        (lambda b: b.update(seeds=[]), "seeds: expected a non-empty list of distinct integers, got []"),
        (lambda b: b.update(seeds=[1, 1]), "seeds: expected a non-empty list of distinct integers, got [1, 1]"),
        (lambda b: b.pop("profile"), "profile: missing (expected a non-empty string)"),
        (lambda b: b.update(trials=[{"arm": "treat"}]), "trials[0].point: missing (expected a string)"),
        (lambda b: b.update(trials=[{"arm": "treat", "point": "", "seed": 99}]),
         "trials: expected {arm, point, seed} entries with the baseline's seeds"),
        (lambda b: b.update(environment={"torch": 2}), "environment.torch: expected a string, got 2"),
        (lambda b: b.update(environment={"seed_batch_size": "2,3"}),
         "environment.seed_batch_size: expected sizes joined by ' | ' (e.g. '1 | 3'), got '2,3'"),
    ],
)
def test_a_malformed_baseline_is_a_usage_error_not_a_regression(tmp_path, baseline, edit, named):
    edit_baseline(baseline, edit)
    one_line_usage_error(gate(tmp_path), f"baseline {baseline} is malformed: ", named, "harness baseline save")


def test_a_baseline_that_is_not_json_is_a_usage_error(tmp_path, baseline):
    baseline.write_bytes(b"\xff\xfe not json")
    one_line_usage_error(gate(tmp_path), "cannot be read")


def test_unknown_check_subjects_fail_as_missing(tmp_path, baseline):
    def haunt(stored):
        entry = next(v for v in stored["values"] if v["check"] == "quality" and v["metric"] == "acc")
        entry["subject"] = "ghost"

    edit_baseline(baseline, haunt)
    result = gate(tmp_path)
    assert result.exit_code == 1
    assert "MISSING in this run (present in the baseline): quality ghost acc" in result.output


def test_a_gate_that_compares_nothing_fails(tmp_path, baseline):
    edit_baseline(baseline, lambda b: b.update(values=[v for v in b["values"] if v["check"] == "speed_ratio"]))
    result = gate(tmp_path, gate_section={"speed": False})  # speed ratios are not gated here: nothing is
    assert result.exit_code == 1
    assert "FAIL (0 of 0 checks" in result.output and "NO CHECKS" in result.output


def test_a_trial_missing_from_the_run_fails(tmp_path, baseline):
    run = make_run(tmp_path / "current")
    (run / "trials" / "treat-1.json").unlink()
    result = invoke("gate", run, "--baselines-dir", tmp_path / "baselines")
    assert result.exit_code == 1, result.output
    assert "MISSING TRIAL (in the baseline, not in this run): treat seed=1" in result.output
    assert "DROPPED" not in result.output  # named once, as the trial


def test_a_seed_whose_metric_is_nan_fails_the_gate(tmp_path, baseline):
    run = make_run(tmp_path / "current")
    path = run / "trials" / "treat-1.json"
    record = json.loads(path.read_text())
    record["metrics"]["acc"] = None  # NaN is stored as null
    path.write_text(json.dumps(record))
    result = invoke("gate", run, "--baselines-dir", tmp_path / "baselines")
    assert result.exit_code == 1, result.output
    assert "DROPPED SEED (no finite value in this run; not compared): quality treat acc: seed(s) 1" in result.output


def test_a_different_seed_set_is_refused(tmp_path, baseline):
    run = make_run(tmp_path / "current")
    suite_json = run / "suite.json"
    meta = json.loads(suite_json.read_text())
    meta["seeds"] = [0, 1, 2]
    suite_json.write_text(json.dumps(meta))
    one_line_usage_error(invoke("gate", run, "--baselines-dir", tmp_path / "baselines"),
                         "refusing to gate", "seeds [0, 1] vs [0, 1, 2]")


def test_a_different_sweep_is_refused(tmp_path, baseline):
    run = make_run(tmp_path / "current")
    suite_json = run / "suite.json"
    meta = json.loads(suite_json.read_text())
    meta["sweep"] = {"features": [4]}
    suite_json.write_text(json.dumps(meta))
    one_line_usage_error(invoke("gate", run, "--baselines-dir", tmp_path / "baselines"),
                         "refusing to gate", "sweep {} vs {'features': [4]}")


def test_a_baseline_written_before_trials_were_listed_still_catches_a_missing_trial(tmp_path, baseline):
    def old_format(stored):
        for key in ("trials", "sweep"):
            del stored[key]
        for entry in stored["values"]:
            del entry["seeds"]

    edit_baseline(baseline, old_format)
    assert gate(tmp_path).exit_code == 0
    run = make_run(tmp_path / "current")
    (run / "trials" / "control-0.json").unlink()
    result = invoke("gate", run, "--baselines-dir", tmp_path / "baselines")
    assert result.exit_code == 1 and "MISSING TRIAL (in the baseline, not in this run): control seed=0" in result.output


def test_the_committed_baselines_are_well_formed():
    from harness.gating.baseline import load_baseline

    committed = sorted((Path(__file__).parent.parent / "baselines").glob("*.json"))
    assert committed
    for path in committed:
        assert load_baseline(path).values


def test_the_contrast_is_gated_even_when_every_arm_stays_within_its_tolerance(tmp_path):
    """Both arms move within their own tolerance, but the mechanism's effect (treat - control)
    shrinks beyond the spread of the difference: the break a per-arm gate cannot see."""
    assert invoke("baseline", "save", make_run(tmp_path / "reference"), "--out", tmp_path / "baselines").exit_code == 0
    result = gate(tmp_path, lambda v: [shift("treat", "acc", -0.02)(v), shift("control", "acc", +0.02)(v)])
    assert result.exit_code == 1, result.output
    regressions = [line for line in result.output.splitlines() if "REGRESSION" in line]
    assert any(line.strip().startswith("REGRESSION contrast") and "treat-vs-control" in line for line in regressions)


def test_one_seed_falls_back_to_the_suite_tolerance(tmp_path):
    one = (0,)
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=one), "--out",
                  tmp_path / "baselines").exit_code == 0
    within = gate(tmp_path, shift("treat", "acc", -0.015), seeds=one)  # named tolerance for acc: 0.02
    assert within.exit_code == 0, within.output
    beyond = invoke("gate", make_run(tmp_path / "beyond", shift("treat", "acc", -0.03), seeds=one),
                    "--baselines-dir", tmp_path / "baselines")
    assert beyond.exit_code == 1 and "the suite's tolerance" in beyond.output


CLAIM = {"contrast": "treat-vs-control", "metric": "acc", "test": "superior"}


def test_a_claim_whose_result_changes_fails_the_gate(tmp_path):
    seeds = (0, 1, 2, 3, 4)
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=seeds, claims=[CLAIM]), "--out",
                  tmp_path / "baselines").exit_code == 0
    stored = json.loads((tmp_path / "baselines" / "synth-smoke-cpu.json").read_text())
    (claim,) = [v for v in stored["values"] if v["check"] == "claim"]
    assert claim["result"] == "pass"
    same = gate(tmp_path, seeds=seeds, claims=[CLAIM])
    assert same.exit_code == 0, same.output
    # treat falls to the control's level: the superiority claim no longer passes
    flipped = invoke("gate", make_run(tmp_path / "flipped", shift("treat", "acc", -0.05), seeds=seeds, claims=[CLAIM]),
                     "--baselines-dir", tmp_path / "baselines")
    assert flipped.exit_code == 1
    assert "REGRESSION claim" in flipped.output and "PASS ->" in flipped.output and "(changed)" in flipped.output



@pytest.mark.parametrize(("edit", "named"), [
    (lambda claim: claim.update(estimate="big"), ".estimate: expected a finite number or null, got 'big'"),
    (lambda claim: claim.update(standard_error=-0.1), ".standard_error: expected a non-negative number or null"),
    (lambda claim: claim.update(bounds=[0.0, None]), ".bounds[1]: expected a finite number, got None"),
    (lambda claim: claim.update(result=""), ".result: expected a non-empty string, got ''"),
    (lambda claim: claim.pop("result"), ": a claim entry needs its 'result'"),
])
def test_a_malformed_claim_entry_is_a_usage_error(tmp_path, edit, named):
    """A claim entry's evidence sits beside its value fields; each is checked as the others are."""
    seeds = (0, 1, 2)
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=seeds, claims=[CLAIM]), "--out",
                  tmp_path / "baselines").exit_code == 0
    path = tmp_path / "baselines" / "synth-smoke-cpu.json"
    index = [v["check"] for v in json.loads(path.read_text())["values"]].index("claim")
    edit_baseline(path, lambda b: edit(b["values"][index]))
    one_line_usage_error(gate(tmp_path, seeds=seeds, claims=[CLAIM]), f"is malformed: values[{index}]{named}")


def test_a_baseline_reads_back_as_it_was_written(tmp_path):
    """as_stored and from_stored are inverses on a saved baseline (claim evidence included), and every
    committed baseline writes back the file it was read from."""
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=(0, 1, 2), claims=[CLAIM]), "--out",
                  tmp_path / "baselines").exit_code == 0
    saved = load_baseline(tmp_path / "baselines" / "synth-smoke-cpu.json")
    assert any(v.claim is not None and v.claim.standard_error is not None for v in saved.values)
    assert Baseline.from_stored(as_stored(saved)) == saved
    older = {**as_stored(saved), "environment": {"torch": "2.1", "executor": "serial | pkg.a", "kept_as_written": "x"}}
    assert as_stored(Baseline.from_stored(older)) == older  # an environment key no field names is kept
    committed = sorted((Path(__file__).parents[1] / "baselines").glob("*.json"))
    assert committed
    for path in committed:
        assert canonical_json(as_stored(load_baseline(path))) == path.read_text(encoding="utf-8"), path

def test_timings_the_gate_ignores_do_not_move_the_claims_it_gates(tmp_path):
    """Holm ties a suite's claims together, so a speed claim's p-value moves the quality claims' adjusted
    p-values. Where the profile does not gate speed (timings at CI size are noise), the gate leaves speed
    claims out of the family: here acc's claim sits near the level (p about 0.02), and the speed claim
    flips from fail (baseline) to pass (current), which with one Holm family turns acc from
    INCONCLUSIVE into PASS."""
    seeds = (0, 1, 2, 3, 4)
    claims = [CLAIM, {"contrast": "treat-vs-control", "metric": "latency", "test": "ratio", "max": 1.0}]
    ungated = {"speed": False, "default_tolerance": 0.05, "tolerances": {"acc": 0.02}}
    near_level = shift("treat", "acc", 0.0412 - 0.05)  # paired differences 0.0412 - 0.01 * seed

    def slower(values):
        near_level(values)
        values["treat"]["latency"] = 2.4  # treat/control 1.2: the speed claim fails

    assert invoke("baseline", "save", make_run(tmp_path / "reference", slower, seeds=seeds, claims=claims,
                                               gate_section=ungated), "--out", tmp_path / "baselines").exit_code == 0
    stored = json.loads((tmp_path / "baselines" / "synth-smoke-cpu.json").read_text())
    assert [(v["metric"], v["result"]) for v in stored["values"] if v["check"] == "claim"] == [("acc", "pass")]
    faster = gate(tmp_path, near_level, seeds=seeds, claims=claims, gate_section=ungated)  # latency ratio 0.75
    assert faster.exit_code == 0, faster.output


SAVED_ON = {"cpu_model": "Intel Xeon A", "cpu_capability": "AVX512", "torch_threads": "2", "torch": "2.13.0+cpu"}


def _saved_elsewhere(tmp_path) -> Path:
    result = invoke("baseline", "save", make_run(tmp_path / "reference", environment=SAVED_ON), "--out",
                    tmp_path / "baselines")
    assert result.exit_code == 0, result.output
    return tmp_path / "baselines" / "synth-smoke-cpu.json"


def test_baseline_records_the_numeric_environment(tmp_path):
    stored = json.loads(_saved_elsewhere(tmp_path).read_text())
    assert stored["environment"] == {**SAVED_ON, "seed_batch_size": "1"}  # every seed trained alone


def test_a_regression_against_a_baseline_from_another_cpu_names_the_cause(tmp_path):
    _saved_elsewhere(tmp_path)
    other = {**SAVED_ON, "cpu_model": "AMD EPYC B", "cpu_capability": "AVX2", "torch_threads": "4"}
    result = gate(tmp_path, shift("treat", "acc", -0.2), environment=other)
    assert result.exit_code == 1
    cause = next(line for line in result.output.splitlines() if "POSSIBLE CAUSE" in line)
    assert "cpu_model 'Intel Xeon A' vs 'AMD EPYC B'" in cause and "cpu_capability 'AVX512' vs 'AVX2'" in cause
    assert "torch_threads '2' vs '4'" in cause and "torch '" not in cause  # only what differs


def test_same_machine_regressions_blame_nothing_else(tmp_path):
    _saved_elsewhere(tmp_path)
    result = gate(tmp_path, shift("treat", "acc", -0.2), environment=SAVED_ON)
    assert result.exit_code == 1 and "REGRESSION" in result.output
    assert "POSSIBLE CAUSE" not in result.output and "another machine" not in result.output


def test_a_pass_on_another_cpu_says_so_without_alarm(tmp_path):
    _saved_elsewhere(tmp_path)
    result = gate(tmp_path, environment={**SAVED_ON, "cpu_model": "AMD EPYC B"})
    assert result.exit_code == 0, result.output
    assert "note: baseline from another machine (cpu_model 'Intel Xeon A' vs 'AMD EPYC B')" in result.output


# --- what a saved baseline holds, and what a refused save says (mutation survivors of gating) ---------


def set_trial(run: Path, trial_id: str, *, environment: dict[str, str] | None = None,
              metrics: dict[str, Any] | None = None) -> None:
    """Edit one stored trial of ``run``: its environment keys, its metric values (None: not finite)."""
    path = run / "trials" / f"{trial_id}.json"
    record = json.loads(path.read_text())
    record["environment"].update(environment or {})
    record["metrics"].update(metrics or {})
    path.write_text(json.dumps(record))


MIXED_ENVIRONMENT = {"control-0": {"executor": "serial", "torch": "2.2"},
                     "control-1": {"executor": "serial", "torch": "2.2"},
                     "treat-0": {"executor": "ray", "torch": "2.1", "seed_batch": "0,1"},
                     "treat-1": {"executor": "ray", "torch": "2.1", "seed_batch": "0,1"}}


def mixed_run(root: Path) -> Path:
    """A run resumed under another executor, torch build and seed_batch: control alone, treat batched."""
    run = make_run(root)
    for trial_id, environment in MIXED_ENVIRONMENT.items():
        set_trial(run, trial_id, environment=environment)
    return run


def test_a_baseline_of_a_run_mixing_executors_seed_batches_and_builds_records_each_value_once(tmp_path):
    """Each environment value the run's trials recorded is kept, once and sorted ("a | b"); a seed trained
    alone is a batch of 1; a key no trial recorded is not written at all."""
    assert invoke("baseline", "save", mixed_run(tmp_path / "mixed"), "--out", tmp_path / "b").exit_code == 0
    stored = json.loads((tmp_path / "b" / "synth-smoke-cpu.json").read_text())
    assert stored["environment"] == {"executor": "ray | serial", "torch": "2.1 | 2.2", "seed_batch_size": "1 | 2"}
    batched = make_run(tmp_path / "batched")
    for trial_id in MIXED_ENVIRONMENT:
        set_trial(batched, trial_id, environment={"seed_batch": "0,1"})
    assert invoke("baseline", "save", batched, "--out", tmp_path / "b2").exit_code == 0
    assert json.loads((tmp_path / "b2" / "synth-smoke-cpu.json").read_text())["environment"] == \
        {"seed_batch_size": "2"}


def test_a_contrast_the_baseline_is_sure_of_must_keep_its_sign_however_wide_the_noise():
    """A sure difference (here 0.5 at a spread of 0.01) that now sits at 0 or across it fails, though the
    run's own spread (1.0) puts any of these values within the noise; one on the same side passes."""
    from harness.gating.values import CHECK_KINDS, GatedValue, Measured, _same_sign
    from harness.suite.schema import GateSpec

    def kept(baseline: float, now: float) -> bool:
        reference = GatedValue("contrast", "treat-vs-control", "", "acc", "higher", baseline, (0, 1), 0.01, None)
        measured = Measured(("treat", "control"), (0, 1), now, 1.0)
        return CHECK_KINDS["contrast"].judge(reference, measured, GateSpec()).passed

    assert kept(0.5, 0.9) and kept(-0.5, -0.1) and kept(0.5, 1e-300) and kept(-0.5, -1e-300)
    for baseline, now in ((0.5, -0.5), (0.5, 0.0), (0.5, -0.9), (-0.5, 0.5), (-0.5, 0.0), (-0.5, 0.9)):
        assert not kept(baseline, now), (baseline, now)
    # 0 has no sign: neither side of it is kept
    assert not any(_same_sign(x, 0.0) or _same_sign(0.0, x) for x in (-1.0, -1e-300, 0.0, 1e-300, 1.0))


def test_a_baseline_lists_its_declared_trials_and_stores_each_claims_result_beside_its_evidence(tmp_path):
    seeds = (0, 1, 2)
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=seeds, claims=[CLAIM]), "--out",
                  tmp_path / "baselines").exit_code == 0
    stored = json.loads((tmp_path / "baselines" / "synth-smoke-cpu.json").read_text())
    assert stored["trials"] == [{"arm": arm, "point": "", "seed": seed} for seed in seeds for arm in ("control", "treat")]
    (claim,) = [v for v in stored["values"] if v["check"] == "claim"]
    assert claim["result"] == "pass" and {"estimate", "standard_error", "boundary_t", "bounds"} <= set(claim)
    assert not any("result" in v for v in stored["values"] if v["check"] != "claim")


def test_a_save_removes_a_killed_saves_temporary_file_but_not_a_concurrent_saves(tmp_path):
    out = tmp_path / "baselines"
    out.mkdir()
    fresh = out / ".other-smoke-cpu.json.a1b2.tmp"  # another save, mid-write
    fresh.write_text("{")
    killed = out / ".synth-smoke-cpu.json.x1y2.tmp"
    killed.write_text("{")
    os.utime(killed, (0, 0))
    assert invoke("baseline", "save", make_run(tmp_path / "reference"), "--out", out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([fresh.name, "synth-smoke-cpu.json"])


def test_a_refused_save_says_in_full_why_a_baseline_needs_a_complete_run(tmp_path):
    def refusal(run: Path) -> str:
        return one_line_usage_error(invoke("baseline", "save", run, "--out", tmp_path / "b"))

    partial = make_run(tmp_path / "partial")
    (partial / "trials" / "treat-1.json").unlink()
    assert refusal(partial) == (f"error: {partial}: 1 of 4 declared trials have no result (first: treat seed=1); "
                                "a baseline must come from a complete run (rerun the suite to finish them)")
    undeclared = make_run(tmp_path / "undeclared")  # a suite.json without seeds declares no trial
    meta = json.loads((undeclared / "suite.json").read_text())
    (undeclared / "suite.json").write_text(json.dumps({**meta, "seeds": []}))
    assert refusal(undeclared) == (f"error: {undeclared}: 0 of 0 declared trials have no result; "
                                   "a baseline must come from a complete run (rerun the suite to finish them)")
    interrupted = make_run(tmp_path / "interrupted")
    (interrupted / "run.incomplete").write_text("")  # the run was killed before it stored every trial
    line = refusal(interrupted)
    assert line.startswith(f"error: INCOMPLETE RUN: the run of {interrupted} started ")
    assert line.endswith("; a baseline must come from a complete run")
    def informational_only(values):
        for arm in values.values():
            for key in [key for key in arm if key != "note"]:
                del arm[key]

    nothing = make_run(tmp_path / "info", informational_only)
    assert refusal(nothing) == (f"error: {nothing}: no quality, memory or speed-ratio values to gate; "
                                "a baseline of nothing would pass every run")
    assert not (tmp_path / "b").exists()


def test_a_baseline_that_is_not_json_says_what_the_parser_found(tmp_path, baseline):
    baseline.write_text('{"schema": 1,\n  "values": [}')
    line = one_line_usage_error(gate(tmp_path))
    assert line == (f"error: baseline {baseline} cannot be read (Expecting value: line 2 column 14 (char 27))")
