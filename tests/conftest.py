"""Shared fixtures: the toy task's suite files and a subprocess environment that can import it."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


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
