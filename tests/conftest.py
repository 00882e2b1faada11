"""Shared fixtures (the toy task's suite files, a subprocess environment that can import it) and the
test tiers: a test that spawns the CLI, starts a server or a Ray cluster must be marked
``integration``, so the fast tier (``tox -e fast``: ``-m "not integration"``) stays in-process."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.core.numeric import DETERMINISTIC, set_environment

# Before any test module imports torch, which reads the pins once: a run in this process trains under
# the mode the CLI defaults to (its in-process check refuses a torch loaded unpinned).
set_environment(DETERMINISTIC)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
EXAMPLE_TASK_DIR = REPO / "examples" / "feature_gate"  # the new-task template: its task is held to the contract
sys.path.insert(0, str(EXAMPLE_TASK_DIR))


@pytest.fixture(autouse=True)
def no_job_summary(monkeypatch) -> None:
    """Tests run inside GitHub Actions must not write into the job's summary (a test sets its own)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def toy_suite() -> Path:
    return TESTS / "suites" / "toy.yaml"


@pytest.fixture
def cli_env() -> dict[str, str]:
    """Environment for `python -m harness ...` subprocesses: the toy task importable, no colour."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(REPO), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def harness_cmd() -> list[str]:
    return [sys.executable, "-m", "harness"]


SUBPROCESS_FIXTURES = frozenset({"harness_cmd", "cli_env"})
INTEGRATION_ONLY_MARKERS = ("server", "ray")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a test that belongs to the integration tier but is not marked so: the fast tier must not
    quietly grow subprocess runs, servers or clusters. Under pytest-xdist (``--dist loadgroup``) the
    Ray tests share one worker: each starts a whole local cluster, and two at once on a 2-core machine
    would starve each other's workers past their timeouts."""
    misplaced = []
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray-cluster"))
        if item.get_closest_marker("integration") is not None:
            continue
        if SUBPROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            misplaced.append(f"{item.nodeid} (spawns the CLI)")
        elif any(item.get_closest_marker(name) is not None for name in INTEGRATION_ONLY_MARKERS):
            misplaced.append(f"{item.nodeid} (starts a server or cluster)")
    if misplaced:
        raise pytest.UsageError("mark these tests @pytest.mark.integration: " + "; ".join(misplaced[:10]))
