"""`harness reproduce` on real toy runs: the full environment record, bit-identical reruns from a
results folder, a trial JSON and MLflow run ids (real SQLite store), a task change that must fail
naming its metrics, and bad targets that must fail in one line without writing anything."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import mlflow
import pytest
import torch
from click.testing import CliRunner
from fault_injection import hang_guard, harness_here
from test_cli_run import free_port

from harness import api
from harness.cli import main
from harness.store import RunFolder, incomplete_note
from harness.tracking.environment import code_checkout, git_state
from harness.tracking.mlflow_tracker import default_tracking_uri

pytestmark = pytest.mark.integration  # runs the toy suite, then reruns it

TOY_NOISE_LINE = "y = (x @ truth + 0.5 * torch.randn"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    """The toy suite run once (smoke, 3 trials) from a git checkout with an uncommitted change (which
    no record names: the git state recorded is the harness checkout's)."""
    base = tmp_path_factory.mktemp("reproduce")
    repo = base / "checkout"
    repo.mkdir()
    suite = repo / "toy.yaml"
    shutil.copy(Path(__file__).parent / "suites" / "toy.yaml", suite)
    (repo / "notes.txt").write_text("first\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "toy")
    (repo / "notes.txt").write_text("first\nuncommitted\n")
    root = base / "results"
    assert api.run(suite, api.RunOptions(profile="smoke", results=root)).exit_code == 0
    return root


@pytest.fixture(autouse=True)
def keep_sigterm():
    """The commands install a SIGTERM handler (a kill stops them like Ctrl-C); restore pytest's."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


TRUST_TOY = ("--task-path", "toy_task:ToyTask")  # the toy task is on the path, not registered: trusted by name


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args] + list(TRUST_TOY if args[0] == "reproduce" else ()))


def client(root: Path) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(default_tracking_uri(root))


def runs(root: Path, kind: str) -> list:
    tracking = client(root)
    experiment = tracking.get_experiment_by_name("toy")
    return tracking.search_runs([experiment.experiment_id], filter_string=f"tags.`harness.kind` = '{kind}'")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "mlflow.db"}


def test_every_trial_and_suite_run_records_what_a_rerun_needs(toy_run):
    record = json.loads(next((toy_run / "toy" / "smoke" / "trials").glob("*.json")).read_text())
    assert f"torch=={torch.__version__}" in record["packages"]
    env = record["environment"]
    commit, dirty = git_state(code_checkout())  # the harness checkout's, never the suite's own tree
    assert env["git_commit"] == commit and env["git_dirty"] == str(dirty).lower()
    assert env["deterministic_algorithms"] == "true" and env["torch_threads"] == str(torch.get_num_threads())
    for key in ("git_commit", "python", "torch", "torch_git", "cuda", "device", "cpu_model", "packages_sha256",
                "cudnn_deterministic", "float32_matmul_precision"):
        assert env[key], key
    assert record["params"]["steps"] == 20 and record["seed"] == 0 and record["task_version"] == "2"
    diffs = list((toy_run / "toy" / "smoke" / "provenance").glob("git-*.diff"))
    assert len(diffs) == (1 if dirty else 0) and "uncommitted" not in "".join(d.read_text() for d in diffs)
    (parent,) = runs(toy_run, "suite")
    files = {f.path for f in client(toy_run).list_artifacts(parent.info.run_id)}
    assert {"suite.json", "environment.json", "packages.txt"} | ({"git.diff"} if dirty else set()) <= files
    assert parent.data.tags["harness.packages_sha256"] == env["packages_sha256"]


def test_reproduce_a_results_folder_is_bit_identical_and_linked_to_the_original(toy_run):
    before = snapshot(toy_run / "toy")
    result = invoke("reproduce", toy_run / "toy" / "smoke")
    assert result.exit_code == 0, result.output
    assert "REPRODUCED: 15 metric values of 3 trial(s) bit-identical" in result.stdout
    assert snapshot(toy_run / "toy") == before  # the original is never written to
    (summary_path,) = (toy_run / "reproductions").glob("toy-smoke-*/reproduction.json")
    summary = json.loads(summary_path.read_text())
    assert summary["result"] == "identical" and summary["metrics"]["compared"] == 15
    assert sorted(c["key"] for c in summary["metrics"]["speed"]) == ["samples_per_s"] * 3
    assert all(c["ratio"] > 0 for c in summary["metrics"]["speed"])
    (parent,) = runs(toy_run, "suite")
    (reproduction,) = [r for r in runs(toy_run, "reproduction") if r.info.run_id == summary["reproduction"]["run_id"]]
    assert reproduction.data.tags["harness.reproduction_of"] == parent.info.run_id
    assert reproduction.data.tags["harness.reproduction.result"] == "identical"
    originals = {r.info.run_id for r in runs(toy_run, "trial")}
    nested = [r for r in runs(toy_run, "reproduction_trial")
              if r.data.tags["mlflow.parentRunId"] == reproduction.info.run_id]
    assert len(nested) == 3 and {r.data.tags["harness.reproduction_of"] for r in nested} == originals


def test_reproduce_by_mlflow_run_id_nested_and_parent(toy_run):
    (parent,) = runs(toy_run, "suite")
    trial = runs(toy_run, "trial")[0]
    nested = invoke("reproduce", trial.info.run_id, "--results", toy_run)
    assert nested.exit_code == 0, nested.output
    assert f"MLflow trial run {trial.info.run_id}" in nested.stdout
    assert "REPRODUCED: 5 metric values of 1 trial(s)" in nested.stdout
    whole = invoke("reproduce", parent.info.run_id, "--tracking-uri", default_tracking_uri(toy_run), "--no-mlflow")
    assert whole.exit_code == 0, whole.output
    assert "REPRODUCED: 15 metric values of 3 trial(s)" in whole.stdout
    linked = [r.data.tags["harness.reproduction_of"] for r in runs(toy_run, "reproduction")]
    assert trial.info.run_id in linked


def test_reproduce_one_trial_json_into_a_given_folder(toy_run, tmp_path):
    trial_file = next((toy_run / "toy" / "smoke" / "trials").glob("*.json"))
    out = tmp_path / "again"
    result = invoke("reproduce", trial_file, "--out", out, "--no-mlflow")
    assert result.exit_code == 0, result.output
    assert [p.name for p in (out / "toy" / "smoke" / "trials").iterdir()] == [trial_file.name]
    assert json.loads((out / "reproduction.json").read_text())["result"] == "identical"
    again = invoke("reproduce", trial_file, "--out", out, "--no-mlflow")
    assert again.exit_code == 2 and "not empty" in again.stderr


@pytest.mark.integration  # a CLI subprocess
def test_a_changed_task_fails_reproduction_naming_each_metric(toy_run, tmp_path, harness_cmd, cli_env):
    """One line of the task edited (the label noise), its version not bumped: reproduce must catch it."""
    changed = tmp_path / "changed"
    changed.mkdir()
    source = (Path(__file__).parent / "toy_task.py").read_text()
    assert TOY_NOISE_LINE in source
    (changed / "toy_task.py").write_text(source.replace(TOY_NOISE_LINE, TOY_NOISE_LINE.replace("0.5", "0.6")))
    env = {**cli_env, "PYTHONPATH": f"{changed}:{cli_env['PYTHONPATH']}"}
    proc = subprocess.run([*harness_cmd, "reproduce", str(toy_run / "toy" / "smoke"), "--no-mlflow", *TRUST_TOY], env=env,
                          capture_output=True, text=True, timeout=hang_guard(300))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    verdict = proc.stdout.strip().splitlines()[-1]
    assert verdict.startswith("NOT REPRODUCED") and "accuracy" in verdict and "loss" in verdict
    assert "param_bytes" not in verdict  # the weights' size does not depend on the labels
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip().startswith(("sgd seed", "momentum seed"))]
    assert {row[3] for row in rows} >= {"accuracy", "loss"}


@pytest.mark.parametrize("case", ["unknown run", "not harness", "missing artifact", "no results", "not a record",
                                  "not a target"])
def test_bad_targets_fail_in_one_line_and_write_nothing(toy_run, tmp_path, case):
    tracking = client(toy_run)
    target, restore = None, None
    before = snapshot(toy_run)
    if case == "unknown run":
        target = "0" * 32
    elif case == "not harness":
        experiment = tracking.get_experiment_by_name("elsewhere") or tracking.get_experiment(
            tracking.create_experiment("elsewhere"))
        target = tracking.create_run(getattr(experiment, "experiment_id", experiment)).info.run_id
    elif case == "missing artifact":
        trial = runs(toy_run, "trial")[0]
        artifact = Path(trial.info.artifact_uri.removeprefix("file://")) / f"{trial.data.tags['harness.trial_id']}.json"
        restore = (artifact, artifact.with_suffix(".moved"))
        artifact.rename(restore[1])
        target = trial.info.run_id
    elif case == "no results":
        target = tmp_path
    elif case == "not a record":
        target = tmp_path / "x.json"
        target.write_text('{"hello": 1}')
    else:
        target = "no-such-thing"
    try:
        result = invoke("reproduce", target, "--results", toy_run)
    finally:
        if restore:
            restore[1].rename(restore[0])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
    expected = {"unknown run": "unknown MLflow run id", "not harness": "is not a harness run",
                "missing artifact": "is missing its artifact", "no results": "no stored results",
                "not a record": "not a harness trial record", "not a target": "not an MLflow run id"}[case]
    assert expected in result.stderr
    assert snapshot(toy_run) == before


@pytest.mark.integration
def test_a_folder_someone_sent_is_reproduced_into_its_own_store_not_the_server_its_markers_name(toy_run, tmp_path):
    """Their markers name their server (credentials included): the reproduction, with this checkout's
    git diff, must not go there unasked, and the plan says where it goes."""
    sent = tmp_path / "sent"
    shutil.copytree(toy_run, sent, ignore=shutil.ignore_patterns("reproductions"))
    strangers = f"http://alice:hunter2@127.0.0.1:{free_port()}"
    for marker in (sent / "toy" / "smoke" / "mlflow").glob("*.json"):
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "tracking_uri": strangers}))
    logged = len(runs(sent, "reproduction"))
    result = invoke("reproduce", sent / "toy" / "smoke")
    assert result.exit_code == 0, result.output
    own = default_tracking_uri(sent)
    assert (f"logging to MLflow at {own} (the original was logged to http://***@127.0.0.1:"
            in result.stdout) and "give --tracking-uri to log there" in result.stdout
    assert "hunter2" not in result.output
    assert len(runs(sent, "reproduction")) == logged + 1


@pytest.mark.integration
def test_a_killed_reproduction_is_closed_by_the_next(toy_run, harness_cmd, cli_env):
    target = str(toy_run / "toy" / "smoke")
    killed = subprocess.run([*harness_cmd, "reproduce", target, *TRUST_TOY], env={**cli_env, "HARNESS_FAULT": "trial-run-created:1"},
                            capture_output=True, text=True, timeout=hang_guard(300), check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (left,) = [r for r in runs(toy_run, "reproduction") if r.info.status == "RUNNING"]
    partial = [p for p in (toy_run / "reproductions").glob("*/toy/smoke") if incomplete_note(p)]
    assert len(partial) == 1  # the killed reproduction's folder reads as partial
    again = harness_here("reproduce", target, *TRUST_TOY)
    assert again.returncode == 0, again.stderr
    assert client(toy_run).get_run(left.info.run_id).info.status == "KILLED"
    assert not [r for r in runs(toy_run, "reproduction") if r.info.status == "RUNNING"]


def test_an_incomplete_original_is_said_and_the_reproduction_marks_itself_until_done(toy_run, tmp_path):
    original = tmp_path / "original"
    shutil.copytree(toy_run / "toy", original / "toy")
    RunFolder(original, "toy", "smoke").mark_incomplete()  # its last run ended before every trial was stored
    out = tmp_path / "again"
    result = invoke("reproduce", original / "toy" / "smoke", "--out", out, "--no-mlflow")
    assert result.exit_code == 0, result.output
    assert "INCOMPLETE RUN" in result.output and "only the trials it stored are rerun" in result.output
    assert json.loads((out / "reproduction.json").read_text())["original"]["incomplete"] is True
    assert incomplete_note(out / "toy" / "smoke") == ""  # the reproduction stored every trial: complete
