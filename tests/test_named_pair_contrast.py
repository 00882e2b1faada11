"""A suite may name the same treatment/control pair twice (one claim per contrast and metric, so a second
test of the pair, e.g. non-inferiority beside superiority, gets a contrast of its own name): each claim is
read once, under the name it gives, and the baseline gates the pair's values once."""
from __future__ import annotations

import json
from pathlib import Path

from test_gating_baseline import invoke, make_run

from harness.analysis.decide.claims import evaluate_claims
from harness.analysis.run_results import load_results

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
