"""Every premise of routing.yaml can fail: on a testbed degraded in the one way the premise guards against,
the figure it bounds lands on the failing side of its bound, and on the healthy one it holds.
tests/test_routing_degraded_testbed.py does this for routing_needle.yaml; this file covers routing.yaml,
on the suite's design at its smoke profile's size (timings off: no premise reads one), each trial run
through that file's helper, on its seed (7101, outside every confirmatory seed):

- ``precision_marks_asked_slot`` (precision's asked_slot_auroc >= 0.9): a backbone trained without the
  precision energy (``energy_weight`` 0), whose 1/Pi marks the asked slot far less well;
- ``gold_document_answers`` (mean_pool's acc_oracle >= 0.1): a reading path that does not answer from the
  gold document. The suite's own reader, the backbone's MSA layers, learns to read memory only late
  (acc_oracle 0.975 at the default's 800 backbone steps, docs/findings/routing.md; 0.06 at 200 on one seed,
  a budget beyond this file's already): at the smoke profile's 40 steps it answers no better than without
  memory, the degraded side. The healthy side at that budget changes one param, the reader: the
  constructed reader (``reader: lookup``), which reads the gold document itself;
- ``equal_budget*``: the treatment's router trained for half the steps of its control's.

The premises' own arithmetic is tested with synthetic per-seed figures at the end. routing.yaml's validity
row (oracle_tokens over mean_pool, random not) is read healthy and degraded in
tests/test_routing_validity_control.py, on synthetic figures: it needs two seeds or more, each with its own
backbone, beyond this file's budget.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_routing_degraded_testbed import _metrics
from test_routing_validity_control import routing_results

from harness.analysis.decide.claims import last_look_premises
from harness.analysis.decide.premises import FAILS, HOLDS
from harness.suite.loader import load_suites
from harness.suite.points import sweep_points
from harness.tasks.param_paths import layered

(SUITE,) = load_suites(Path(__file__).resolve().parents[1] / "suites" / "routing.yaml", profile="smoke")
PREMISES = {premise.name: premise.model_dump(exclude_none=True) for premise in SUITE.premises}
BUDGETS = sorted(name for name, premise in PREMISES.items() if premise["metric"].startswith("budget/"))
ROUTERS = ("precision", "mean_pool", "oracle_masked", "router_projector")


def _testbed(**change: Any) -> dict[str, Any]:
    """The suite's params at its smoke profile's size and first sweep point, timings off, with ``change``."""
    return layered(SUITE.params, sweep_points(SUITE.sweep)[0], {"measure_speed": False}, change)


def _status(premise: dict[str, Any], values: dict[str, list[float]]) -> str:
    """The decision code's reading of ``premise`` on per-seed figures by arm."""
    arms = {arm: {premise["metric"]: figures} for arm, figures in values.items()}
    contrasts = [premise["contrast"]] if "contrast" in premise else []
    (result,) = last_look_premises(routing_results(arms, premises=[premise], contrasts=contrasts))
    return result.status


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("routing-testbed")


@pytest.fixture(scope="module")
def smoke(root: Path) -> dict[str, dict[str, float]]:
    """Each router the budget premises name, on the suite's smoke testbed (one backbone, cached)."""
    return {router: _metrics(_testbed(), router, root) for router in ROUTERS}


@pytest.fixture(scope="module")
def fewer_steps(root: Path) -> dict[str, dict[str, float]]:
    """Each budget premise's treatment, its router trained for half the suite's steps."""
    steps = SUITE.params["router_training.steps"] // 2
    treatments = {PREMISES[name]["contrast"].split("-vs-")[0] for name in BUDGETS}
    return {router: _metrics(_testbed(**{"router_training.steps": steps}), router, root) for router in treatments}


