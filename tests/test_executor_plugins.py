"""An executor plugin cannot end or take over a command: its module is imported only when a run names it,
whatever it does at import is one ``error:`` line with exit 2, a built-in name stays the harness's own,
and the gate refuses trials of another package's executor that the baseline's run did not use."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fault_injection import hang_guard, harness_here
from test_gating_baseline import invoke, make_run

from harness.execution.registry import ENTRY_POINT_GROUP, executor_kind, executor_names
from harness.execution.serial import Serial

KIND = ("from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Options:\n    pass\n\n\n"
        "class Kind:\n    name = {name!r}\n    Options = Options\n\n    @staticmethod\n"
        "    def slots(options, device, threads):\n        return 0\n\n    @staticmethod\n"
        "    def start(options, slots):\n        raise RuntimeError('a plugin started')\n")


def install(root: Path, package: str, entries: dict[str, str], source: str) -> None:
    """A distribution ``package`` (its .dist-info) under ``root`` whose module registers ``entries``
    (name -> attribute) in the executors' group."""
    module = package.replace("-", "_")
    root.mkdir(exist_ok=True)
    (root / f"{module}.py").write_text(source)
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {module}:{attr}\n" for name, attr in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for module in [m for m, found in sys.modules.items() if (getattr(found, "__file__", None) or "").startswith(str(root))]:
        sys.modules.pop(module)


def error_line(stderr: str) -> str:
    """The one ``error:`` line of a refused command (other lines may say what the run is)."""
    (line,) = [line for line in stderr.splitlines() if line.startswith("error:") or "Traceback" in line]
    return line


def run_with(tmp_path: Path, executor: str):
    tmp_path.mkdir(exist_ok=True)
    suite = tmp_path / "s.yaml"
    suite.write_text("suite: s\ntask: toy_task:ToyTask\nseeds: [0]\nparams: {steps: 5}\narms:\n  a: {}\n")
    return harness_here("run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow", "--executor", executor)


@pytest.mark.parametrize("source, says", [
    ("raise RuntimeError('broken on purpose')\n", "raised RuntimeError at import: broken on purpose"),
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) at import"),
    ("import os\nos._exit(0)\n", "called os._exit(0) at import"),
])
def test_a_plugin_that_raises_or_exits_at_import_is_one_error_line_with_exit_2(site, tmp_path, source, says):
    install(site, "quitter", {"quitter": "Kind"}, source)
    done = run_with(tmp_path, "quitter")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = error_line(done.stderr)
    assert line.startswith("error: executor 'quitter': module 'quitter'") and says in line, line
    assert not (tmp_path / "r" / "s").exists()


def test_the_help_and_other_executors_import_no_plugin(site, tmp_path):
    marker = tmp_path / "imported"
    install(site, "eager", {"eager": "Kind"}, f"open({str(marker)!r}, 'w').write('ran')\n" + KIND.format(name="eager"))
    helped = harness_here("run", "--help")
    assert helped.returncode == 0 and "eager" in helped.stdout
    assert run_with(tmp_path, "serial").returncode == 0
    assert not marker.exists() and "eager" not in sys.modules
    started = run_with(tmp_path / "named", "eager")  # named: imported, and its own refusal is one line
    assert marker.exists() and started.returncode != 0


def test_a_plugin_registering_a_built_in_name_never_replaces_it(site, tmp_path):
    install(site, "forger", {"serial": "Kind", "auto": "Kind"}, KIND.format(name="serial"))
    assert executor_names().count("serial") == 1 and executor_names().count("auto") == 1
    assert executor_kind("serial") is Serial
    assert run_with(tmp_path, "serial").returncode == 0 and "forger" not in sys.modules


def test_a_name_two_packages_register_is_refused_naming_both(site, tmp_path):
    install(site, "twin-one", {"twin": "Kind"}, KIND.format(name="twin"))
    install(site, "twin-two", {"twin": "Kind"}, KIND.format(name="twin"))
    done = run_with(tmp_path, "twin")
    line = error_line(done.stderr)
    assert done.returncode == 2 and line.startswith("error: executor 'twin' is registered by two packages")
    assert "twin-one (twin_one:Kind)" in line and "twin-two (twin_two:Kind)" in line


def test_a_plugin_that_records_a_built_in_name_is_refused(site, tmp_path):
    source = KIND.format(name="sly").replace("raise RuntimeError('a plugin started')",
                                             "from harness.execution.serial import SerialExecutor\n"
                                             "        return SerialExecutor()")
    install(site, "sly", {"sly": "Kind"}, source)
    done = run_with(tmp_path, "sly")
    assert done.returncode == 2, done.stderr
    assert error_line(done.stderr) == ("error: executor 'sly' records its trials as executor 'serial'; an executor of "
                                   "another package records them under the name it is registered by")


@pytest.mark.integration
def test_a_plugin_calling_os_exit_at_import_in_a_process_of_its_own_exits_2(tmp_path, harness_cmd, cli_env):
    """The process itself survives: the gate or run that named it can never read as a success."""
    install(tmp_path / "site", "quitter", {"quitter": "Kind"}, "import os\nos._exit(0)\n")
    suite = tmp_path / "s.yaml"
    suite.write_text("suite: s\ntask: toy_task:ToyTask\nseeds: [0]\nparams: {steps: 5}\narms:\n  a: {}\n")
    env = {**cli_env, "PYTHONPATH": f"{tmp_path / 'site'}:{cli_env['PYTHONPATH']}"}
    for args in (["--help"], ["run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow"]):
        assert subprocess.run([*harness_cmd, *args], env=env, capture_output=True,
                              timeout=hang_guard(150)).returncode == 0
    done = subprocess.run([*harness_cmd, "run", str(suite), "--results", str(tmp_path / "q"), "--no-mlflow",
                           "--executor", "quitter"], env=env, capture_output=True, text=True,
                          timeout=hang_guard(150))
    assert done.returncode == 2 and error_line(done.stderr).startswith("error: executor 'quitter'"), done.stderr
    assert "os._exit(0)" in error_line(done.stderr)


@pytest.mark.parametrize("baseline_executor, run_executor, refused", [
    (None, "serial", False),  # a baseline saved before executors were recorded gates the built-in ones
    (None, "plugged", True),
    ("parallel", "serial", False),  # the built-in ones give the same answers bit for bit
    ("plugged", "plugged", False),
    ("parallel", "plugged", True),
])
def test_the_gate_refuses_trials_of_an_executor_the_baseline_did_not_use(tmp_path, baseline_executor, run_executor,
                                                                          refused):
    recorded = {"executor": baseline_executor} if baseline_executor else {}
    saved = invoke("baseline", "save", make_run(tmp_path / "reference", environment=recorded),
                   "--out", tmp_path / "baselines")
    assert saved.exit_code == 0, saved.output
    done = invoke("gate", make_run(tmp_path / "current", environment={"executor": run_executor}),
                  "--baselines-dir", tmp_path / "baselines")
    if refused:
        assert done.exit_code == 2 and len(done.stderr.strip().splitlines()) == 1, done.output
        assert done.stderr.startswith(f"error: refusing to gate: trials of these results ran under executor "
                                      f"'{run_executor}', another package's"), done.stderr
    else:
        assert done.exit_code == 0, done.output
