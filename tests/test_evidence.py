"""Evidence bundles: a real run of the toy suite sealed in a scratch git repository passes ``harness audit``;
each kind of tampering fails it in one line naming its check; a file that is no bundle exits 2; the
programme lists every sealed design of a claim with an exploratory pooled estimate beside the latest.

The harness records the git state of its own checkout, so the runs here name the scratch repository as
that checkout (``environment.code_checkout``): its commits, dates and clean tree are the ones audited.
The tests on real runs are in the integration tier (two toy runs, git and the audit end to end, in
process); the pooled estimate's tests are fast.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from fault_injection import Outcome, harness_here
from harness.analysis.present.stored_summary import ContrastSummary
from harness.evidence import bundle as bundle_module
from harness.evidence.bundle import design_hash
from harness.evidence.suite_history import Commit, DesignUnreadable, Repository
from harness.evidence.audit import pooled_skewness
from harness.evidence import programme as programme_module
from harness.evidence.ledger import Ledger, LedgerEntry, append
from harness.evidence.programme import pool, programme_passes, study_evalue
from harness.evidence.registration import invalidate
from harness.suite.design import DesignLock, design_record
from harness.suite.schema import SequentialSpec, StoredSequential
from harness.tracking import environment

TOY = Path(__file__).parent / "suites" / "toy.yaml"


def git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{when} +0000"
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo,
                          check=True, capture_output=True, text=True, env=env).stdout.strip()


def in_repo(repo: Path, *args: str) -> Outcome:
    """`harness ARGS` with ``repo`` as the harness's own checkout (its git state is what trials record)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(environment, "code_checkout", lambda: repo)
        environment.git_state.cache_clear()
        environment.git_diff.cache_clear()
        try:
            return harness_here(*args)
        finally:
            environment.git_state.cache_clear()
            environment.git_diff.cache_clear()


def register(repo: Path) -> str:
    """Register the toy suite's design in ``repo``'s ledger and commit the ledger: the registration's id."""
    registered = in_repo(repo, "register", str(repo / "suites" / "toy.yaml"))
    assert registered.returncode == 0, registered.stderr
    git(repo, "add", "evidence/ledger.jsonl")
    git(repo, "commit", "-qm", "toy: registered")
    time.sleep(1.1)  # the trials start in a later second than the registration and its commit
    return registered.stdout.split(" as ")[1].split(",")[0]


def run_and_seal(repo: Path, results: str) -> Path:
    """The toy suite of ``repo`` registered and run at its HEAD: the run seals itself when it ends."""
    register(repo)
    ran = in_repo(repo, "run", str(repo / "suites" / "toy.yaml"), "--results", str(repo / results), "--no-mlflow",
                  "--executor", "serial", "--threads", "1")
    assert ran.returncode == 0, ran.stderr
    assert "confirmatory run of registered design" in ran.stderr + ran.stdout
    git(repo, "add", "evidence")
    git(repo, "commit", "-qm", "toy: sealed")
    return Path(ran.stderr.split("(default): sealed ")[1].split(" (")[0])


