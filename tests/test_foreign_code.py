"""Code that is not ours never runs and never takes the process down: a task named by a received record is
imported only when it is registered or trusted by ``--task-path`` (never from the record's folder or the
current one), and a ``harness.tasks`` plugin that raises, exits or prints at import, or shares its name
with another plugin, is named in one line while the other tasks still load."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fault_injection import hang_guard, harness_here
from records import make_record

from harness.core.record import to_json
from harness.tasks import rescan_tasks

PLANTED = 'open({marker!r}, "w").write("ran")\nfrom toy_task import ToyTask as Task\n'
EXITING = {"exits_task": "import os\nos._exit(0)\n", "posix_exits_task": "import posix\nposix._exit(0)\n"}
PLUGINS = {  # module -> its source; each is registered under its own name by a distribution of its own
    "boom_task": "raise RuntimeError('plugin broken on purpose')\n",
    "quits_task": "import sys\nsys.exit(0)\n",
    "chatty_task": "print('hello from a plugin')\nfrom toy_task import ToyTask as Task\n",
}


def received_trial(folder: Path, task: str) -> Path:
    """One trial record, as a folder someone sent would hold it, naming ``task``."""
    folder.mkdir(parents=True, exist_ok=True)
    record = make_record("0123456789abcdef", "sgd", 0, task=task, params={"steps": 5})
    path = folder / "0123456789abcdef.json"
    path.write_text(json.dumps(to_json(record)))
    return path


@pytest.mark.parametrize("task", ["this:Task", "evil_mod:Task", "harness.tasks.base:Task"])
def test_a_record_naming_an_unregistered_task_is_refused_before_anything_is_imported(tmp_path, task):
    """``this`` prints the Zen of Python when imported: the record is refused before that can happen."""
    marker = tmp_path / "ran"
    (tmp_path / "sent" / "evil_mod.py").parent.mkdir()
    (tmp_path / "sent" / "evil_mod.py").write_text(PLANTED.format(marker=str(marker)))
    sys.modules.pop("this", None)
    done = harness_here("reproduce", str(received_trial(tmp_path / "sent", task)), "--no-mlflow",
                        "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"task {task!r} is not a registered task" in line and f"--task-path {task}" in line
    assert "this" not in sys.modules and not marker.exists() and not (tmp_path / "out").exists()


@pytest.mark.integration
def test_python_m_harness_never_imports_from_the_current_folder(tmp_path, harness_cmd, cli_env):
    """Even trusted by name, ``evil_mod`` is not found in the received folder that is the current one."""
    marker = tmp_path / "ran"
    sent = tmp_path / "sent"
    trial = received_trial(sent, "evil_mod:Task")
    (sent / "evil_mod.py").write_text(PLANTED.format(marker=str(marker)))
    for trust in ((), ("--task-path", "evil_mod:Task")):
        done = subprocess.run([*harness_cmd, "reproduce", trial.name, "--no-mlflow", "--out", str(tmp_path / "out"),
                               *trust], cwd=sent, env=cli_env, capture_output=True, text=True,
                              timeout=hang_guard(300))
        assert done.returncode == 2, done.stdout + done.stderr
        assert not marker.exists(), "a module of the received folder ran"
        assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot import module 'evil_mod'" in done.stderr


RECEIVED_HARNESS = "print('the received folder\\'s harness ran')\nraise SystemExit(0)\n"


@pytest.mark.integration
@pytest.mark.parametrize("extra", ["", os.pathsep, f".{os.pathsep}"])  # as given, an empty entry, '.'
def test_python_m_harness_in_a_folder_that_ships_a_harness_package_runs_the_installed_one(
        tmp_path, harness_cmd, cli_env, extra):
    """``python -m`` finds the package it runs before any of the harness's code: the start-up file the
    package installs (setup.py) imports the installed harness first, so the folder's own never runs."""
    sent = tmp_path / "sent"
    (sent / "harness").mkdir(parents=True)
    for module in ("__init__.py", "__main__.py"):
        (sent / "harness" / module).write_text(RECEIVED_HARNESS)
    env = {**cli_env, "PYTHONPATH": extra + cli_env["PYTHONPATH"]}
    done = subprocess.run([*harness_cmd, "--help"], cwd=sent, env=env, capture_output=True, text=True,
                          timeout=hang_guard(150))
    assert "harness ran" not in done.stdout + done.stderr, (
        "the received folder's harness package ran: is harness-path-guard.pth installed (pip install -e .)?")
    assert done.returncode == 0 and "Usage:" in done.stdout, done.stdout + done.stderr


