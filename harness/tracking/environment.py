"""The environment a result was produced in: code version, libraries, hardware and determinism.

The code is named three ways: the git state of the checkout holding the suite (``git_*``), the
harness's own (``harness_*``, which differ when the task lives in another repository), and the
task's source hash (``task_code_sha256``, also part of every trial id), with the hash and names of
task files git does not track (``task_untracked_*``: a new file is in no diff).

Short values form ``environment()`` (stored with every trial and tagged on every MLflow run);
the long ones, the package lock and the uncommitted diff, are kept apart (``package_lock`` in
every trial record, ``provenance_texts`` as files of the suite's MLflow run) and referenced from
the short record by their sha256, so two environments can be compared key by key.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import torch

import harness
from harness.devices import cpu_capability, cpu_model, device_name
from harness.services.seeding import determinism_settings
from harness.tasks import Task
from harness.tasks.source import task_code
from harness.store import write_text_atomic
from harness.tracking.mlflow_tracker import redacted

PACKAGES_FILE = "packages.txt"
DIFF_FILE = "git.diff"
DIFF_DIR = "provenance"  # in a run folder: git-<sha256[:12]>.diff for each dirty tree it ran from
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")
HARNESS_DIR = Path(harness.__file__).resolve().parent


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


@lru_cache(maxsize=None)
def git_diff(cwd: Path) -> str | None:
    """The uncommitted changes to tracked files (``git diff HEAD``); None on a clean tree or outside git."""
    if not git_state(cwd)[1]:
        return None
    diff = _git("diff", "HEAD", "--no-color", "--no-ext-diff", cwd=cwd)
    return diff + "\n" if diff else None


@lru_cache(maxsize=1)
def package_lock() -> tuple[str, ...]:
    """``name==version`` of every distribution importable here, sorted: what a rerun must install."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.add(f"{name}=={dist.version}")
    return tuple(sorted(found, key=str.lower))


def untracked(files: list[Path]) -> list[Path]:
    """The files among ``files`` that sit in a git checkout but are not tracked by it."""
    found: list[Path] = []
    by_folder: dict[Path, list[Path]] = {}
    for path in files:
        by_folder.setdefault(path.resolve().parent, []).append(path.resolve())
    for folder, paths in sorted(by_folder.items()):
        listed = _git("ls-files", "--others", "--", *(p.name for p in paths), cwd=folder)
        found.extend(folder / name for name in (listed or "").splitlines() if name)
    return found


def task_environment(task: type[Task]) -> dict[str, str]:
    """The task's source hash (as in its trial ids) and its files git does not track."""
    code = task_code(task.__module__)
    loose = untracked(list(code.files.values()))
    names = [name for name, path in code.files.items() if path.resolve() in loose]
    digest = sha256_text("".join(f"{n}\0{code.files[n].read_text(encoding='utf-8', errors='replace')}" for n in names))
    return {
        "task_code_sha256": code.sha256,
        "task_untracked_files": " ".join(names) or "none",
        "task_untracked_sha256": digest if names else "none",
    }


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def environment(device: torch.device, repo: Path) -> dict[str, str]:
    """Everything short that can change a result or its speed, as strings (MLflow tags)."""
    repo = repo.resolve()
    commit, dirty = git_state(repo)
    diff = git_diff(repo)
    harness_commit, harness_dirty = git_state(HARNESS_DIR)
    lock = package_lock()
    env = {
        "git_commit": commit,
        "git_dirty": str(dirty).lower(),
        "git_diff_sha256": sha256_text(diff) if diff else "none",
        "harness_commit": harness_commit,
        "harness_dirty": str(harness_dirty).lower(),
        "harness_version": _distribution_version("harness"),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "torch_git": torch.version.git_version,
        "torch_debug": str(torch.version.debug).lower(),
        "cuda": torch.version.cuda or "none",
        "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none",
        "device": str(device),
        "device_name": device_name(device),
        "cpu_model": cpu_model(),
        "cpu_capability": cpu_capability(),
        "torch_threads": str(torch.get_num_threads()),
        "torch_interop_threads": str(torch.get_num_interop_threads()),
        "packages_count": str(len(lock)),
        "packages_sha256": sha256_text("\n".join(lock)),
        "argv": redacted(" ".join(sys.argv)),
    }
    env.update(determinism_settings(device))
    env.update({f"env_{name}": os.environ.get(name, "unset") for name in THREAD_VARIABLES})
    return env


def provenance_texts(repo: Path) -> dict[str, str]:
    """The long records as files for the suite's MLflow run: the lock, and the diff when dirty."""
    texts = {PACKAGES_FILE: "\n".join(package_lock()) + "\n"}
    diff = git_diff(repo.resolve())
    if diff:
        texts[DIFF_FILE] = diff
    return texts


def save_diff(run_dir: Path, repo: Path) -> Path | None:
    """Keep the uncommitted diff in the run folder, named by its hash (the records name the hash)."""
    diff = git_diff(repo.resolve())
    if not diff:
        return None
    path = Path(run_dir) / DIFF_DIR / f"git-{sha256_text(diff)[:12]}.diff"
    if not path.exists():
        write_text_atomic(path, diff)
    return path