@pytest.fixture(scope="module")
def sealed(tmp_path_factory) -> tuple[Path, Path]:
    """A scratch repository whose suites/toy.yaml was committed a minute before its registration, and the
    bundle of its registered run."""
    repo = tmp_path_factory.mktemp("evidence") / "repo"
    (repo / "suites").mkdir(parents=True)
    # The registration draws the seeds. At the toy's 60 steps on 256 test points, plain SGD and momentum reach
    # the same accuracy on 4 features for some draws, a difference of 0 on every seed, which no pooled
    # estimate can use (the programme test failed on such draws). At 20 steps SGD has not converged and
    # momentum has, and 2,048 test points make accuracy fine-grained: the differences vary on any draw.
    (repo / "suites" / "toy.yaml").write_text(
        TOY.read_text().replace("params: {steps: 60}", "params: {steps: 20, samples: 2048}"))
    (repo / ".gitignore").write_text("results*/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "toy: the design", when=int(time.time()) - 60)
    return repo, run_and_seal(repo, "results")


@pytest.fixture(scope="module")
def redesigned(sealed, tmp_path_factory) -> tuple[Path, Path, Path]:
    """The repository after a second design (a tighter margin) was registered and run: both bundles."""
    repo = tmp_path_factory.mktemp("redesign") / "repo"
    shutil.copytree(sealed[0], repo, symlinks=True)
    suite = repo / "suites" / "toy.yaml"
    suite.write_text(suite.read_text().replace("margin: 0.05", "margin: 0.04"))
    git(repo, "commit", "-qam", "toy: a tighter margin", when=int(time.time()) - 30)
    first = repo / "evidence" / "toy" / sealed[1].name
    return repo, first, run_and_seal(repo, "results2")


@pytest.fixture
def copy(sealed, tmp_path) -> tuple[Path, Path]:
    """A scratch copy of the sealed repository to tamper with."""
    repo = tmp_path / "repo"
    shutil.copytree(sealed[0], repo, symlinks=True)
    return repo, repo / "evidence" / "toy" / sealed[1].name


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))


def failed_checks(outcome: Outcome) -> list[str]:
    """The check each FAIL line names (one line per failure)."""
    return [line.split(": FAIL ")[1].split(":")[0] for line in outcome.stdout.splitlines() if ": FAIL " in line]


@pytest.mark.integration
def test_a_sealed_bundle_passes_audit_and_is_small(sealed):
    repo, path = sealed
    assert path.parent == repo / "evidence" / "toy" and path.stat().st_size < 2**20
    audited = harness_here("audit", str(repo / "evidence"))
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert f"{path}: ok (18 trials" in audited.stdout


@pytest.mark.integration
def test_a_bundle_holds_every_trial_the_design_lock_and_the_summary(sealed):
    repo, path = sealed
    header, suite, summary, *trials = lines_of(path)
    stored = json.loads((repo / "results" / "toy" / "default" / "suite.json").read_text())
    assert header["suite_file"] == "suites/toy.yaml" and suite["suite_json"] == stored
    assert f"design {header['design']} " in DesignLock.of_suite(stored).label() and path.name == f"{header['design']}.jsonl.gz"
    assert summary["summary"]["claims"] and len(trials) == 18
    record = trials[0]["record"]
    assert record["environment"]["git_commit"] == git(repo, "rev-parse", "HEAD~1")  # the seal's commit came after
    assert record["environment"]["git_dirty"] == "false" and record["environment"]["task_code_sha256"]
    assert {"params", "metrics", "seed", "arm", "started_at", "wall_seconds"} <= set(record)
    assert len({line["record"]["environment"]["run_id"] for line in trials}) == 1  # one run: its folder's id


def _dated_before(lines: list[dict]) -> None:
    lines[3]["record"]["started_at"] = "2001-01-01T00:00:00+00:00"


def _dirty(lines: list[dict]) -> None:
    lines[4]["record"]["environment"]["git_dirty"] = "true"


def _untracked(lines: list[dict]) -> None:
    lines[5]["record"]["environment"]["task_untracked_files"] = "helper.py"


def _spliced(lines: list[dict]) -> None:
    """The later trials as another run's (another results folder's run id): picked from a second run."""
    for line in lines[12:]:
        line["record"]["environment"]["run_id"] = "0" * 32


def _metric(lines: list[dict]) -> None:
    record = next(line["record"] for line in lines[3:] if line["record"]["arm"] == "momentum")
    record["metrics"]["accuracy"] += 0.25


@pytest.mark.integration
@pytest.mark.parametrize("tamper, check", [(_dated_before, "dated"), (_dirty, "clean"), (_untracked, "clean"),
                                           (_metric, "verdicts"), (_spliced, "single_run")])
def test_a_tampered_trial_fails_audit_in_one_line_naming_the_check(copy, tamper, check):
    repo, path = copy
    lines = lines_of(path)
    tamper(lines)
    write_lines(path, lines)
    audited = harness_here("audit", str(path))
    assert audited.returncode == 1, audited.stdout + audited.stderr
    # the ledger sealed the bundle's bytes: any edit of them also fails the registration
    assert failed_checks(audited)[0] == check and set(failed_checks(audited)) == {check, "registered"}, audited.stdout


