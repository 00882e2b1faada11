"""A fourth mechanism: ``harness new-task`` writes a package that runs as generated, a task is found
through the ``harness.tasks`` entry point, an edit to a task's code reruns its stored trials,
``validate --resolved`` says where each param comes from, and a treatment that changes nothing is named."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import api
from harness.cli import main
from harness.scaffold import class_stem
from harness.tasks import load_task, registered_tasks, rescan_tasks
from harness.tasks.source import task_code
from harness.core.terminal import Console
from harness.testing import check_task_contract

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
EXAMPLE = REPO / "examples" / "feature_gate"


def _scaffold(name: str, out: Path) -> None:
    result = CliRunner().invoke(main, ["new-task", name, "--out", str(out)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name, why", [
    ("Bad-name", "is not a plain word"),
    ("class", "is not a plain word"),  # a Python keyword: the package could not be imported
    ("er2", "is already registered"),
    ("json", "is already an importable module"),
    ("tests", "is reserved"),  # the package's own tests/ folder
    ("con", "is reserved"),  # a device name on Windows
])
def test_new_task_refuses_a_name_in_one_line_writing_nothing(tmp_path: Path, name: str, why: str) -> None:
    out = tmp_path / "pkg"
    result = CliRunner().invoke(main, ["new-task", name, "--out", str(out)])
    assert result.exit_code == 2
    assert why in result.output and result.output.count("\n") == 1, result.output
    assert not out.exists()


def test_new_task_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["new-task", "fresh_task", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "is not an empty folder" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_new_task_refuses_an_out_that_is_a_link_even_a_dangling_one(tmp_path: Path) -> None:
    link = tmp_path / "pkg"
    link.symlink_to(tmp_path / "nowhere" / "pkg")
    result = CliRunner().invoke(main, ["new-task", "fresh_task", "--out", str(link)])
    assert result.exit_code == 2 and "is a symbolic link" in result.output and result.output.count("\n") == 1
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.integration  # the generated task run twice, as its own contract test does
def test_the_generated_task_honours_the_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _scaffold("fourth_mechanism", tmp_path / "pkg")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    task_cls = load_task("fourth_mechanism.task:FourthMechanismTask")
    record = check_task_contract(task_cls, tmp_path / "work")
    assert set(record.metrics) == {"accuracy", "test_loss", "param_bytes", "train_samples_per_s"}
    assert 0 <= record.metrics["accuracy"] <= 1
    assert class_stem("fourth_mechanism") == "FourthMechanism"


def _dist_info(site: Path, name: str, target: str) -> None:
    """What an install leaves for importlib.metadata: a dist-info folder with the entry point."""
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[harness.tasks]\n{name} = {target}\n")


def test_a_task_registered_by_another_package_is_listed_and_loads(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _scaffold("outside_task", tmp_path / "pkg")
    _dist_info(tmp_path / "pkg", "outside_task", "outside_task.task:OutsideTaskTask")
    _dist_info(tmp_path / "other", "er2", "outside_task.task:OutsideTaskTask")  # a built-in name is not taken over
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    monkeypatch.syspath_prepend(str(tmp_path / "other"))
    rescan_tasks()
    try:
        assert registered_tasks()["outside_task"] == "outside_task.task:OutsideTaskTask"
        assert load_task("outside_task").name == "outside_task"
        assert load_task("er2").__module__ == "harness.tasks.er2.task"
        listed = CliRunner().invoke(main, ["list"])
        assert "outside_task  (v1)" in listed.output
        validated = CliRunner().invoke(main, ["validate", str(tmp_path / "pkg" / "suite.yaml"), "--profile", "smoke"])
        assert validated.exit_code == 0 and "task outside_task v1, 4 arms, 2 seeds, 8 trials" in validated.output
    finally:
        rescan_tasks()


def test_validate_resolved_names_where_each_param_comes_from(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite: precedence\ntask: toy_task:ToyTask\nseeds: [0]\nparams: {steps: 50, lr: 0.5}\n"
        "arms:\n  plain: {}\n  long: {steps: 1600, sweep: {momentum: [0.0, 0.9]}}\n"
        "profiles:\n  smoke: {params: {steps: 40, lr: 0.2}, arms: {long: {steps: 30}}}\n"
    )
    result = CliRunner().invoke(main, ["validate", str(suite), "--profile", "smoke", "--resolved"])
    assert result.exit_code == 0, result.output
    arms = result.output.split("  arm ")
    plain, long = arms[1], arms[2]
    assert "steps = 40  " in plain and "(profile smoke params)" in plain.split("steps = 40")[1].splitlines()[0]
    assert "features = 8" in plain and "(task default)" in plain.split("features = 8")[1].splitlines()[0]
    assert "(profile smoke arms.long)" in long.split("steps = 30")[1].splitlines()[0]  # the override beats the arm
    assert "(profile smoke params)" in long.split("lr = 0.2")[1].splitlines()[0]
    assert "(arm sweep)" in long.split("momentum = [0.0, 0.9]")[1].splitlines()[0]


EDITED_TASK = '''
from pydantic import Field

from harness.tasks import Metric, Task, TaskParams


class EditedParams(TaskParams):
    offset: float = Field(0.0, ge=0)


class EditedTask(Task):
    name = "edited"
    version = "1"
    Params = EditedParams
    metrics = (Metric(name="score", direction="higher", unit="points", kind="quality"),)

    def run(self, params, ctx):
        return {"score": params.offset + SHIFT}


SHIFT = 1.0
'''


def _run(suite: Path, results: Path) -> tuple[api.RunResult, str]:
    log = io.StringIO()
    outcome = api.run(suite, api.RunOptions(results=results, mlflow=False, threads=1), console=Console(log))
    return outcome, log.getvalue()


def test_an_edit_to_the_task_code_reruns_its_stored_trials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "code" / "edited_task.py"
    module.parent.mkdir()
    module.write_text(EDITED_TASK)
    monkeypatch.syspath_prepend(str(module.parent))
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: edited\ntask: edited_task:EditedTask\nseeds: [0, 1]\n"
                     "arms:\n  base: {offset: 0}\n  more: {offset: 1}\n")
    trials = tmp_path / "results" / "edited" / "default" / "trials"

    first, _ = _run(suite, tmp_path / "results")
    assert first.suites[0].outcome.ran == 4
    again, _ = _run(suite, tmp_path / "results")
    assert again.suites[0].outcome.ran == 0  # unchanged code: the stored trials are reused

    # the version is not bumped; the comment changes the file's size, so a bytecode cache written in the
    # same second as the first version (same mtime) cannot be taken for the edited source
    module.write_text(EDITED_TASK.replace("SHIFT = 1.0", "SHIFT = 2.0  # edited"))
    monkeypatch.delitem(sys.modules, "edited_task")
    task_code.cache_clear()
    edited, log = _run(suite, tmp_path / "results")
    assert edited.suites[0].outcome.ran == 4
    assert "4 stored trial(s) of edited/default ran other task code (its source changed since they ran)" in log
    records = [json.loads(p.read_text()) for p in sorted(trials.glob("*.json"))]
    assert sorted(r["metrics"]["score"] for r in records) == [2.0, 2.0, 3.0, 3.0]  # only the new code's numbers
    assert {r["environment"]["task_code_sha256"] for r in records} == {task_code("edited_task").sha256}
    assert len(list((trials / "superseded").glob("*.json"))) == 4
    assert records[0]["environment"]["git_commit"] and "harness_commit" not in records[0]["environment"]
    assert records[0]["environment"]["task_untracked_files"] in ("none", "edited_task")


def test_a_treatment_identical_to_its_control_is_named(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(  # nan_at_step past the last step: an arm that changes nothing
        "suite: noop\ntask: toy_task:ToyTask\nseeds: [0, 1]\nparams: {steps: 10, samples: 32}\n"
        "arms:\n  sgd: {}\n  noop: {nan_at_step: 1000}\n  momentum: {momentum: 0.9}\n"
        "contrasts:\n  - {treatment: noop, control: sgd}\n  - {treatment: momentum, control: sgd}\n"
        "claims:\n  - {contrast: noop-vs-sgd, metric: accuracy, test: superior}\n"
        "  - {contrast: momentum-vs-sgd, metric: accuracy, test: superior}\n"
    )
    outcome, _ = _run(suite, tmp_path / "results")
    rows = {line.split("|")[1].strip(): line for line in outcome.summary.splitlines() if line.startswith("| ")}
    assert "(arms identical)" in rows["noop-vs-sgd"]
    assert "(arms identical)" not in rows["momentum-vs-sgd"]
    assert "**noop-vs-sgd:** treatment and control bit-identical on every seed" in outcome.summary
    verdicts = (tmp_path / "results" / "noop" / "default" / "report" / "verdicts.txt").read_text()
    assert "bit-identical on every seed" in verdicts
    summary = json.loads((tmp_path / "results" / "noop" / "default" / "report" / "summary.json").read_text())
    assert {c["variant"]: c["identical_arms"] for c in summary["claims"]} == {"noop-vs-sgd": True,
                                                                              "momentum-vs-sgd": False}


def _layered_venv(path: Path) -> Path:
    """A venv over this interpreter's packages (no copies): what a researcher's own venv is, cheaply."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_over_harness_venv.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return python


