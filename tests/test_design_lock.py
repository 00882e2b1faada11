"""A results folder is locked to the design its trials were run under, and every reader reads only the
trials of the suite's current expansion and seeds: a changed design into a folder that holds trials is
refused (exit 2, one line naming both designs, suite.json untouched); a rerun after changing a param
reports exactly what a fresh run reports."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from fault_injection import harness_here

from harness import api
from harness.analysis.run_results import load_results
from harness.cli import main
from harness.core.stored_fields import as_stored
from harness.reproduction.sources import load_path
from harness.store import SUITE_FILE, RunFolder
from harness.suite.design import DesignLock, UnreadableDesign
from harness.suite.schema import SequentialSpec, StoredSequential

SUITE = """\
suite: lock
task: calibration_task:CalibrationTask
seeds: [0, 1, 2]
SEQUENTIAL
arms:
  a: {tag: a, shared_sd: 0.1}
  b: {tag: b, shared_sd: 0.1, effect: EFFECT}
contrasts:
  - {treatment: b, control: a}
claims:
  - {contrast: b-vs-a, metric: score, test: superior}
PREMISES
"""


def write_suite(folder: Path, sequential: str = "", premises: str = "", effect: str = "3.0", name: str = "s") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(SUITE.replace("SEQUENTIAL", sequential).replace("PREMISES", premises).replace("EFFECT", effect))
    return path


def run(suite: Path, results: Path, seeds: list[int] | None = None) -> api.RunResult:
    return api.run(suite, api.RunOptions(results=results, mlflow=False, threads=1, seeds=seeds))


@pytest.mark.parametrize("change, differs", [
    ({"sequential": "sequential: {max_seeds: 8}"}, "sequential"),
    ({"premises": "premises:\n  - {name: regime, arm: b, metric: score, at_least: 1}"}, "premises"),
])
def test_a_changed_design_into_a_folder_with_its_trials_is_refused_naming_both(tmp_path, change, differs):
    results = tmp_path / "r"
    assert run(write_suite(tmp_path, sequential="sequential: {max_seeds: 6}"), results).exit_code == 0
    stored = (results / "lock" / "default" / SUITE_FILE).read_bytes()
    trials = sorted((results / "lock" / "default" / "trials").iterdir())
    changed = write_suite(tmp_path, **{"sequential": "sequential: {max_seeds: 6}", **change}, name="changed")
    with pytest.raises(api.UsageError) as refused:
        run(changed, results)
    message = str(refused.value)
    assert "\n" not in message and len(re.findall(r"design [0-9a-f]{8} \(", message)) == 2 and f"differs in {differs}" in message
    assert (results / "lock" / "default" / SUITE_FILE).read_bytes() == stored  # not rewritten
    assert sorted((results / "lock" / "default" / "trials").iterdir()) == trials


def test_other_seeds_into_the_folder_are_refused_with_exit_2(tmp_path):
    suite, results = write_suite(tmp_path), tmp_path / "r"
    assert run(suite, results).exit_code == 0
    done = CliRunner().invoke(main, ["run", str(suite), "--results", str(results), "--no-mlflow", "--seeds", "0,1,2,3"])
    assert done.exit_code == 2
    assert "design" in done.output and "(seeds 0-2, fixed" in done.output and "(seeds 0-3, fixed" in done.output
    assert run(suite, results).exit_code == 0  # the stored design itself resumes
    assert len(list((results / "lock" / "default" / "trials").iterdir())) == 6


def test_a_rerun_after_changing_a_param_reports_what_a_fresh_run_reports(tmp_path):
    rerun, fresh = tmp_path / "rerun", tmp_path / "fresh"
    assert run(write_suite(tmp_path, effect="3.0"), rerun).exit_code == 0
    changed = write_suite(tmp_path, effect="0.0", name="changed")
    assert run(changed, rerun).exit_code == 0
    assert run(changed, fresh).exit_code == 0
    trials = rerun / "lock" / "default" / "trials"
    assert len(list((trials / "superseded").iterdir())) == 3  # b's trials of the old param: kept, read by nothing
    assert len([p for p in trials.iterdir() if p.is_file()]) == 6

    def decisions(root: Path) -> dict:
        document = json.loads((root / "lock" / "default" / "report" / "summary.json").read_text())
        return {"claims": document["claims"], "arms": document["arms"], "contrasts": document["contrasts"]}

    assert decisions(rerun) == decisions(fresh)
    results = load_results(rerun / "lock" / "default")
    assert results.stale == 0  # set aside before any reader saw them
    assert load_results(fresh / "lock" / "default").stale == 0
    assert len(load_path(rerun / "lock" / "default").records) == 6  # reproduce reruns the current trials only


def test_a_folder_written_before_designs_were_recorded_is_read_by_its_seeds(tmp_path):
    results = tmp_path / "r"
    assert run(write_suite(tmp_path), results, seeds=[0, 1, 2, 3, 4]).exit_code == 0
    folder = RunFolder(results, "lock", "default")
    meta = json.loads((folder.path / SUITE_FILE).read_text())
    legacy = {k: v for k, v in meta.items() if k not in ("design", "trial_ids")} | {"seeds": [0, 1, 2]}
    (folder.path / SUITE_FILE).write_text(json.dumps(legacy))
    assert DesignLock.of_suite(legacy).seeds == (0, 1, 2)
    loaded = load_results(folder.path)
    assert loaded.stale == 4 and {t.seed for t in loaded.finished} == {0, 1, 2}


def test_trials_of_an_arm_the_suite_no_longer_has_are_set_aside_by_every_reader(tmp_path):
    """Nothing replaces them (no trial of the current expansion has their arm), so the run leaves them in
    the folder; report and gate still read only the current expansion, as a fresh run would."""
    results, fresh = tmp_path / "r", tmp_path / "fresh"
    wider = write_suite(tmp_path, name="wider")
    wider.write_text(wider.read_text().replace("arms:\n", "arms:\n  c: {tag: c, shared_sd: 0.1, effect: 1.0}\n"))
    assert run(wider, results).exit_code == 0
    assert run(write_suite(tmp_path), results).exit_code == 0
    assert len(list((results / "lock" / "default" / "trials").glob("*.json"))) == 9  # c's three are still there
    assert run(write_suite(tmp_path), fresh).exit_code == 0
    rerun, alone = load_results(results / "lock" / "default"), load_results(fresh / "lock" / "default")
    assert rerun.stale == 3 and rerun.arm_labels() == alone.arm_labels() == ["a", "b"]
    assert sorted(t.trial_id for t in rerun.finished) == sorted(t.trial_id for t in alone.finished)


def _unreadable(meta: dict, design: dict) -> dict[str, bytes | None]:
    return {"deleted": None, "emptied": b"", "invalid JSON": b"{", "a list": b"[]",
            "design.claims = 5": json.dumps({**meta, "design": {**design, "claims": 5}}).encode(),
            "design = 5": json.dumps({**meta, "design": 5}).encode(),
            "design.seeds of text": json.dumps({**meta, "design": {**design, "seeds": ["0"]}}).encode()}


@pytest.mark.parametrize("case", ["deleted", "emptied", "invalid JSON", "a list", "design.claims = 5", "design = 5",
                                  "design.seeds of text"])
def test_trials_without_a_readable_design_are_refused_until_redesign(tmp_path, case):
    """Fails closed: with suite.json gone or damaged, a rerun under other claims must not reuse the trials
    and analyse them under the new claims; it is one line (exit 2) until --redesign sets them aside."""
    suite, results = write_suite(tmp_path), tmp_path / "r"
    assert run(suite, results).exit_code == 0
    folder = RunFolder(results, "lock", "default")
    meta = json.loads((folder.path / SUITE_FILE).read_text())
    content = _unreadable(meta, meta["design"])[case]
    (folder.path / SUITE_FILE).unlink()
    if content is not None:
        (folder.path / SUITE_FILE).write_bytes(content)
    trials = sorted(p.name for p in folder.trials_dir.glob("*.json"))
    changed = write_suite(tmp_path, premises="premises:\n  - {name: regime, arm: b, metric: score, at_least: 1}",
                          name="changed")
    args = ["run", str(changed), "--results", str(results), "--no-mlflow", "--threads", "1"]
    refused = harness_here(*args)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: ") and "--redesign" in line and "design" in line
    assert sorted(p.name for p in folder.trials_dir.glob("*.json")) == trials  # untouched, nothing reran
    redesigned = harness_here(*args, "--redesign")
    assert redesigned.returncode == 0, redesigned.stderr
    assert "--redesign: 6 stored trial(s)" in redesigned.stderr
    assert sorted(p.name for p in (folder.trials_dir / "superseded").glob("*.json")) == trials
    assert json.loads((folder.path / SUITE_FILE).read_text())["design"]["premises"]  # the new design is the folder's


def test_redesign_leaves_a_folder_of_the_same_design_alone(tmp_path):
    suite, results = write_suite(tmp_path), tmp_path / "r"
    assert run(suite, results).exit_code == 0
    again = harness_here("run", str(suite), "--results", str(results), "--no-mlflow", "--threads", "1", "--redesign")
    assert again.returncode == 0 and "--redesign" not in again.stderr
    assert not (results / "lock" / "default" / "trials" / "superseded").exists()


def test_a_tuning_folder_without_a_readable_design_is_refused_until_redesign(tmp_path):
    """`harness tune` writes <suite>/tune-<profile>: its folder's design is checked before anything runs too."""
    toy_tune = Path(__file__).resolve().parent / "suites" / "toy_tune.yaml"
    suite = tmp_path / "toy_tune.yaml"
    suite.write_text(toy_tune.read_text().replace("params: {steps: 60, lr: 0.001}", "params: {steps: 5, lr: 0.001}"))
    options = api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1, executor="serial")
    assert api.tune(suite, options).exit_code == 0
    folder = tmp_path / "r" / "toy_tune" / "tune-default"
    (folder / SUITE_FILE).write_text("{")
    with pytest.raises(api.UsageError, match=r"suite.json is not JSON .*--redesign") as refused:
        api.tune(suite, options)
    assert "\n" not in str(refused.value)
    assert api.tune(suite, replace(options, redesign=True)).exit_code == 0
    assert len(list((folder / "trials" / "superseded").glob("*.json"))) == 12


