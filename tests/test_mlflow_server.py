"""`--tracking-uri http://127.0.0.1:PORT` against a real `mlflow server` started on loopback."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest

from harness.core.processes import stop_process_group

from fault_injection import hang_guard
from test_cli_run import free_port, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.server]


@pytest.fixture
def mlflow_server(tmp_path):
    port = free_port()
    backend = f"sqlite:///{tmp_path / 'server.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend, "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1", "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("mlflow server exited during start-up")
            time.sleep(0.5)
    else:
        stop_process_group(proc)
        pytest.fail("mlflow server did not answer /health within 90 s")
    yield url
    stop_process_group(proc)  # the server and its uvicorn workers


def test_run_against_real_server(tmp_path, mlflow_server, toy_suite, harness_cmd, cli_env):
    proc = run_cli(harness_cmd, cli_env, "run", str(toy_suite), "--profile", "smoke",
                   "--results", str(tmp_path / "results"), "--tracking-uri", mlflow_server)
    assert proc.returncode == 0, proc.stderr
    import mlflow

    client = mlflow.MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("toy")
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.`harness.kind` = 'trial'")
    assert len(runs) == 3
    assert all(r.data.metrics["accuracy"] > 0.5 for r in runs)
    artifacts = client.list_artifacts(runs[0].info.run_id)
    assert any(a.path.endswith(".json") for a in artifacts)


def test_ui_serves_the_results_store_and_prints_runs_urls(tmp_path, toy_suite, harness_cmd, cli_env):
    results = tmp_path / "results"
    assert run_cli(harness_cmd, cli_env, "run", str(toy_suite), "--profile", "smoke", "--results", str(results)).returncode == 0
    port = free_port()
    proc = subprocess.Popen([*harness_cmd, "ui", "--results", str(results), "--port", str(port)], env=cli_env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        home, first_line = proc.stdout.readline(), proc.stdout.readline()
        assert home.rstrip() == f"Model training view: http://127.0.0.1:{port}/#/experiments?workflowType=machine_learning"
        assert first_line.startswith("toy: http://127.0.0.1:")
        assert first_line.rstrip().endswith("?workflowType=machine_learning")
        tags = mlflow.MlflowClient(f"sqlite:///{results / 'mlflow.db'}").get_experiment_by_name("toy").tags
        assert tags["mlflow.experimentKind"] == "custom_model_development"
        assert tags["mlflow.note.content"] == "momentum vs plain SGD on a fixed logistic regression"
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("harness ui did not serve /health within 90 s")
    finally:
        proc.terminate()
        proc.wait(timeout=hang_guard(30))
    # stopping harness ui stops the MLflow server it started, not only itself: nothing answers any more
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        except OSError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the MLflow server of harness ui still answers on port {port} after harness ui was stopped")


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory) -> Path:
    from harness.tracking.mlflow_tracker import MlflowTracker, default_tracking_uri

    results = tmp_path_factory.mktemp("results")
    MlflowTracker(default_tracking_uri(results)).client.search_experiments()  # creates the store
    return results


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the server's process group through /proc")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_ui_stops_its_whole_server_on_sigterm_and_ctrl_c(empty_store, harness_cmd, cli_env, stop):
    results = empty_store
    proc = subprocess.Popen([*harness_cmd, "ui", "--results", str(results), "--port", str(free_port())], env=cli_env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        printed = []  # the Model training view's URL and each experiment's, then the server line
        while not (printed and printed[-1].startswith("serving ")) and len(printed) < 50:
            printed.append(proc.stdout.readline())
        assert printed[-1].startswith("serving "), printed
        deadline = time.time() + 30
        while not (servers := _children(proc.pid)) and time.time() < deadline:
            time.sleep(0.1)
        assert servers, "harness ui started no server"
        proc.send_signal(stop)
        proc.wait(timeout=hang_guard(30))
    finally:
        proc.kill()
    deadline = time.time() + 15
    while time.time() < deadline:  # the server led its own process group: all of it is gone
        try:
            os.killpg(servers[0], 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"processes of the MLflow server group {servers[0]} outlived harness ui")
