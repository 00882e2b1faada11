"""The audit's ``single_run`` check (harness.evidence.single_run) and the run id every trial of ``harness run``
records (harness.tracking.run_identity): every committed bundle is one run; trials spliced from two
bundles, or from two runs made side by side, fail in one line; a resume passes; a declared top-up may
hold runs that follow one another on seeds of their own. In process, on the committed bundles' records."""
from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import torch

from harness.api import load_suites
from harness.core.record import TrialRecord
from harness.core.stored_fields import as_stored
from harness.evidence import audit as audit_module
from harness.evidence.audit import Audit
from harness.evidence.bundle import read_bundle
from harness.evidence.single_run import runs_of, spliced
from harness.tracking.environment import environment
from harness.tracking.run_identity import RUN_ID_FILE, folder_run_id, run_identity

EVIDENCE = Path(__file__).resolve().parent.parent / "evidence"
ER2 = EVIDENCE / "er2"
# two fixed designs of 3 seeds sealed at two commits, recorded before trials named their run
BEFORE_RUN_IDS = [ER2 / "b124b99a.jsonl.gz", ER2 / "ef860500.jsonl.gz"]
VOCAB = EVIDENCE / "vocab" / "675fce6f.jsonl.gz"  # a sequential design: 3 seeds, then up to 12


def _bundles() -> list[Path]:
    return sorted(EVIDENCE.glob("*/*.jsonl.gz"))


def _moved(record: TrialRecord, seconds: float = 0.0, **environment: str) -> TrialRecord:
    """The record as another run would have made it: started ``seconds`` later, with these environment values."""
    started = datetime.fromisoformat(record.started_at) + timedelta(seconds=seconds)
    return dataclasses.replace(record, started_at=started.isoformat(timespec="seconds"),
                               environment={**record.environment, **environment})


def _by_start(trials) -> list[TrialRecord]:
    return sorted(trials, key=lambda r: r.started_at)


def _start(trials) -> datetime:
    return min(datetime.fromisoformat(r.started_at) for r in trials)


def _span(trials) -> float:
    """Seconds from the first start to the last end."""
    starts = [datetime.fromisoformat(r.started_at).timestamp() for r in trials]
    return max(s + r.wall_seconds for s, r in zip(starts, trials)) - min(starts)