RECORD = as_stored(DesignLock((0, 1, 2), StoredSequential(3, SequentialSpec(max_seeds=12)),
                              ({"contrast": "b-vs-a", "metric": "score"},), (), None, 0.95))


@pytest.mark.parametrize("change, named", [
    ({"claims": 5}, "design.claims: expected a list, got 5"),
    ({"seeds": ["0"]}, "design.seeds[0]: expected an integer, got '0'"),
    ({"seeds": [True]}, "design.seeds[0]: expected an integer, got True"),
    ({"sequential": [3]}, "design.sequential: expected a mapping or null, got [3]"),
    ({"sequential": {"first": 9, "max_seeds": 6}}, "design.sequential: not a sequential design harness writes "
                                                   "(first: 9 is not a seed count in [1, max_seeds=6])"),
    ({"confidence": "high"}, "design.confidence: expected a finite number or null, got 'high'"),
    ({"schedule": "fixed"}, "design.schedule: not a field of a design"),
])
def test_a_malformed_design_record_is_refused_naming_its_key(change, named):
    with pytest.raises(UnreadableDesign, match=f"^{re.escape(named)}$"):
        DesignLock.from_stored({**RECORD, **change})
    without = {k: v for k, v in RECORD.items() if k != "premises"}
    with pytest.raises(UnreadableDesign, match=r"^design.premises: missing \(expected a list\)$"):
        DesignLock.from_stored(without)


def test_a_design_reads_back_as_it_was_written():
    """as_stored and from_stored are inverses, so the digest that names a design does not move on a read."""
    design = DesignLock.from_stored(RECORD)
    assert as_stored(design) == RECORD and DesignLock.from_stored(as_stored(design)) == design
    assert design.label() == f"design {design.digest} (seeds 0-2, sequential to 12 seeds, 1 claim, 0 premises)"