@pytest.mark.integration
def test_a_changed_design_fails_audit_naming_the_design(copy):
    """A forger who loosens the margin and re-hashes the bundle still meets the suite file at the commit."""
    repo, path = copy
    lines = lines_of(path)
    stored = lines[1]["suite_json"]
    for claims in (stored["claims"], stored["design"]["claims"]):
        claims[0]["margin"] = 0.2
    lines[0]["design"] = design_hash(design_record(stored))
    path.unlink()
    path = path.with_name(f"{lines[0]['design']}.jsonl.gz")
    write_lines(path, lines)
    audited = harness_here("audit", str(path))
    assert audited.returncode == 1
    assert "design" in failed_checks(audited)
    assert set(failed_checks(audited)) <= {"design", "verdicts", "analysis", "registered"}
    assert "suites/toy.yaml at " in audited.stdout


@pytest.mark.integration
def test_a_redesign_runs_fresh_seeds_drawn_by_its_registration(redesigned):
    """Peek, redesign, rerun: the redesign is another registration, and its seeds are its own."""
    repo, first, second = redesigned
    seeds = [{line["record"]["seed"] for line in lines_of(path)[3:]} for path in (first, second)]
    assert first.name != second.name and not seeds[0] & seeds[1] and min(seeds[1]) >= 100_000
    audited = harness_here("audit", str(repo / "evidence"))
    assert audited.returncode == 0, audited.stdout
    assert "ledger.jsonl: ok (2 registration(s): 2 sealed, 0 abandoned, 0 of the sealed invalidated)" in audited.stdout


@pytest.mark.integration
def test_an_exploratory_run_is_never_sealed(sealed, tmp_path):
    """The suite file's own seeds (--exploratory), or a design changed after registration (an arm's params):
    exploratory runs, said so, and refused by seal in one line."""
    repo = tmp_path / "repo"
    shutil.copytree(sealed[0], repo, symlinks=True)
    suite = repo / "suites" / "toy.yaml"
    ran = in_repo(repo, "run", str(suite), "--results", str(repo / "results3"), "--no-mlflow", "--executor", "serial",
                  "--exploratory")
    assert ran.returncode == 0 and "toy (default): exploratory (--exploratory)" in ran.stderr + ran.stdout
    suite.write_text(suite.read_text().replace("momentum: 0.9", "momentum: 0.8"))
    git(repo, "commit", "-qam", "toy: another arm param")
    ran = in_repo(repo, "run", str(suite), "--results", str(repo / "results4"), "--no-mlflow", "--executor", "serial")
    said = ran.stderr + ran.stdout
    assert ran.returncode == 0 and "exploratory (its design differs from registered design" in said
    assert " in arms; register this one: harness register" in said  # what changed since the registration
    for results in ("results3", "results4"):
        refused = harness_here("seal", str(repo / results), "toy", "--out", str(repo / "evidence"))
        assert refused.returncode == 2 and "an exploratory run" in refused.stderr, refused.stderr
    assert len(list((repo / "evidence" / "toy").iterdir())) == 1


@pytest.mark.integration
def test_a_sealed_run_is_never_sealed_again(sealed):
    repo, path = sealed
    before = path.read_bytes()
    again = harness_here("seal", str(repo / "results"), "toy", "--out", str(repo / "evidence"))
    assert again.returncode == 2 and "sealed before" in again.stderr and path.read_bytes() == before


