"""`--tracking-uri http://127.0.0.1:PORT` against a real `mlflow server` started on loopback."""
from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import pytest

from harness.processes import stop_process_group

from test_cli_run import free_port, run_cli

pytestmark = pytest.mark.server


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
        first_line = proc.stdout.readline()
        assert first_line.startswith("toy: http://127.0.0.1:")
        assert first_line.rstrip().endswith("?workflowType=machine_learning")
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
        proc.wait(timeout=30)
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
