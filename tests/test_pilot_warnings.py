"""``validate`` and ``run --pilot``: before anything runs, one warning line per claim whose minimum detectable
effect at the design's most seeds, at a pilot's spread, is more than twice its margin
(harness.analysis.pilot_warnings). Pilots are results folders written by hand; in process."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from fault_injection import harness_here
from harness import api
from harness.analysis.pilot_warnings import PilotError, margin_warnings, pilot_claims
from harness.analysis.stats.paired_stats import detectable_effect
from harness.store import RunFolder
from records import make_record

MARGIN = 0.1
SUITE = f"""suite: seq
task: calibration_task:CalibrationTask
seeds: [0, 1, 2]
sequential: {{max_seeds: 8}}
arms:
  control: {{tag: a}}
  treat: {{tag: b}}
  weak: {{tag: c}}
contrasts:
  - {{treatment: treat, control: control}}
  - {{treatment: control, control: weak}}
claims:
  - {{contrast: treat-vs-control, metric: score, test: non_inferior, margin: {MARGIN}, reference: control-vs-weak}}
  - {{contrast: control-vs-weak, metric: score, test: superior}}
"""


def write_pilot(root: Path, spread: float) -> Path:
    """A 4-seed pilot of the suite: treat - control differences of sd ``spread`` around 0, and a weak arm
    5 below the control (the reference effect, clearly established)."""
    differences = np.random.default_rng(3).standard_normal(4)
    differences = spread * (differences - differences.mean()) / differences.std(ddof=1)
    meta = {
        "suite": "seq", "profile": "smoke", "seeds": [0, 1, 2, 3],
        "arms": {a: {"labels": [a]} for a in ("control", "treat", "weak")},
        "contrasts": [{"treatment": "treat", "control": "control", "name": "treat-vs-control"},
                      {"treatment": "control", "control": "weak", "name": "control-vs-weak"}],
        "claims": [{"contrast": "treat-vs-control", "metric": "score", "test": "non_inferior", "margin": MARGIN,
                    "reference": "control-vs-weak"},
                   {"contrast": "control-vs-weak", "metric": "score", "test": "superior"}],
        "metrics": {"score": {"direction": "higher", "unit": "", "kind": "quality", "key": True}},
    }
    folder = RunFolder(root, "seq", "smoke")
    folder.save_suite(meta)
    for seed, difference in enumerate(differences):
        control = 10.0 + seed
        for arm, value in (("control", control), ("treat", control + difference), ("weak", control - 5.0 - 0.1 * seed)):
            record = make_record(f"{arm}-{seed}", arm, seed, metrics={"score": float(value)})
            folder.save_trial(dataclasses.replace(record, trial=dataclasses.replace(record.trial, suite="seq",
                                                                                    profile="smoke")))
    return root


@pytest.fixture
def suite_file(tmp_path) -> Path:
    path = tmp_path / "seq.yaml"
    path.write_text(SUITE)
    return path


def test_a_margin_far_below_what_max_seeds_resolve_is_one_warning_line_per_claim(suite_file, tmp_path):
    pilot = write_pilot(tmp_path / "pilot", spread=1.0)
    (suite,) = api.load_suites(suite_file)
    lines = margin_warnings(suite, pilot_claims(pilot, "seq"))
    mde = detectable_effect(8, 0.025 / 2, 0.8) * 1.0  # two claims in the quality family: the first Holm step
    assert lines == [f"warning: seq (default): claim treat-vs-control score non_inferior (margin {MARGIN:g}): MDE "
                     f"{mde:.4g} at max_seeds 8 (the pilot's sd 1 over 4 seeds) is more than twice its margin "
                     f"{MARGIN:g}: it can hardly pass whatever the arms do; widen the margin or allow more seeds "
                     "(harness plan --from)"]
    validated = harness_here("validate", str(suite_file), "--pilot", str(pilot))
    assert validated.returncode == 0 and validated.stdout.startswith("ok: seq (default)")
    assert validated.stderr.splitlines() == lines  # the superiority claim (no margin) is skipped


def test_a_margin_the_seeds_resolve_warns_of_nothing(suite_file, tmp_path):
    """At sd 0.02 the MDE at 8 seeds is about 0.02, a fifth of the margin."""
    pilot = write_pilot(tmp_path / "pilot", spread=0.02)
    (suite,) = api.load_suites(suite_file)
    assert margin_warnings(suite, pilot_claims(pilot, "seq")) == []
    validated = harness_here("validate", str(suite_file), "--pilot", str(pilot))
    assert validated.returncode == 0 and validated.stderr == ""


def test_without_a_pilot_nothing_is_read_and_a_missing_one_is_one_line(suite_file, tmp_path):
    assert harness_here("validate", str(suite_file)).stderr == ""
    missing = harness_here("validate", str(suite_file), "--pilot", str(tmp_path / "none"))
    assert missing.returncode == 2 and missing.stderr == f"error: --pilot: {tmp_path / 'none'} does not exist\n"
    other = write_pilot(tmp_path / "pilot", spread=1.0)
    with pytest.raises(PilotError, match="no stored run of suite 'other' there"):
        pilot_claims(other, "other")
    with pytest.raises(api.UsageError, match=r"^--from: .* does not exist$"):  # plan reads a pilot the same way
        api.plan_seeds(suite_file, pilot=tmp_path / "none")


def test_run_warns_before_anything_runs(suite_file, tmp_path):
    """--seeds 0,1: a fixed design of 2 seeds, so the MDE is at 2 seeds."""
    pilot = write_pilot(tmp_path / "pilot", spread=0.02)
    results = tmp_path / "results"
    ran = harness_here("run", str(suite_file), "--pilot", str(pilot), "--seeds", "0,1", "--results", str(results),
                       "--no-mlflow", "--executor", "serial", "--threads", "1")
    assert ran.returncode == 0, ran.stderr
    (line,) = [line for line in ran.stderr.splitlines() if "MDE" in line]
    assert line.startswith("warning: seq (default): claim treat-vs-control score non_inferior")
    assert " at seeds 2 " in line and ran.stderr.index(line) < ran.stderr.index("exploratory")  # before the run
    refused = harness_here("run", str(suite_file), "--pilot", str(tmp_path / "none"), "--results",
                           str(tmp_path / "unused"), "--no-mlflow")
    assert refused.returncode == 2 and "--pilot:" in refused.stderr and not (tmp_path / "unused").exists()