@pytest.mark.integration
def test_an_open_registration_fails_the_ledger_check_until_abandoned(sealed, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(sealed[0], repo, symlinks=True)
    suite = repo / "suites" / "toy.yaml"
    suite.write_text(suite.read_text().replace("margin: 0.05", "margin: 0.03"))
    git(repo, "commit", "-qam", "toy: a third design")
    registration = register(repo)
    audited = harness_here("audit", str(repo / "evidence"))
    assert audited.returncode == 1 and f"registration {registration} (toy) has neither" in audited.stdout
    abandoned = harness_here("abandon", registration, "--reason", "out of budget", "--ledger",
                             str(repo / "evidence" / "ledger.jsonl"))
    assert abandoned.returncode == 0, abandoned.stderr
    assert harness_here("audit", str(repo / "evidence")).returncode == 0


@pytest.mark.integration
def test_an_edited_ledger_line_fails_the_audit(copy):
    repo, _ = copy
    ledger = repo / "evidence" / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    entry = json.loads(lines[0])
    entry["seeds"][0] += 1
    lines[0] = json.dumps(entry, sort_keys=True, separators=(",", ":"))
    ledger.write_text("\n".join(lines) + "\n")
    audited = harness_here("audit", str(repo / "evidence"))
    assert audited.returncode == 1
    assert "ledger: " in audited.stdout and "a line was edited, removed or moved" in audited.stdout


@pytest.mark.integration
def test_a_changed_value_no_verdict_reads_fails_the_rerun(copy):
    """The loss is exploratory (no claim reads it): the verdicts check cannot see a change to it; a rerun does."""
    repo, path = copy
    lines = lines_of(path)
    record = next(line["record"] for line in lines[3:] if line["record"]["arm"] == "momentum")
    record["metrics"]["loss"] += 0.123
    write_lines(path, lines)
    plain_audit = harness_here("audit", str(path))
    assert "verdicts" not in failed_checks(plain_audit)
    audited = harness_here("audit", str(path), "--reproduce", "18", "--task-path", "toy_task:ToyTask")
    assert audited.returncode == 1 and "reproduce" in failed_checks(audited), audited.stdout + audited.stderr
    assert f"{record['arm']} seed={record['seed']}" in audited.stdout and ": loss recorded " in audited.stdout


@pytest.mark.integration
def test_an_untouched_bundle_reruns_bit_for_bit(sealed):
    repo, path = sealed
    audited = harness_here("audit", str(path), "--reproduce", "2", "--task-path", "toy_task:ToyTask")
    assert audited.returncode == 0 and "2 trial(s) rerun, every value bit for bit" in audited.stdout, audited.stdout


@pytest.mark.integration
def test_an_artifact_built_outside_the_run_fails_provenance(copy):
    """A trial that loaded a teacher some side run built: the bundle cannot show where its numbers came from."""
    repo, path = copy
    lines = lines_of(path)
    lines[3]["record"]["details"]["cache"] = {"teacher": {"key": "ab" * 10, "loaded": True, "sha256": "cd" * 32,
                                                          "built_by": "0123456789abcdef"}}
    write_lines(path, lines)
    audited = harness_here("audit", str(path))
    assert "provenance" in failed_checks(audited) and "built by 0123456789ab" in audited.stdout, audited.stdout


def _flip_contrast(stored: dict) -> None:
    contrast = stored["contrasts"][0]
    contrast["treatment"], contrast["control"] = contrast["control"], contrast["treatment"]


def _flip_direction(stored: dict) -> None:
    stored["metrics"]["accuracy"]["direction"] = "lower"


def _arm_params(stored: dict) -> None:
    stored["arms"]["momentum"]["params"]["momentum"] = 0.5


@pytest.mark.integration
@pytest.mark.parametrize("tamper", [_flip_contrast, _flip_direction, _arm_params])
def test_a_field_the_analysis_reads_changed_in_suite_json_fails_the_audit(copy, tamper):
    """Swapping treatment and control, a metric's direction, or an arm's params in the bundle's suite.json
    leaves the design lock's hash as it was; the analysis check and the registration catch it."""
    repo, path = copy
    lines = lines_of(path)
    tamper(lines[1]["suite_json"])
    write_lines(path, lines)
    audited = harness_here("audit", str(path))
    assert audited.returncode == 1, audited.stdout + audited.stderr
    assert {"analysis", "registered"} <= set(failed_checks(audited)), audited.stdout


@pytest.mark.integration
def test_the_findings_lines_citing_a_bundle_must_give_its_verdicts(copy):
    repo, path = copy
    name = f"toy/{path.name.split('.')[0]}"
    summary = lines_of(path)[2]["summary"]
    status = summary["validity"]["status"]
    claim = summary["claims"][0]
    cited = f"claim/momentum-vs-sgd/accuracy/{claim['point'].replace('=', '_')}"
    findings = repo / "docs" / "findings"
    findings.mkdir(parents=True)
    doc = findings / "toy.md"
    doc.write_text(f"# toy\n\n- evidence `{name}` `validity` **{status}**\n- evidence `{name}` `{cited}` "
                   f"**{claim['result']}**\n")
    assert harness_here("audit", str(path)).returncode == 0
    doc.write_text(doc.read_text() + f"- evidence `{name}` `{cited}` **PASS-ISH**\n- evidence `{name}` `claim/none` **PASS**\n"
                   f"- evidence {name} says it all\n")
    audited = harness_here("audit", str(path))
    assert failed_checks(audited) == ["findings"] * 3, audited.stdout
    assert "docs/findings/toy.md:5 says" in audited.stdout and "toy.md:6 cites claim/none" in audited.stdout


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a bundle")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])


def _link(path: Path) -> None:
    target = path.with_name("elsewhere")
    path.rename(target)
    path.symlink_to(target)


def _markup(path: Path) -> None:
    lines = lines_of(path)
    lines[0]["suite"] = "<img src=x onerror=alert(1)>"
    write_lines(path, lines)


def _misnamed(path: Path) -> None:
    path.rename(path.with_name("0badc0de.jsonl.gz"))


@pytest.mark.integration
@pytest.mark.parametrize("spoil, fragment", [
    (_garbage, "not gzip data"), (_truncated, "truncated"), (_link, "a symbolic link"),
    (_markup, "suite: expected a plain word"), (_misnamed, "so it is named"),
])
def test_a_malformed_or_hostile_bundle_exits_2_in_one_line(copy, spoil, fragment):
    repo, path = copy
    spoil(path)
    audited = harness_here("audit", str(repo / "evidence" / "toy"))
    assert audited.returncode == 2 and fragment in audited.stderr, audited.stderr
    assert len(audited.stderr.strip().splitlines()) == 1 and audited.stderr.startswith("error: ")
    assert "Traceback" not in audited.stderr


@pytest.mark.integration
@pytest.mark.parametrize("cap, value, fragment", [("MAX_TEXT_BYTES", 4096, "inflates to over"),
                                                  ("MAX_TRIALS", 5, "18 trials, over the 5")])
def test_a_bundle_past_a_cap_is_refused_before_its_trials_are_read(copy, monkeypatch, cap, value, fragment):
    repo, path = copy
    monkeypatch.setattr(bundle_module, cap, value)
    audited = harness_here("audit", str(path))
    assert audited.returncode == 2 and fragment in audited.stderr


@pytest.mark.integration
def test_seal_refuses_what_it_cannot_seal_in_one_line(sealed, tmp_path):
    repo, _ = sealed
    missing = harness_here("seal", str(repo / "results"), "other", "--out", str(repo / "evidence"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: no run of suite other")
    outside = harness_here("seal", str(repo / "results"), "toy", "--out", str(tmp_path / "evidence"))
    assert outside.returncode == 2 and "not inside a git checkout" in outside.stderr
    assert not (tmp_path / "evidence").exists()


@pytest.mark.integration
def test_the_programme_lists_every_design_with_its_verdict_and_the_pooled_estimate(redesigned):
    repo, first, second = redesigned
    shown = harness_here("programme", str(repo / "evidence"))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "## toy: 2 sealed design(s), oldest first; 2 registered" in text
    section = text.split("claim/momentum-vs-sgd/accuracy/features_4")[1].split("claim/")[0]
    designs = [first.name.split(".")[0], second.name.split(".")[0]]
    assert section.index(designs[0]) < section.index(designs[1])
    assert "programme verdict: " in section and "over 2 registered studies" in section
    latest = next(line for line in section.splitlines() if line.startswith("latest verdict:"))
    assert f"(design {designs[1]})" in latest and "exploratory" in latest and "DerSimonian-Laird" in latest


def _bundle_of(groups: list[list[float]], bound: float | None) -> SimpleNamespace:
    """What the statistics check reads of a bundle: its declared bound, metric kinds and contrast rows."""
    sequential = StoredSequential(3, SequentialSpec(max_seeds=12, skew_bound=bound)) if bound else None
    stored = SimpleNamespace(sequential=sequential, metrics={})
    rows = [ContrastSummary("b-vs-a", "accuracy", "", tuple(values)) for values in groups]
    return SimpleNamespace(stored=stored, summary=SimpleNamespace(contrasts=rows))


def test_the_statistics_check_fails_data_beyond_the_declared_skewness():
    rng = np.random.default_rng(5)
    skewed = [list(rng.gamma(0.5, size=12) * -1) for _ in range(20)]  # skewness about 2.8, the bad side
    normal = [list(rng.standard_normal(12)) for _ in range(20)]
    assert pooled_skewness(_bundle_of(skewed, 1.0)).exceeds
    assert not pooled_skewness(_bundle_of(normal, 1.0)).exceeds
    assert pooled_skewness(_bundle_of(skewed, None)) is None  # no bound declared: nothing to hold


def test_an_invalidated_study_stays_in_the_ledger_and_counts_as_no_evidence(tmp_path):
    ledger = Ledger.read(tmp_path / "ledger.jsonl")
    entry = LedgerEntry(kind="registered", suite="toy", profile="default", at="2026-12-06T00:00:00+00:00",
                        previous="", design="d" * 64, record={}, seeds=(100001, 100002))
    ledger, registration = append(ledger, entry)
    ledger, _ = append(ledger, LedgerEntry(kind="sealed", suite="toy", profile="default",
                                           at="2026-12-06T00:01:00+00:00", previous="", registration=registration,
                                           bundle="evidence/toy/x.jsonl.gz", bundle_sha256="0" * 64))
    found = Ledger.read(tmp_path / "ledger.jsonl").registration(registration)
    assert found.sealed is not None and found.invalidated is None
    invalidate(Ledger.read(tmp_path / "ledger.jsonl"), found, "skewed beyond its bound")
    found = Ledger.read(tmp_path / "ledger.jsonl").registration(registration)
    assert found.invalidated.reason == "skewed beyond its bound" and not found.open
    sealing = SimpleNamespace(bundle=SimpleNamespace(stored=SimpleNamespace(registration=registration)),
                              evalue=50.0, registered=True)
    assert programme_module._evalue(sealing, {registration}) == 1.0 and programme_module._evalue(sealing, set()) == 50.0


def test_a_study_evalue_is_the_calibrated_p_value_paid_for_its_looks():
    assert study_evalue(0.01) == pytest.approx(5.0) and study_evalue(0.01, looks=4) == pytest.approx(2.5)
    assert study_evalue(None) == 1.0 and study_evalue(1.0) == 0.5 and study_evalue(0.5, looks=3) == 0.5
    assert programme_passes([5.0, 9.0], alpha=0.025) and not programme_passes([5.0, 7.9], alpha=0.025)
    assert programme_passes([50.0, 0.01], alpha=0.025)  # once reached, a later study cannot take it back


def _null_programme(rng: np.random.Generator, seeds: int, studies: int, alpha: float) -> tuple[bool, bool]:
    """Null studies run one after another until one PASSes on its own (optional continuation): whether any
    study PASSed, and whether the programme did."""
    evalues, any_study = [], False
    for _ in range(studies):
        p = stats.ttest_1samp(rng.standard_normal(seeds), 0.0, alternative="greater").pvalue
        evalues.append(study_evalue(float(p)))
        if p < alpha:
            any_study = True
            break
    return any_study, programme_passes(evalues, alpha)


def test_redesigning_null_studies_until_one_passes_rarely_passes_the_programme():
    """Small: at most ten null studies, stopped at the first PASS. Each study alone passes 2.5% of the time,
    so a search for a PASS finds one in about 22% of programmes; the programme's verdict stays near alpha."""
    rng = np.random.default_rng(11)
    runs = [_null_programme(rng, 6, 10, 0.025) for _ in range(600)]
    assert sum(study for study, _ in runs) / len(runs) > 0.15
    assert sum(programme for _, programme in runs) / len(runs) <= 0.025 + 0.02


@pytest.mark.slow
def test_optional_continuation_keeps_the_programme_within_alpha():
    """The slow tier's version: 20,000 programmes of up to ten null studies on 3 to 12 seeds each."""
    rng = np.random.default_rng(12)
    passed = sum(_null_programme(rng, int(rng.integers(3, 13)), 10, 0.025)[1] for _ in range(20_000))
    assert passed / 20_000 <= 0.025


def test_a_design_is_introduced_by_its_oldest_commit_not_by_edits_that_keep_it(tmp_path):
    """A comment edit keeps the design (the loader's reading is compared, not the text); a margin edit
    starts a new one. The times are each commit's later date."""
    repo = tmp_path / "repo"
    (repo / "suites").mkdir(parents=True)
    suite = repo / "suites" / "toy.yaml"
    suite.write_text(TOY.read_text())
    git(repo, "init", "-q")
    shas = []
    for n, edit in enumerate([lambda t: t, lambda t: "# a comment\n" + t, lambda t: t.replace("margin: 0.05", "margin: 0.04"),
                              lambda t: t + "# another comment\n"]):
        suite.write_text(edit(suite.read_text()))
        git(repo, "add", ".")
        git(repo, "commit", "-qm", f"edit {n}", when=1_700_000_000 + 100 * n)
        shas.append(git(repo, "rev-parse", "HEAD"))
    history = Repository.containing(repo)
    assert history.introduced(shas[1], "suites/toy.yaml", "toy", "default") == Commit(shas[0], 1_700_000_000)
    assert history.introduced(shas[3], "suites/toy.yaml", "toy", "default") == Commit(shas[2], 1_700_000_200)
    assert history.design_at(shas[0], "suites/toy.yaml", "toy", "default") == history.design_at(
        shas[1], "suites/toy.yaml", "toy", "default")
    with pytest.raises(DesignUnreadable, match="declares no suite other"):
        history.design_at(shas[0], "suites/toy.yaml", "other", "default")


def test_a_path_that_is_not_there_is_one_line(tmp_path):
    audited = harness_here("audit", str(tmp_path / "evidence" / "none.jsonl.gz"))
    assert audited.returncode == 2 and audited.stderr == f"error: {tmp_path}/evidence/none.jsonl.gz does not exist\n"
    assert harness_here("programme", str(tmp_path / "none")).returncode == 2


def test_the_pooled_interval_covers_the_true_effect_at_its_level():
    """Simulated programmes of 8 designs around a true effect of 0.3 with a between-design spread of 0.1:
    the DerSimonian-Laird 95% interval covers 0.3 in about 95% of them (it runs a little short at 8 designs)."""
    rng = random.Random(7)
    covered, trials = 0, 2000
    for _ in range(trials):
        effects = []
        for _ in range(8):
            variance = rng.uniform(0.005, 0.05)
            effects.append((rng.gauss(0.3 + rng.gauss(0, 0.1), variance ** 0.5), variance))
        pooled = pool(effects)
        covered += pooled.low <= 0.3 <= pooled.high
    assert 0.90 <= covered / trials <= 0.975


def test_the_pool_of_identical_designs_is_their_estimate_with_no_spread():
    pooled = pool([(0.5, 0.01), (0.5, 0.04)])
    assert pooled.estimate == pytest.approx(0.5) and pooled.tau2 == 0
    assert pool([(0.5, 0.01)]) is None and pool([(0.5, 0.0), (0.4, 0.0)]) is None
