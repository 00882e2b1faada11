"""Premises against known truth: a failed premise makes exactly the claims that need it VACUOUS (naming
it) and leaves every other claim as it was; one that holds changes nothing; an open one keeps its
claims open (a sequential design adds seeds for it); exact metrics are checked value by value; a
premise in a suite file is checked at load (one line, file:line, exit 2)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from records import make_record

from harness import api
from harness.analysis.decide.claims import PASS, VACUOUS, evaluate_claims, last_look_premises
from harness.analysis.decide.premises import FAILS, HOLDS, OPEN, evaluate_premises
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.present.run_summary import SuiteSummary, render_summary
from harness.analysis.present.summary_json import summary_document
from harness.analysis.run_results import RunResults, index_results
from harness.core.stored_fields import as_stored
from harness.suite.stored import StoredSuite
from harness.cli import main
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError
from harness.tracking.claim_metrics import claim_tags

from calibration_task import sequential_suite

SEEDS = [0, 1, 2, 3, 4, 5]
METRICS = {
    "acc": {"direction": "higher", "unit": "fraction", "kind": "quality", "key": True},
    "signal": {"direction": "none", "unit": "", "kind": "info"},
    "budget/steps": {"direction": "none", "unit": "steps", "kind": "info"},
}


def run_results(premises: list[dict[str, Any]], signal: float = 0.95, steps: dict[str, list[int]] | None = None,
                points: tuple[int, ...] = (0,), seeds: list[int] = SEEDS, signal_at: dict[int, float] | None = None,
                ) -> RunResults:
    """Arms ``control``, ``treat`` (clearly better on acc) and ``other`` (clearly better too); two
    claims: treat-vs-control and other-vs-control, both superior on acc. ``treat`` reports a
    ``signal`` near ``signal`` (the premise's regime), each arm a ``budget/steps``."""
    rng = np.random.default_rng(7)
    steps = steps or {}
    sweep = {"width": list(points)} if len(points) > 1 else {}
    trials = []
    for width in points:
        level = (signal_at or {}).get(width, signal)
        point = {"width": width} if sweep else {}
        label = f"width={width}" if sweep else ""
        for n, seed in enumerate(seeds):
            base = 0.5 + 0.05 * rng.standard_normal()
            values = {"control": base, "treat": base + 0.2 + 0.01 * rng.standard_normal(),
                      "other": base + 0.1 + 0.01 * rng.standard_normal()}
            for arm, acc in values.items():
                metrics = {"acc": acc, "budget/steps": float(steps.get(arm, [900] * len(seeds))[n])}
                if arm == "treat":
                    metrics["signal"] = level + 0.01 * rng.standard_normal()
                trials.append(make_record(f"{arm}-{seed}-{label}", arm, seed, point=point, metrics=metrics))
    meta = {
        "suite": "prem", "profile": "default", "seeds": seeds, "sweep": sweep, "confidence": 0.95,
        "arms": {a: {"labels": [a]} for a in ("control", "treat", "other")},
        "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"},
                      {"treatment": "other", "control": "control", "name": "other-vs-control"}],
        "claims": [{"contrast": "treat-vs-control", "metric": "acc", "test": "superior"},
                   {"contrast": "other-vs-control", "metric": "acc", "test": "superior"}],
        "premises": premises, "metrics": METRICS,
    }
    return index_results(Path("."), StoredSuite.from_stored(meta), trials)


def by_contrast(results: RunResults) -> dict[tuple[str, str], Any]:
    return {(c.contrast, c.point): c for c in evaluate_claims(results)}


SIGNAL = {"name": "signal_present", "arm": "treat", "metric": "signal", "at_least": 0.9,
          "claims": ["treat-vs-control"]}


def test_a_premise_that_holds_changes_nothing():
    without = by_contrast(run_results([]))
    held = by_contrast(run_results([SIGNAL]))
    assert [r.status for r in without.values()] == [PASS, PASS]
    assert held == without
    assert [p.status for p in evaluate_premises(run_results([SIGNAL]))] == [HOLDS]


