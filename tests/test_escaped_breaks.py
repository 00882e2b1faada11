"""What five realistic breaks got past both the tests and the CI gate, each now caught here:
Benjamini-Hochberg without its running minimum, the sharp router's exponent taken as its temperature,
claim checks skipped where a profile does not gate speed, claims of an undetermined suite counted in
the summary's totals, and a claim that flipped to FAIL missing from the gate's Markdown."""
from __future__ import annotations

import json

import pytest
import torch
from scipy.stats import false_discovery_control

from harness.analysis.decide.run_decisions import analyse
from harness.analysis.decide.verdicts import UNDETERMINED
from harness.analysis.present.run_summary import SuiteSummary, render_summary
from harness.analysis.run_results import load_results
from harness.analysis.stats.paired_stats import benjamini_hochberg
from harness.services.seeding import torch_stream
from harness.tasks.routing.backbone import Backbone, build_model
from harness.tasks.routing.pooling import pooling_weights
from harness.tasks.routing.routers import install_router
from harness.tasks.routing.task import RoutingTask, backbone_spec, layout_of
from test_gating_baseline import CLAIM, invoke, make_run, shift
from test_gating_report import table_rows
from test_routing_task import TINY
from test_summary_forest import toy_run


@pytest.mark.parametrize("p_values", [
    [0.01, 0.04, 0.045],  # the middle q is the running minimum (0.045), not 0.04 * 3 / 2 = 0.06
    [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216],
    [0.5, 0.2, 0.03, 0.03, 0.9],
])
def test_benjamini_hochberg_takes_the_running_minimum(p_values):
    assert benjamini_hochberg(p_values) == pytest.approx(list(false_discovery_control(p_values)))


@pytest.mark.parametrize("temperature", [0.25, 0.5])
def test_the_sharp_router_raises_the_seed_weights_to_one_over_its_temperature(temperature):
    params = RoutingTask.validate_params(TINY)
    spec = backbone_spec(params, layout_of(params))
    routers = {}
    for arm in ("precision", "precision_sharp"):
        backbone = Backbone(build_model(spec, torch_stream(5, "backbone-init"), torch.device("cpu")), spec.msa, 0.0)
        routers[arm] = install_router(arm, backbone, sharp_temperature=temperature)
    h = torch.randn(3, 7, routers["precision"].d_model)
    t = torch.tensor([1, 5, 9])
    route = torch.ones(3, 7, dtype=torch.bool)
    with torch.no_grad():
        seed = pooling_weights(routers["precision"], h, t, route)
        sharp = pooling_weights(routers["precision_sharp"], h, t, route)
    power = seed ** (1.0 / temperature)
    torch.testing.assert_close(sharp, power / power.sum(dim=1, keepdim=True))


def test_a_profile_that_does_not_gate_speed_still_gates_its_claims(tmp_path):
    seeds = (0, 1, 2, 3, 4)
    ungated = {"speed": False, "default_tolerance": 0.05, "tolerances": {"acc": 0.02}}
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=seeds, claims=[CLAIM], gate_section=ungated),
                  "--out", tmp_path / "baselines").exit_code == 0
    flipped = invoke("gate", make_run(tmp_path / "flipped", shift("treat", "acc", -0.05), seeds=seeds, claims=[CLAIM],
                                      gate_section=ungated), "--baselines-dir", tmp_path / "baselines")
    assert flipped.exit_code == 1
    assert "REGRESSION claim" in flipped.output
    stored = json.loads((tmp_path / "baselines" / "synth-smoke-cpu.json").read_text())
    gated = [v for v in stored["values"] if v["check"] != "speed_ratio"]
    checks = int(flipped.output.split(" checks within tolerance")[0].rsplit(" of ", 1)[1])
    assert checks == len(gated)  # every value the profile gates is checked: none skipped quietly


def test_a_claim_that_flips_to_fail_is_a_row_of_the_gate_markdown(tmp_path):
    seeds = (0, 1, 2, 3, 4)
    assert invoke("baseline", "save", make_run(tmp_path / "reference", seeds=seeds, claims=[CLAIM]), "--out",
                  tmp_path / "baselines").exit_code == 0
    flipped = invoke("gate", make_run(tmp_path / "flipped", shift("treat", "acc", -0.05), seeds=seeds, claims=[CLAIM]),
                     "--baselines-dir", tmp_path / "baselines")
    markdown = flipped.output[flipped.output.index("## harness gate"):]
    claims = [row for row in table_rows(markdown) if row[1] == "claim"]
    assert len(claims) == 1 and claims[0][8] == "FAIL" and claims[0][2] == "treat-vs-control" and claims[0][4] == "acc"
    assert "PASS ->" in claims[0][9]


def test_claims_of_a_suite_whose_validity_is_undetermined_are_not_counted(tmp_path):
    run_dir = toy_run(tmp_path)
    for path in (run_dir / "trials").glob("*.json"):
        if json.loads(path.read_text())["seed"] != 0:
            path.unlink()
    analysis = analyse(load_results(run_dir))
    assert analysis.validity.status == UNDETERMINED
    text = render_summary([SuiteSummary(analysis)])
    totals = text.splitlines()[-1]  # the checks' line; no claim here asks about a mechanism
    assert f"(+{len(analysis.claims)} not counted: suite not valid)" in totals
    assert totals.startswith("**Totals:** checks (bookkeeping, regimes) 0 PASS, 0 FAIL, 0 INCONCLUSIVE, 0 VACUOUS")
    assert "; suites valid 0 of 1;" in totals  # an undetermined suite is not a valid one
