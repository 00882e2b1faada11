"""Both routing suites' validity controls can fail: each suite's declared validity, read on recall@1
with the task's own metric declarations, is VALID when its learned positive control routes well,
not VALID when that control is degraded to the primary control's level, and never named as a
control that cannot fail (the by-construction oracle it replaced is)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from records import make_record

from harness.analysis.decide.verdicts import INVALID, UNDETERMINED, VALID, evaluate_validity
from harness.analysis.run_results import RunResults, index_results
from harness.core.stored_fields import as_stored
from harness.suite.stored import StoredSuite
from harness.tasks.routing.task import RoutingTask

SUITES = Path(__file__).resolve().parents[1] / "suites"
MEAN_POOL = [0.13, 0.14, 0.16, 0.12]
RANDOM = [0.008, 0.012, 0.0, 0.004]


def routing_results(arms: dict[str, dict[str, list[float]]], premises: list | None = None,
                    validity: dict | None = None, contrasts: list[str] = ()) -> RunResults:
    """A stored routing run of these per-seed values, declared with the routing task's metrics (and the
    ``contrasts``, named treatment-vs-control)."""
    seeds = list(range(len(next(iter(next(iter(arms.values())).values())))))
    trials = [make_record(f"{arm}-{seed}", arm, seed, metrics={name: values[seed] for name, values in by_metric.items()})
              for arm, by_metric in arms.items() for seed in seeds]
    meta = {"suite": "routing", "profile": "default", "seeds": seeds, "sweep": {},
            "metrics": {metric.name: as_stored(metric) for metric in RoutingTask.metrics},
            "arms": {arm: {"labels": [arm]} for arm in arms},
            "contrasts": [{"name": name, "treatment": name.split("-vs-")[0], "control": name.split("-vs-")[1],
                           "margins": {}} for name in contrasts],
            "claims": [],
            "sequential": None, "premises": premises or [], "validity": validity}
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def declared_validity(suite: str) -> dict:
    return yaml.safe_load((SUITES / suite).read_text())["validity"]


def _validity(suite: str, positive: list[float]):
    validity = declared_validity(suite)
    arms = {validity["control"]: {"recall@1": MEAN_POOL}, validity["positive"]: {"recall@1": positive},
            validity["negative"]: {"recall@1": RANDOM}}
    return evaluate_validity(routing_results(arms, validity=validity))


@pytest.mark.parametrize("suite", ["routing.yaml", "routing_needle.yaml"])
def test_the_positive_control_is_a_learned_router_not_the_oracle(suite: str) -> None:
    validity = declared_validity(suite)
    declared = yaml.safe_load((SUITES / suite).read_text())["arms"][validity["positive"]]
    assert validity["positive"] != "oracle" and declared["router"] in ("oracle_masked", "oracle_tokens")


@pytest.mark.parametrize("suite", ["routing.yaml", "routing_needle.yaml"])
def test_a_routing_positive_control_reads_valid_and_can_fail(suite: str) -> None:
    healthy = _validity(suite, [0.93, 0.91, 0.93, 0.94])
    assert healthy.status == VALID
    assert not any(check.cannot_fail for check in healthy.checks)
    degraded = _validity(suite, [0.14, 0.12, 0.15, 0.13])  # routes no better than mean pooling
    assert degraded.status in (INVALID, UNDETERMINED)
    positive = [check for check in degraded.checks if check.role == "positive"]
    assert positive and all(check.ok is not True for check in positive)


def test_the_by_construction_oracle_is_what_the_validity_names_as_unable_to_fail() -> None:
    oracle = _validity("routing_needle.yaml", [1.0, 1.0, 1.0, 1.0])
    assert any(check.cannot_fail for check in oracle.checks)
