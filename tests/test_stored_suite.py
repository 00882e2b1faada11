"""The stored suite (suite.json) read back typed: what the runner writes comes back byte for byte,
older folders read with their old defaults, and a malformed or newer file is one line naming the
file and the key."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from records import make_record

from harness.analysis.decide.verdicts import contrast_variants
from harness.analysis.run_results import load_results
from harness.cli import main
from harness.execution.runner import stored_suite
from harness.store import RunFolder, canonical_json
from harness.suite.loader import load_suites
from harness.core.stored_fields import as_stored
from harness.suite.stored import StoredSuite, StoredSuiteError

SUITES = Path(__file__).parent / "suites"
SCHEMA_VERSION = StoredSuite.stored_schema.version


@pytest.mark.parametrize("yaml", ["toy.yaml", "toy_tune.yaml"])
def test_what_the_runner_writes_round_trips_to_the_same_bytes(yaml):
    for suite in load_suites(SUITES / yaml, "smoke"):
        written = as_stored(stored_suite(suite, torch.device("cpu")))
        stored = StoredSuite.from_stored(json.loads(canonical_json(written)))
        assert canonical_json(as_stored(stored)) == canonical_json(written)
        assert StoredSuite.from_stored(as_stored(stored)) == stored
        assert written["schema"] == SCHEMA_VERSION
        assert [c.label for c in stored.contrasts] == [c.label for c in suite.contrasts]
        assert stored.gate == suite.gate and list(stored.seeds) == suite.seeds


def test_a_folder_of_an_older_harness_reads_with_its_old_defaults():
    stored = StoredSuite.from_stored({
        "suite": "old", "seeds": [0, 1, 2], "arms": {"control": None, "treat": {"labels": ["treat"]}},
        "contrasts": [{"treatment": "treat", "control": "control"}],
        "gate": {"default_tolerance": 0.1},
        # a rule added after this folder was written (non-inferiority names a reference) is not applied again
        "claims": [{"contrast": "treat-vs-control", "metric": "acc", "test": "non_inferior", "margin": 0.5}],
    })
    assert stored.arm_labels() == ["control", "treat"]
    assert stored.contrasts[0].label == "treat-vs-control" and dict(stored.contrasts[0].margins) == {}
    assert stored.gate.default_tolerance == 0.1 and stored.gate.speed_tolerance == 0.25 and stored.gate.speed
    assert stored.trial_ids is None and stored.includes("any", 2) and not stored.includes("any", 3)
    assert stored.confidence is None and as_stored(stored)["schema"] == SCHEMA_VERSION
    assert stored.claims[0].reference is None


def test_the_contrast_label_is_the_suite_files_label():
    stored = StoredSuite.from_stored({
        "arms": {"a": {"labels": ["a"]}, "b": {"labels": ["b"]}},
        "contrasts": [{"treatment": "a", "control": "b", "name": "mine"}, {"treatment": "b", "control": "a"}],
    })
    assert [c.label for c in stored.contrasts] == ["mine", "b-vs-a"]


@pytest.mark.parametrize(("edit", "key", "what"), [
    ({"schema": SCHEMA_VERSION + 1}, "schema", "newer than this harness reads"),
    ({"seeds": [0, "1"]}, "seeds[1]", "expected an integer"),
    ({"claims": [{"contrast": "treat-vs-control", "metric": "acc", "test": "better"}]}, "claims[0].test", "'superior'"),
    ({"claims": [{"contrast": "treat-vs-control", "metric": "acc", "test": "superior", "alpha": 0.1}]},
     "claims[0].alpha", "not a field"),
    ({"gate": {"tolerances": {"acc": "loose"}}}, "gate.tolerances.acc", "valid number"),
    ({"arms": {"treat": {"labels": "treat"}}}, "arms.treat.labels", "expected a list"),
    ({"contrasts": [{"treatment": "treat"}]}, "contrasts[0].control", "missing"),
    ({"trial_ids": "all"}, "trial_ids", "expected a list"),
])
def test_a_malformed_or_newer_suite_json_is_one_line_naming_the_file_and_the_key(tmp_path, edit, key, what):
    folder = RunFolder(tmp_path, "edited", "default")
    folder.save_suite({"schema": 1, "suite": "edited", "profile": "default", "seeds": [0],
                       "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}}, **edit})
    folder.save_trial(make_record("t1", metrics={"acc": 1.0}))
    with pytest.raises(StoredSuiteError, match=key.replace("[", r"\[").replace("]", r"\]")):
        StoredSuite.read(folder.path / "suite.json", json.loads((folder.path / "suite.json").read_text()))
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert f"{folder.path / 'suite.json'}: {key}: " in line and what in line


def test_analysis_reads_contrasts_through_the_stored_suite(tmp_path):
    folder = RunFolder(tmp_path, "s", "default")
    folder.save_suite({"suite": "s", "profile": "default", "seeds": [0],
                       "arms": {"control": {"labels": ["control"]}, "treat": {"labels": ["treat@1", "treat@2"]}},
                       "contrasts": [{"treatment": "treat", "control": "control", "margins": {"acc": 0.1}}]})
    variants = contrast_variants(load_results(folder.path))
    assert [(v.name, v.declared_name, dict(v.margins)) for v in variants] == [
        ("treat@1-vs-control", "treat-vs-control", {"acc": 0.1}), ("treat@2-vs-control", "treat-vs-control", {"acc": 0.1})]