def test_a_failed_premise_makes_its_claims_vacuous_naming_it_and_leaves_the_others_as_they_were():
    without = by_contrast(run_results([], signal=0.5))
    failed = by_contrast(run_results([SIGNAL], signal=0.5))
    claim = failed[("treat-vs-control", "")]
    assert without[("treat-vs-control", "")].status == PASS  # the mechanism would have passed
    assert claim.status == VACUOUS and not claim.open
    assert claim.result_text.startswith("VACUOUS (premise signal_present not met: 0.5")
    assert ">= 0.9" in claim.result_text
    # the claim stays in the Holm family: the other claim's test and level are untouched
    assert failed[("other-vs-control", "")] == without[("other-vs-control", "")]
    assert claim.p_value == without[("treat-vs-control", "")].p_value


def test_a_premise_for_every_claim_by_default():
    premise = {k: v for k, v in SIGNAL.items() if k != "claims"}
    claims = by_contrast(run_results([premise], signal=0.5))
    assert {c.status for c in claims.values()} == {VACUOUS}


def test_an_open_premise_keeps_its_claims_open_until_seeds_settle_it():
    # at the bound: neither confidence bound clears 0.95
    results = run_results([{**SIGNAL, "at_least": 0.95}], signal=0.95)
    assert [p.status for p in evaluate_premises(results)] == [OPEN]
    claim = by_contrast(results)[("treat-vs-control", "")]
    assert claim.status == VACUOUS and claim.open and "not yet established" in claim.result_text


def test_an_at_most_premise_and_one_sided_bounds():
    holds = evaluate_premises(run_results([{**SIGNAL, "at_least": None, "at_most": 1.0}], signal=0.9))
    fails = evaluate_premises(run_results([{**SIGNAL, "at_least": None, "at_most": 0.5}], signal=0.9))
    assert [p.status for p in holds] == [HOLDS] and [p.status for p in fails] == [FAILS]
    premise = holds[0]
    assert premise.low < premise.estimate < premise.high <= 1.0


def test_a_premise_is_checked_at_each_sweep_point():
    results = run_results([SIGNAL], points=(1, 2), signal_at={1: 0.95, 2: 0.3})
    claims = by_contrast(results)
    assert claims[("treat-vs-control", "width=1")].status == PASS
    assert claims[("treat-vs-control", "width=2")].status == VACUOUS
    assert claims[("treat-vs-control", "width=2")].premise.point == "width=2"
    assert claims[("other-vs-control", "width=2")].status == PASS


EQUAL_BUDGET = {"name": "equal_budget", "contrast": "treat-vs-control", "metric": "budget/steps",
                "at_least": 0, "at_most": 0}


def test_an_exact_premise_is_checked_value_by_value():
    equal = evaluate_premises(run_results([EQUAL_BUDGET]))
    assert [(p.status, p.exact) for p in equal] == [(HOLDS, True)]
    # one seed of six trained 700 steps against 900: fails, however many seeds agree
    short = run_results([EQUAL_BUDGET], steps={"treat": [900, 900, 700, 900, 900, 900]})
    (premise,) = evaluate_premises(short)
    assert premise.status == FAILS and premise.low == -200 and premise.high == 0
    claim = by_contrast(short)[("treat-vs-control", "")]
    assert claim.status == VACUOUS and "premise equal_budget not met" in claim.result_text
    assert by_contrast(short)[("other-vs-control", "")].status == VACUOUS  # no claims list: every claim


def test_a_premise_without_data_is_open():
    results = run_results([{**SIGNAL, "arm": "control"}])  # control reports no signal
    assert [p.status for p in evaluate_premises(results)] == [OPEN]
    assert by_contrast(results)[("treat-vs-control", "")].open


def test_every_report_names_the_premise_that_made_a_claim_vacuous():
    analysis = analyse(run_results([SIGNAL], signal=0.5))
    expected = "VACUOUS (premise signal_present not met"
    assert expected in render_summary([SuiteSummary(analysis)])
    document = summary_document(analysis, plots=[])
    claim = next(c for c in document["claims"] if c["variant"] == "treat-vs-control")
    assert claim["result"] == VACUOUS and claim["result_text"].startswith(expected)
    assert claim["premise"]["name"] == "signal_present" and claim["premise"]["status"] == FAILS
    assert [p["status"] for p in document["premises"]] == [FAILS]
    json.dumps(document)  # serialisable
    tags = claim_tags(analysis)
    assert any(value.startswith(expected) for value in tags.values())
    assert sum(value == "PASS" for value in tags.values()) == 1


