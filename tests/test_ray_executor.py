"""`harness run --executor ray` against a real local Ray cluster, compared with a serial run."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fault_injection import hang_guard, harness_here
from harness.tasks import metric_family
from test_cli_run import free_port, run_cli, trial_files

pytestmark = [pytest.mark.integration, pytest.mark.ray]
REPO = Path(__file__).resolve().parent.parent
RAY = ("--executor", "ray", "--ray-workers", "2")


def stored(results: Path) -> dict[str, dict]:
    """Every stored record under a results folder, by trial id."""
    return {r["trial_id"]: r for r in (json.loads(p.read_text()) for p in results.glob("*/*/trials/*.json"))}


def quality(results: Path, record: dict) -> dict[str, float | None]:
    """The record's quality metrics, by the kinds its suite.json declares."""
    meta = json.loads((results / record["suite"] / record["profile"] / "suite.json").read_text())
    kinds = {name: metric["kind"] for name, metric in meta["metrics"].items()}
    return {k: v for k, v in record["metrics"].items() if kinds[metric_family(k)] == "quality"}


def test_ray_gives_the_serial_answers_bit_for_bit_and_flags_speed(tmp_path, toy_suite, harness_cmd, cli_env):
    both = tmp_path / "both.yaml"  # two suites, one cluster: the toy spine and a real task with a per-seed cache
    both.write_text(f"description: toy and routing\ninclude: [{toy_suite}, {REPO / 'suites' / 'routing.yaml'}]\n")
    args = ("run", str(both), "--profile", "smoke", "--no-mlflow")
    env = {**cli_env, "OMP_WAIT_POLICY": "PASSIVE"}  # spinning OpenMP threads crawl on a busy shared CPU
    ray = run_cli(harness_cmd, env, *args, "--results", str(tmp_path / "ray"), *RAY)
    # the reference in this process (its answers, not its process, are compared), at the workers' threads
    (threads,) = {r["environment"]["torch_threads"] for r in stored(tmp_path / "ray").values()}
    serial = harness_here(*args, "--results", str(tmp_path / "serial"), "--executor", "serial", "--threads", str(threads))
    assert serial.returncode == 0, serial.stderr
    assert ray.returncode == 0, ray.stderr
    serial_records, ray_records = stored(tmp_path / "serial"), stored(tmp_path / "ray")
    assert {r["suite"] for r in ray_records.values()} == {"toy", "routing"}
    assert ray_records.keys() == serial_records.keys()
    curves_compared = 0
    for trial_id, record in ray_records.items():
        expected = serial_records[trial_id]
        assert record["status"] == expected["status"] == "finished"
        assert quality(tmp_path / "ray", record) == quality(tmp_path / "serial", expected)  # exact floats
        # training curves, and a cache builder's (the backbone's) where both sides built it; routing's
        # control arms train nothing, so some trials have none
        shared = record["curves"].keys() & expected["curves"].keys()
        assert {k: record["curves"][k] for k in shared} == {k: expected["curves"][k] for k in shared}
        curves_compared += bool(shared)
        assert (record["environment"]["executor"], expected["environment"]["executor"]) == ("ray", "serial")
        assert record["details"]["speed_measured_under_load"] is True
        assert "speed_measured_under_load" not in expected["details"]
    assert curves_compared >= len(ray_records) // 2
    assert ray.stderr.count("measured under load") == 1
    finished = [line for line in ray.stderr.splitlines() if line.startswith(("[toy] ", "[routing] "))]
    assert len(finished) == len(ray_records)  # progress from the workers' trials, with the invocation's ETA
    assert all(re.search(r"\| \d+/\d+ trials, elapsed \d+:\d\d, ETA \d+:\d\d$", line) for line in finished)
    assert "compare speed only between serial runs" in ray.stdout
    assert "compare speed only between serial runs" not in serial.stdout
    for run in ("toy/smoke", "routing/smoke"):  # the same verdicts, claims and validity
        serial_summary, ray_summary = (json.loads((tmp_path / side / run / "report" / "summary.json").read_text())
                                       for side in ("serial", "ray"))
        for section, field in (("contrasts", "verdict"), ("claims", "result")):  # a speed verdict follows timings
            ray_rows, serial_rows = ([r[field] for r in summary[section] if r.get("kind") != "speed"]
                                     for summary in (ray_summary, serial_summary))
            assert ray_rows and ray_rows == serial_rows
        assert ray_summary["validity"]["status"] == serial_summary["validity"]["status"]