def _resumed(trials, **second_invocation: str) -> list[TrialRecord]:
    """The trials as a run interrupted half way and run again: the second half starts after the first ended."""
    ordered = _by_start(trials)
    first, second = ordered[: len(ordered) // 2], ordered[len(ordered) // 2:]
    gap = _span(first) - (datetime.fromisoformat(second[0].started_at) - datetime.fromisoformat(first[0].started_at)
                          ).total_seconds() + 30
    return first + [_moved(r, gap, **second_invocation) for r in second]


@pytest.mark.parametrize("path", _bundles(), ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_every_committed_bundle_is_one_run(path):
    bundle = read_bundle(path)
    assert spliced(bundle.trials, bundle.stored.sequential) is None
    assert len(runs_of(bundle.trials)) == 1


def test_trials_spliced_from_two_committed_bundles_fail_in_one_line():
    """Half of one er2 bundle's trials, half of the other's: two invocations at two commits."""
    a, b = (read_bundle(path) for path in BEFORE_RUN_IDS[:2])
    problem = spliced(a.trials[:12] + b.trials[12:], a.stored.sequential)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("trials of 2 invocations at 2 commits") and "a resume reruns the commit" in problem
    found = Audit(dataclasses.replace(a, trials=a.trials[:12] + b.trials[12:]))
    audit_module._check_single_run(found)
    assert found.failures == [f"single_run: {problem}"]


def test_two_runs_made_side_by_side_and_spliced_fail_as_interleaved():
    """A second honest run of the same trials into another results folder, started while the first ran,
    at the same commit: the even trials of one, the odd of the other."""
    bundle = read_bundle(BEFORE_RUN_IDS[0])
    trials = _by_start(bundle.trials)
    other = [_moved(r, 60, argv=r.environment["argv"].replace("--results ", "--results /elsewhere")) for r in trials]
    mixed = [mine if n % 2 else theirs for n, (mine, theirs) in enumerate(zip(trials, other))]
    problem = spliced(mixed, bundle.stored.sequential)
    assert problem is not None and problem.startswith("the trials of 2 runs interleave in time (an invocation at ")
    assert "not one run resumed" in problem


def test_a_resumed_run_passes_and_its_run_id_is_the_same():
    bundle = read_bundle(BEFORE_RUN_IDS[0])
    # recorded before run ids: the second invocation's command line may differ (--threads, --executor)
    assert spliced(_resumed(bundle.trials, argv="harness run suites/er2.yaml --threads 2")) is None
    # with a run id, the folder's, kept by the resume
    same = [_moved(r, run_id="a" * 32) for r in bundle.trials]
    assert spliced(_resumed(same)) is None
    # the resume ran at another commit: not a resume
    assert "at 2 commits" in spliced(_resumed(bundle.trials, git_commit="f" * 40))


def test_two_run_ids_fail_even_one_after_the_other():
    bundle = read_bundle(BEFORE_RUN_IDS[0])
    first = [_moved(r, run_id="a" * 32) for r in bundle.trials]
    spliced_in = _resumed(first, run_id="b" * 32)
    problem = spliced(spliced_in, bundle.stored.sequential)
    assert problem.startswith("trials of 2 runs (run aaaaaaaaaaaa (12 trial(s), ")
    assert "run bbbbbbbbbbbb (12 trial(s)" in problem and "sequential: {top_up: true}" in problem


def test_a_declared_top_up_holds_runs_that_follow_one_another_on_seeds_of_their_own():
    """A sequential vocab bundle: the first look's seeds in one run, the later looks' in another."""
    bundle = read_bundle(VOCAB)
    first_look = sorted(bundle.seeds)[:bundle.stored.sequential.first]
    sequential = bundle.stored.sequential
    top_up = dataclasses.replace(sequential, spec=sequential.spec.model_copy(update={"top_up": True}))
    early = [_moved(r, run_id="a" * 32) for r in bundle.trials if r.seed in first_look]
    late = [r for r in bundle.trials if r.seed not in first_look]
    gap = _span(bundle.trials) + 60
    topped_up = early + [_moved(r, gap, run_id="b" * 32) for r in late]
    assert spliced(topped_up, top_up) is None
    assert spliced(topped_up, bundle.stored.sequential).startswith("trials of 2 runs")  # undeclared
    # one seed's trials from both runs: picked, not added
    picked = early + [_moved(r, gap, run_id="b" * 32) for r in bundle.trials if r.seed != first_look[1]]
    assert spliced(picked, top_up).startswith(f"seed(s) {first_look[0]},{first_look[2]} ran in more than one of 2 runs")
    # side by side: not a top-up either
    together = (_start(early) - _start(late)).total_seconds()  # the later looks started with the first
    side_by_side = early + [_moved(r, together, run_id="b" * 32) for r in late]
    assert "interleave in time" in spliced(side_by_side, top_up)


def test_a_top_up_is_declared_in_the_sequential_block_and_locked_with_the_design(toy_suite, tmp_path):
    text = toy_suite.read_text()
    declared = tmp_path / "toy.yaml"
    declared.write_text(text.replace("seeds: [0, 1, 2]\n", "seeds: [0, 1, 2]\nsequential: {max_seeds: 6, top_up: true}\n"))
    suite = load_suites(declared)[0]
    assert as_stored(suite.stored())["sequential"]["top_up"] is True
    # in the design lock: the audit's design check holds it
    assert as_stored(suite.locked_design())["sequential"]["top_up"] is True
    undeclared = tmp_path / "plain.yaml"
    undeclared.write_text(text.replace("seeds: [0, 1, 2]\n", "seeds: [0, 1, 2]\nsequential: {max_seeds: 6}\n"))
    # designs locked before keep their hash
    assert "top_up" not in as_stored(load_suites(undeclared)[0].locked_design())["sequential"]


def test_a_run_folder_keeps_its_run_id_and_the_run_records_it(tmp_path):
    run_dir = tmp_path / "results" / "toy" / "default"
    assert "run_id" not in environment(torch.device("cpu"))  # outside a run (a reproduction): none
    with run_identity(run_dir):
        first = environment(torch.device("cpu"))["run_id"]
    with run_identity(run_dir):  # a resume
        assert environment(torch.device("cpu"))["run_id"] == first
    assert len(first) == 32 and (run_dir / RUN_ID_FILE).read_text() == first + "\n"
    with run_identity(tmp_path / "other"):
        assert environment(torch.device("cpu"))["run_id"] != first


def test_a_run_id_file_this_harness_did_not_write_is_replaced_never_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("b" * 32 + "\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.symlink(target, run_dir / RUN_ID_FILE)
    drawn = folder_run_id(run_dir)
    assert drawn != "b" * 32 and not (run_dir / RUN_ID_FILE).is_symlink()
    assert target.read_text() == "b" * 32 + "\n"
    (run_dir / RUN_ID_FILE).write_text("<script>\n")
    assert folder_run_id(run_dir) not in (drawn, "<script>")