# -- the suite file ---------------------------------------------------------------------------------

SUITE = """\
suite: toyp
task: toy_task:ToyTask
seeds: [0, 1, 2]
params: {steps: 5}
arms:
  sgd: {momentum: 0.0}
  momentum: {momentum: 0.9}
contrasts:
  - {treatment: momentum, control: sgd}
claims:
  - {contrast: momentum-vs-sgd, metric: accuracy, test: superior}
premises:
  - PREMISE
"""


def suite_file(tmp_path: Path, premise: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE.replace("PREMISE", premise))
    return path


@pytest.mark.parametrize("premise, message", [
    ("{name: p, arm: nope, metric: accuracy, at_least: 0.5}", "premises[0].arm: unknown arm 'nope'"),
    ("{name: p, contrast: a-vs-b, metric: accuracy, at_least: 0.5}", "premises[0].contrast: unknown contrast 'a-vs-b'"),
    ("{name: p, arm: sgd, metric: accuracy, at_least: 0.5, claims: [sgd-vs-x]}",
     "premises[0].claims[0]: no claim on contrast 'sgd-vs-x'"),
    ("{name: p, arm: sgd, metric: nope, at_least: 0.5}", "declares no metric 'nope'"),
    ("{name: p, arm: sgd, metric: accuracy}", "needs 'at_least' and/or 'at_most'"),
    ("{name: p, arm: sgd, metric: accuracy, at_least: .nan}", "finite number"),
    ("{name: p, arm: sgd, metric: accuracy, at_most: .inf}", "finite number"),
    ("{name: p, arm: sgd, contrast: momentum-vs-sgd, metric: accuracy, at_most: 1}", "exactly one of 'arm'"),
    ("{name: 'a b', arm: sgd, metric: accuracy, at_most: 1}", "not a plain word"),
])
def test_a_bad_premise_is_one_line_naming_the_file_and_line(tmp_path, premise, message):
    path = suite_file(tmp_path, premise)
    with pytest.raises(SuiteError) as caught:
        load_suites(path)
    text = str(caught.value)
    assert text.startswith(f"{path}:13: ") and message in text and "\n" not in text


def test_harness_validate_lists_premises_and_refuses_a_bad_one_with_exit_2(tmp_path):
    good = suite_file(tmp_path, "{name: works, arm: sgd, metric: accuracy, at_least: 0.5}")
    done = CliRunner().invoke(main, ["validate", str(good)])
    assert done.exit_code == 0, done.output
    assert "premise works: arm sgd accuracy >= 0.5, for every claim" in done.output
    bad = suite_file(tmp_path, "{name: works, arm: nope, metric: accuracy, at_least: 0.5}")
    done = CliRunner().invoke(main, ["validate", str(bad)])
    assert done.exit_code == 2 and f"{bad}:13:" in done.output


SEQUENTIAL = sequential_suite("seqp", {"b": 3.0}, max_seeds=16)
# b's score is N(3, 1): its lower bound at the look's spent level clears 2 only after the claim is decided
REGIME = "premises:\n  - {name: regime, arm: b, metric: score, at_least: 1.9}\n"


def test_a_sequential_run_adds_seeds_while_a_premise_is_open(tmp_path):
    path = tmp_path / "seqp.yaml"
    path.write_text(SEQUENTIAL + REGIME)
    assert api.run(path, api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1)).exit_code == 0
    document = json.loads((tmp_path / "r" / "seqp" / "default" / "report" / "summary.json").read_text())
    (claim,) = document["claims"]
    # the claim was decided at an earlier look; the run went on only for the premise, which now holds
    assert claim["result"] == PASS and claim["premise"] is None
    assert document["sequential"]["seeds_used"] > claim["n"]
    assert document["sequential"]["seeds_used"] < 16
    assert [p["status"] for p in document["premises"]] == [HOLDS]


VALIDITY = """\
suite: seqv
task: calibration_task:CalibrationTask
seeds: [0, 1, 2]
sequential: {max_seeds: 12}
arms:
  a: {tag: a, shared_sd: 0.1}
  b: {tag: b, shared_sd: 0.1, effect: 4.0}
  p: {tag: p, shared_sd: 0.1, effect: 2.0}
contrasts:
  - {treatment: b, control: a}
  - {treatment: p, control: a}
validity: {control: a, positive: p, metric: score}
claims:
  - {contrast: b-vs-a, metric: score, test: superior}
"""