def test_dead_worker_is_a_failed_trial_the_others_finish_and_a_rerun_retries_it(tmp_path, toy_suite, harness_cmd,
                                                                               cli_env):
    suite = tmp_path / "crash.yaml"
    suite.write_text(toy_suite.read_text().replace("slow_lr: {lr: 0.001}", "slow_lr: {exit_process: true}"))
    results = tmp_path / "results"
    args = ("run", str(suite), "--profile", "smoke", "--results", str(results), "--no-mlflow", *RAY)
    first = run_cli(harness_cmd, cli_env, *args)
    assert first.returncode == 1, first.stderr
    records = {r["arm"]: r for r in stored(results).values()}
    assert {arm: r["status"] for arm, r in records.items()} == {"sgd": "finished", "momentum": "finished",
                                                                "slow_lr": "failed"}
    assert records["slow_lr"]["error"].startswith("TaskExit")  # os._exit is contained: a failed trial

    rerun = run_cli(harness_cmd, cli_env, *args)
    assert rerun.returncode == 1, rerun.stderr
    assert "1 ran, 2 already finished, 1 FAILED" in rerun.stdout
    assert [r["status"] for r in stored(results).values() if r["arm"] == "slow_lr"] == ["failed"]
    assert len(trial_files(results)) == 3


def test_ctrl_c_keeps_returned_records_and_stops_the_cluster(tmp_path, toy_suite, harness_cmd, cli_env):
    suite = tmp_path / "slow.yaml"
    slow = "params: {steps: 60, seconds_per_step: 0.05}"
    suite.write_text(toy_suite.read_text().replace("params: {steps: 60}", slow))
    results = tmp_path / "results"
    proc = subprocess.Popen([*harness_cmd, "run", str(suite), "--results", str(results), "--no-mlflow", *RAY],
                            env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(trial_files(results, profile="default")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=hang_guard(30))  # outstanding tasks cancelled, the local cluster shut down
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    stored_now = trial_files(results, profile="default")
    assert 2 <= len(stored_now) < 18
    assert all(json.loads(p.read_text())["status"] == "finished" for p in stored_now)


def test_unreachable_ray_address_fails_fast_in_one_line(tmp_path, toy_suite, harness_cmd, cli_env):
    results = tmp_path / "results"
    # the run gives up on its own (a connect timeout, not Ray's default retries for minutes); the
    # subprocess timeout is only a hang guard (run_cli scales it for a loaded machine)
    proc = run_cli(harness_cmd, cli_env, "run", str(toy_suite), "--profile", "smoke", "--results", str(results),
                   "--executor", "ray", "--ray-address", f"127.0.0.1:{free_port()}", timeout=180)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unreachable" in proc.stderr
    assert not trial_files(results)


def test_without_ray_installed_names_the_extra(tmp_path, toy_suite, cli_env):
    no_ray = [sys.executable, "-c", "import sys; sys.modules['ray'] = None; from harness.cli import main; main()"]
    proc = run_cli(no_ray, cli_env, "run", str(toy_suite), "--profile", "smoke", "--results", str(tmp_path),
                   "--executor", "ray")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --executor ray needs Ray: pip install 'harness[ray]'"


def _listening(pids: set[int]) -> list[str]:
    """The local address (hex, as /proc/net shows it) of each TCP socket these processes listen on."""
    inodes: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes[fields[9]] = fields[1].rsplit(":", 1)[0]
    found = []
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:  # the process ended meanwhile
            continue
        found += [inodes[link[8:-1]] for link in links if link.startswith("socket:[") and link[8:-1] in inodes]
    return found


def _descendants(root: int) -> set[int]:
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, ppid = stat.read_text().rsplit(")", 1)[1].split()[1], stat.parent.name
        except OSError:
            continue
        children.setdefault(int(pid), set()).add(int(ppid))
    found, frontier = {root}, [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from Linux's /proc")
def test_the_local_cluster_listens_on_loopback_only():
    """Ray's servers take no authentication: a local cluster must not be reachable from the network."""
    ray = pytest.importorskip("ray")
    from harness.execution.ray_executor import RayExecutor

    executor = RayExecutor(workers=1).start()
    try:
        def worker_pid() -> int:  # defined here, so Ray ships it by value (a worker cannot import tests/)
            return os.getpid()

        assert ray.get(ray.remote(worker_pid).remote()) != os.getpid()  # a worker process exists
        addresses = _listening(_descendants(os.getpid()))
    finally:
        executor.close()
    assert len(addresses) >= 4  # gcs_server, raylet, the driver and the worker
    assert set(addresses) <= LOOPBACK, addresses