@pytest.mark.integration  # pip installs two task packages (editable) and runs their smoke profiles
def test_installed_task_packages_are_listed_and_their_smoke_profiles_print_a_verdict(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    """The path docs/new-task.md walks: the scaffold and the shipped example, each installed as a package
    into a researcher's venv, found through the harness.tasks entry points with nothing on PYTHONPATH."""
    _scaffold("demo", tmp_path / "demo")
    example = shutil.copytree(EXAMPLE, tmp_path / "example")  # the build writes its egg-info beside it
    python = _layered_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "-e", str(tmp_path / "demo"), "-e", str(example)],
                   check=True, env=cli_env)
    harness = [str(python), "-m", "harness"]
    listed = subprocess.run([*harness, "list"], capture_output=True, text=True, env=cli_env, cwd=tmp_path)
    headings = [line.split("  (v")[0] for line in listed.stdout.splitlines() if "  (v" in line]
    assert {"demo", "feature_gate", "er2"} <= set(headings), headings
    by_name = tmp_path / "feature_gate_by_name.yaml"  # the example's suite naming its task as installed
    by_name.write_text((example / "suite.yaml").read_text().replace("task: feature_gate:FeatureGateTask",
                                                                     "task: feature_gate"))
    for suite, name, row in ((tmp_path / "demo" / "suite.yaml", "demo", r"\| treatment-vs-control +\| accuracy +\|"),
                             (by_name, "feature_gate", r"\| gated-vs-linear +\| test_mse +\|")):
        ran = subprocess.run([*harness, "run", str(suite), "--profile", "smoke", "--threads", "1", "--no-mlflow",
                              "--results", str(tmp_path / "results")], capture_output=True, text=True, env=cli_env,
                             cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr[-2000:]
        written = (tmp_path / "results" / "summary.md").read_text()
        assert "## harness summary" in ran.stdout and f"### {name} (smoke): validity" in written
        assert re.search(row, written) and "**Totals:**" in ran.stdout


def test_the_record_names_task_files_git_does_not_track(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.tracking.environment import task_environment

    package = tmp_path / "repo" / "untracked_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("WIDTH = 3\n")
    (package / "task.py").write_text(EDITED_TASK.replace("SHIFT = 1.0", "from untracked_pkg.model import WIDTH as SHIFT"))
    git = ["git", "-C", str(tmp_path / "repo"), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "untracked_pkg/__init__.py", "untracked_pkg/task.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "task"], check=True)
    monkeypatch.syspath_prepend(str(tmp_path / "repo"))
    task_cls = load_task("untracked_pkg.task:EditedTask")

    env = task_environment(task_cls)
    assert list(task_code("untracked_pkg.task").files) == ["untracked_pkg", "untracked_pkg.model", "untracked_pkg.task"]
    assert env["task_untracked_files"] == "untracked_pkg.model"  # imported by the task, in no commit and no diff
    assert env["task_untracked_sha256"] != "none" and env["task_code_sha256"] == task_code("untracked_pkg.task").sha256
