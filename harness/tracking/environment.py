"""The environment a result was produced in: code version, libraries and hardware."""
from __future__ import annotations

import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import torch

from harness.devices import cpu_model, device_name


def _git(*args: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@lru_cache(maxsize=None)
def git_state(cwd: Path) -> tuple[str, bool]:
    """(commit, dirty) of the checkout holding the suite; ('unknown', False) outside git."""
    commit = _git("rev-parse", "HEAD", cwd=cwd)
    if commit is None:
        return "unknown", False
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=cwd)
    return commit, bool(status)


def environment(device: torch.device, repo: Path) -> dict[str, str]:
    commit, dirty = git_state(repo.resolve())
    return {
        "git_commit": commit,
        "git_dirty": str(dirty).lower(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "device": str(device),
        "device_name": device_name(device),
        "cpu_model": cpu_model(),
        "torch_threads": str(torch.get_num_threads()),
        "argv": " ".join(sys.argv),
    }