@pytest.mark.integration  # trains a backbone and routers
def test_the_premises_read_figures_no_router_changes(smoke: dict[str, dict[str, float]]) -> None:
    """precision_marks_asked_slot names the mechanism's arm, but reads the backbone's precision, not the
    router's result: every arm of a seed reports the same figure (as it does gold_document_answers')."""
    for name in ("precision_marks_asked_slot", "gold_document_answers"):
        metric = PREMISES[name]["metric"]
        assert len({figures[metric] for figures in smoke.values()}) == 1, name


@pytest.mark.integration  # trains a backbone and a router
def test_precision_marks_asked_slot_holds_on_the_suites_backbone(smoke: dict[str, dict[str, float]]) -> None:
    premise = PREMISES["precision_marks_asked_slot"]
    assert smoke[premise["arm"]][premise["metric"]] >= premise["at_least"]


@pytest.mark.integration  # trains a backbone and a router
def test_precision_marks_asked_slot_fails_for_a_backbone_without_the_precision_energy(root: Path) -> None:
    premise = PREMISES["precision_marks_asked_slot"]
    figures = _metrics(_testbed(energy_weight=0.0), premise["arm"], root)
    assert figures[premise["metric"]] < premise["at_least"]


@pytest.mark.integration  # trains a backbone and a router
def test_gold_document_answers_fails_where_the_backbone_has_not_learned_to_read(
        smoke: dict[str, dict[str, float]]) -> None:
    premise = PREMISES["gold_document_answers"]
    assert smoke[premise["arm"]][premise["metric"]] < premise["at_least"]


@pytest.mark.integration  # trains a backbone and a router
def test_gold_document_answers_holds_where_a_reader_reads_the_gold_document(root: Path) -> None:
    premise = PREMISES["gold_document_answers"]
    figures = _metrics(_testbed(reader="lookup"), premise["arm"], root)
    assert figures[premise["metric"]] >= premise["at_least"]


@pytest.mark.integration  # trains a backbone and routers
@pytest.mark.parametrize("name", BUDGETS)
def test_an_equal_budget_holds_and_fails_where_the_treatment_trains_fewer_steps(
        smoke: dict[str, dict[str, float]], fewer_steps: dict[str, dict[str, float]], name: str) -> None:
    premise = PREMISES[name]
    treatment, control = premise["contrast"].split("-vs-")
    control_figures = [smoke[control][premise["metric"]]]
    assert _status(premise, {treatment: [smoke[treatment][premise["metric"]]], control: control_figures}) == HOLDS
    assert _status(premise, {treatment: [fewer_steps[treatment][premise["metric"]]], control: control_figures}) == FAILS


def _synthetic_status(name: str, values: list[float]) -> str:
    """``values`` as the arm's figures, or as the contrast's paired differences (a control at 0)."""
    premise = PREMISES[name]
    if "contrast" in premise:
        treatment, control = premise["contrast"].split("-vs-")
        return _status(premise, {treatment: values, control: [0.0] * len(values)})
    return _status(premise, {premise["arm"]: values})


@pytest.mark.parametrize(("name", "healthy", "degraded"), [
    ("precision_marks_asked_slot", [0.997, 0.999, 1.0, 0.998], [0.72, 0.70, 0.75, 0.71]),
    ("gold_document_answers", [0.97, 0.98, 0.975, 0.98], [0.06, 0.07, 0.05, 0.06]),
    *((name, [0.0, 0.0, 0.0, 0.0], [-10.0, -10.0, -10.0, -10.0]) for name in BUDGETS),
])
def test_each_premise_holds_on_the_healthy_side_and_fails_on_the_degraded_one(
        name: str, healthy: list[float], degraded: list[float]) -> None:
    assert _synthetic_status(name, healthy) == HOLDS
    assert _synthetic_status(name, degraded) == FAILS


def test_every_premise_of_the_suite_is_covered_here() -> None:
    assert set(PREMISES) == {"precision_marks_asked_slot", "gold_document_answers", *BUDGETS}
    assert len(BUDGETS) == 3