def install_plugins(root: Path, sources: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Installed-looking distributions (a .dist-info each) under ``root``: one per module of ``sources``,
    registering it under its name without ``_task``, and two packages that register one name ``twin``."""
    root.mkdir()
    registered = {module: [(module.removesuffix("_task"), f"{module}:Task")] for module in sources}
    registered["twin_one"] = [("twin", "twin_one:Task")]
    registered["twin_two"] = [("twin", "twin_two:Task")]
    for module, entries in registered.items():
        (root / f"{module}.py").write_text(sources.get(module, "from toy_task import ToyTask as Task\n"))
        info = root / f"{module}_plugin-1.0.dist-info"  # the folder's name is the distribution's, normalized
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}-plugin\nVersion: 1.0\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entries)
        (info / "entry_points.txt").write_text(f"[harness.tasks]\n{lines}")
    return registered


@pytest.fixture
def plugins(tmp_path, monkeypatch) -> Path:
    """The PLUGINS installed for this test (on sys.path, found by a rescan); the exiting ones are tested in
    a process of their own: a harness that let one through would end pytest itself, with status 0."""
    root = tmp_path / "site"
    registered = install_plugins(root, PLUGINS)
    monkeypatch.syspath_prepend(str(root))
    rescan_tasks()
    yield root
    for module in registered:
        sys.modules.pop(module, None)
    monkeypatch.undo()
    rescan_tasks()


def test_broken_plugins_are_named_in_one_line_and_the_other_tasks_still_list(plugins):
    listed = harness_here("list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    lines = listed.stdout.splitlines()

    def line_of(name: str) -> str:
        (line,) = [line for line in lines if line.startswith(f"{name}:") or line.startswith(f"{name}  ")]
        return line

    assert "raised RuntimeError at import: plugin broken on purpose" in line_of("boom")
    assert "module 'quits_task' called sys.exit(0) at import" in line_of("quits")
    twin = line_of("twin")
    assert "registered by two packages" in twin and "twin_one:Task" in twin and "twin_two:Task" in twin
    assert line_of("chatty").startswith("chatty  (v") and "hello from a plugin" not in listed.stdout
    assert "task 'chatty': module 'chatty_task' printed 20 character(s) at import" in listed.stderr
    assert line_of("er2").startswith("er2  (v") and line_of("vocab").startswith("vocab  (v")  # the others load


@pytest.mark.parametrize("name, says", [("boom", "raised RuntimeError at import"),
                                        ("quits", "called sys.exit(0) at import"),
                                        ("twin", "is registered by two packages")])
def test_a_suite_of_a_broken_plugin_is_one_line_with_exit_2(plugins, tmp_path, name, says):
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: s\ntask: {name}\nseeds: [0]\narms:\n  a: {{}}\n")
    done = harness_here("run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {suite}:2: task: task {name!r}") and says in line


@pytest.mark.integration
def test_plugins_that_call_os_exit_at_import_are_named_and_the_list_goes_on(tmp_path, harness_cmd, cli_env):
    install_plugins(tmp_path / "site", EXITING)
    env = {**cli_env, "PYTHONPATH": f"{tmp_path / 'site'}:{cli_env['PYTHONPATH']}"}
    done = subprocess.run([*harness_cmd, "list"], env=env, capture_output=True, text=True, timeout=hang_guard(300))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "exits: unavailable (task 'exits': module 'exits_task' called os._exit(0) at import)" in done.stdout
    assert "posix_exits: unavailable (task 'posix_exits': module 'posix_exits_task' called os._exit(0)" in done.stdout
    assert "twin: unavailable (task 'twin' is registered by two packages" in done.stdout
    listed = done.stdout.splitlines()
    assert any(line.startswith("vocab  (v") for line in listed)  # the others, after the exits
    assert any(line.startswith("routing  (v") for line in listed)


@pytest.mark.integration
@pytest.mark.parametrize("source", ["import os\nos._exit(0)\n",
                                    "import posix\nfrom toy_task import ToyTask\n\n\nclass Task(ToyTask):\n"
                                    "    def run(self, params, ctx):\n        posix._exit(0)\n"])
def test_a_task_that_ends_the_process_with_status_0_never_reads_as_success(tmp_path, source, harness_cmd, cli_env):
    """At import or while training, in a process of its own: the run still exits nonzero."""
    (tmp_path / "quitter.py").write_text(source)
    suite = tmp_path / "s.yaml"
    suite.write_text("suite: s\ntask: quitter:Task\nseeds: [0]\nparams: {steps: 5}\narms:\n  a: {}\n")
    env = {**cli_env, "PYTHONPATH": f"{tmp_path}:{cli_env['PYTHONPATH']}"}
    done = subprocess.run([*harness_cmd, "run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow",
                           "--executor", "serial"], env=env, capture_output=True, text=True,
                          timeout=hang_guard(300))
    assert done.returncode != 0, done.stdout + done.stderr
    assert "os._exit(0)" in done.stdout + done.stderr
