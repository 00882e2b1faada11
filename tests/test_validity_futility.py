"""A positive control that cannot plausibly be shown to beat its control by ``max_seeds`` stops the
sequential run as INVALID (positive control too weak), by the conditional-power rule claims stop by,
instead of adding seeds up to ``max_seeds`` and ending UNDETERMINED."""
from __future__ import annotations

import json

from calibration_task import sequential_suite
from fault_injection import harness_here
from test_spent_levels import run_of

from harness.analysis.decide.verdicts import INVALID, UNDETERMINED, evaluate_validity
from harness.analysis.present.run_summary import validity_text

CONTROL = [0.5 + 0.01 * s for s in range(6)]
FLAT = [c + d for c, d in zip(CONTROL, (0.001, -0.002, 0.0015, -0.001, 0.0005, 0.0))]
CLEAR = [c + d for c, d in zip(CONTROL, (0.03, 0.05, 0.01, 0.04, 0.02, 0.035))]
VALIDITY = {"control": "control", "positive": "positive", "metric": "score"}
DESIGN = {"first": 3, "max_seeds": 12, "futility": 0.1}


def validity_of(positive: list[float], sequential: dict | None):
    arms = {"control": {"score": CONTROL}, "treat": {"score": CONTROL}, "positive": {"score": positive}}
    return evaluate_validity(run_of(arms, sequential=sequential, validity=VALIDITY))


def test_a_positive_control_with_no_effect_is_invalid_as_too_weak_with_its_figures():
    validity = validity_of(FLAT, DESIGN)
    assert validity.status == INVALID
    (check,) = validity.checks
    assert check.ok is False and "conditional power 0.00 < 0.1 to beat it by 12 seeds" in check.too_weak
    text = validity_text(validity)
    assert text.startswith("INVALID (positive control too weak: positive ") and "at n=6" in text


def test_a_positive_control_that_can_still_be_shown_stays_undetermined():
    assert validity_of(CLEAR, DESIGN).status == UNDETERMINED  # t = 5 at n=6: likely shown by 12 seeds


def test_without_a_later_look_the_rule_does_not_apply():
    assert validity_of(FLAT, {"first": 3, "max_seeds": 12, "futility": None}).status == UNDETERMINED
    assert validity_of(FLAT, {"first": 3, "max_seeds": 6, "futility": 0.1}).status == UNDETERMINED  # the last look


def test_a_sequential_run_stops_at_the_first_look_its_positive_control_is_too_weak(tmp_path):
    text = sequential_suite("weak", {"b": 0.05, "p": 0.0}, max_seeds=16)
    suite = tmp_path / "weak.yaml"
    suite.write_text(text.replace("contrasts:\n", "validity: {control: a, positive: p, metric: score}\ncontrasts:\n"))
    done = harness_here("run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "r" / "weak" / "default" / "report" / "summary.json").read_text())
    assert summary["seeds"] == [0, 1, 2] and summary["validity"]["status"] == INVALID
    assert "weak: validity INVALID at 3 seeds (positive control too weak" in done.stderr + done.stdout
    assert "validity: INVALID, the claims below do not count: positive control too weak: 'p' over 'a'" in done.stdout
    summary_md = (tmp_path / "r" / "summary.md").read_text()
    assert "validity INVALID (positive control too weak: p " in summary_md


# -- what a validity section says about itself ----------------------------------------------------------

from pathlib import Path  # noqa: E402

from records import make_record  # noqa: E402

from harness.analysis.decide.run_decisions import analyse  # noqa: E402
from harness.analysis.decide.verdicts import UNDECLARED, VALID  # noqa: E402
from harness.analysis.present.summary_json import summary_document  # noqa: E402
from harness.analysis.run_results import index_results  # noqa: E402
from harness.suite.stored import StoredSuite  # noqa: E402


def test_a_suite_without_validity_controls_is_undeclared_with_no_metric_or_control_and_its_claims_count():
    run = run_of({"control": {"score": CONTROL}, "treat": {"score": CLEAR}})
    undeclared = evaluate_validity(run)
    assert (undeclared.status, undeclared.metric, undeclared.control, undeclared.checks, undeclared.problems) == (
        UNDECLARED, "", "", (), ())
    assert undeclared.claims_count
    stored = summary_document(analyse(run), plots=[])["validity"]
    assert (stored["status"], stored["metric"], stored["control"]) == (UNDECLARED, "", "")


def test_a_declared_validity_names_its_metric_and_control():
    validity = validity_of([c + 0.5 for c in CONTROL], None)
    assert (validity.status, validity.metric, validity.control, validity.problems) == (VALID, "score", "control", ())


def test_a_validity_metric_without_a_direction_is_invalid_saying_so():
    arms = {"control": {"score": CONTROL, "note": CONTROL}, "positive": {"score": CLEAR, "note": CLEAR}}
    validity = evaluate_validity(run_of(arms, validity={**VALIDITY, "metric": "note"}))
    assert validity.status == INVALID and validity.checks == ()
    assert validity.problems == (
        "validity metric 'note' has no direction (higher/lower), so nothing can beat anything",)


def test_a_swept_validity_control_is_invalid_naming_its_variants():
    """The control must be one arm label: a control swept over two settings cannot be beaten unambiguously."""
    labels = {"control@lr=0.1": ("control", CONTROL), "control@lr=1": ("control", CONTROL),
              "positive": ("positive", CLEAR)}
    trials = [make_record(f"{label}-{s}", arm, s, arm_label=label, metrics={"score": values[s]})
              for label, (arm, values) in labels.items() for s in range(6)]
    meta = {"suite": "swept", "profile": "default", "seeds": list(range(6)), "sweep": {},
            "metrics": {"score": {"direction": "higher", "unit": "", "kind": "quality"}},
            "arms": {"control": {"labels": ["control@lr=0.1", "control@lr=1"]}, "positive": {"labels": ["positive"]}},
            "contrasts": [{"treatment": "positive", "control": "control", "name": "positive-vs-control"}],
            "claims": [], "validity": VALIDITY}
    validity = evaluate_validity(index_results(Path("."), StoredSuite.from_stored(meta), trials))
    assert validity.status == INVALID and validity.checks == ()
    assert validity.problems == (
        "validity control 'control' must have exactly one variant, found ['control@lr=0.1', 'control@lr=1']",)