def test_a_sequential_run_adds_seeds_while_validity_is_undetermined(tmp_path):
    """The positive control's effect (2 sd) needs more seeds to show than the claim's (4 sd): the run goes
    on past the claim's decision until the suite is shown valid, instead of stopping INVALID or undetermined."""
    path = tmp_path / "seqv.yaml"
    path.write_text(VALIDITY)
    assert api.run(path, api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1)).exit_code == 0
    document = json.loads((tmp_path / "r" / "seqv" / "default" / "report" / "summary.json").read_text())
    (claim,) = document["claims"]
    assert claim["result"] == PASS and document["validity"]["status"] == "valid"
    assert claim["n"] < document["sequential"]["seeds_used"] < 12


def test_a_premises_line_names_what_it_read_and_where():
    """'premise <name> <state>: <figures>, <requirement> (<arm or contrast> <metric>[ at <point>])'."""
    swept = evaluate_premises(run_results([SIGNAL], points=(1, 2), signal_at={1: 0.95, 2: 0.3}))
    assert [p.text() for p in swept] == [
        "premise signal_present holds: 0.9508 [0.9404, 0.9612], needs >= 0.9 (treat signal at width=1)",
        "premise signal_present not met: 0.2971 [0.2932, 0.301], needs >= 0.9 (treat signal at width=2)"]
    plain = evaluate_premises(run_results([SIGNAL, EQUAL_BUDGET], signal=0.5))
    assert [p.text() for p in plain] == [
        "premise signal_present not met: 0.5008 [0.4904, 0.5112], needs >= 0.9 (treat signal)",
        "premise equal_budget holds: 0 (exact: 0), needs in [0, 0] (treat-vs-control budget/steps)"]


def test_a_premise_with_nothing_to_read_is_open_naming_the_arm_or_contrast_and_the_metric():
    """control reports no signal, and no contrast pairs it: one open result per premise, with no figures and
    the reason in their place."""
    on_arm = {**SIGNAL, "arm": "control"}
    on_contrast = {k: v for k, v in SIGNAL.items() if k != "arm"} | {"name": "paired_signal",
                                                                    "contrast": "treat-vs-control"}
    arm, contrast = evaluate_premises(run_results([on_arm, on_contrast]))
    for result, subject in ((arm, "control"), (contrast, "treat-vs-control")):
        assert (result.status, result.subject, result.key, result.n) == (OPEN, subject, "signal", 0)
        assert (result.estimate, result.low, result.high, result.exact) == (None, None, None, False)
        assert result.detail == f"{subject} has no finished trials reporting signal"
        assert result.text() == (f"premise {result.name} not yet established: {subject} has no finished trials "
                                 f"reporting signal, needs >= 0.9 ({subject} signal)")


def test_a_claim_answers_to_its_failed_premise_before_an_open_one():
    """Both premises bind treat-vs-control: the open one (signal at its bound) is listed first, but the claim
    is VACUOUS for the one that failed (a signal above 2 is out of reach), and is not left open."""
    open_one = {**SIGNAL, "name": "signal_settled", "at_least": 0.95}
    failed = {**SIGNAL, "name": "signal_strong", "at_least": 2.0}
    results = run_results([open_one, failed], signal=0.95)
    assert [p.status for p in evaluate_premises(results)] == [OPEN, FAILS]
    claim = by_contrast(results)[("treat-vs-control", "")]
    assert claim.status == VACUOUS and not claim.open
    assert claim.premise.name == "signal_strong"
    assert claim.result_text.startswith("VACUOUS (premise signal_strong not met")


def test_a_sequential_run_stopped_between_looks_reads_its_premises_on_the_last_looks_seeds():
    """Seeds past the last look (a run interrupted before its next look) are not read: the premises, like the
    claims, stand on the seeds of the last look taken."""
    results = run_results([SIGNAL], seeds=SEEDS[:5])
    stored = {**as_stored(results.stored), "sequential": {"first": 3, "max_seeds": 9, "batch": 3, "futility": None}}
    sequential = index_results(Path("."), StoredSuite.from_stored(stored), results.finished)
    (premise,) = last_look_premises(sequential)
    assert premise.n == 3
    (fixed,) = last_look_premises(results)
    assert fixed.n == 5
