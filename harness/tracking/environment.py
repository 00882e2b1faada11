"""The environment a result was produced in: code version, libraries, hardware, determinism and the
numeric mode (``harness.core.numeric``: the ISA levels pinned, and the one torch dispatches to, ``cpu_capability``).

The code is named two ways: the git state of the harness checkout that ran (``git_*``, also written
``harness_*`` for a record read beside an outside task's; a suite's own tree is never read: it may be a
received folder whose git configuration names programs), and the task's source hash
(``task_code_sha256``, also part of every trial id), with the hash and names of task files git does
not track (``task_untracked_*``: a new file is in no diff) and the commit and dirty flag of the git
checkout the task's module sits in (``task_git_*``: a researcher's own task repository).

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

from harness.core import numeric
from harness.core.devices import cpu_capability, cpu_model, device_name, peak_flops
from harness.core.stored_fields import as_stored
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.services.seeding import determinism_settings
from harness.tasks import Task
from harness.tasks.source import task_code
from harness.store import write_text_atomic
from harness.tracking.mlflow_tracker import redacted
from harness.tracking.run_identity import current_run_id

PACKAGES_FILE = "packages.txt"
DIFF_FILE = "git.diff"
DIFF_DIR = "provenance"  # in a run folder: git-<sha256[:12]>.diff for each dirty tree it ran from
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")


# Reading a checkout must never run a command its configuration names: no fsmonitor, hooks, pager,
# external diff or textconv, no system or global configuration, no index refresh written back.
_GIT = ("git", "-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false",
        "--no-pager", "--no-optional-locks")
_GIT_ENVIRONMENT = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}


def code_checkout() -> Path:
    """The harness package's folder, in the checkout of the code that runs: the git state every record names.

    Suites are data (their content is stored whole in suite.json); the tree a suite file sits in may
    be a received folder whose git configuration names programs (a filter, an fsmonitor), so it is
    never read. The code that produced a result is this package's."""
    return Path(__file__).resolve().parents[1]


def _git(*args: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run([*_GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=True,
                             env={**os.environ, **_GIT_ENVIRONMENT})
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def read_git(*args: str, cwd: Path) -> str | None:
    """``git ARGS`` in ``cwd`` with every configured program off, as ``git_state`` reads: for a reader of a
    checkout that may be received (the evidence audit reads a suite file's history); None when git fails."""
    return _git(*args, cwd=cwd)


# The evidence folder holds what runs produce (sealed bundles, the ledger's seals), not code: a registered run
# that seals its first suite must not make the next suite's trials look as if they ran on changed code.
_NOT_CODE = ":(top,exclude)evidence"


@lru_cache(maxsize=None)
def git_state(cwd: Path) -> tuple[str, bool]:
    """(commit, dirty) of the checkout at cwd, its evidence folder aside; ('unknown', False) outside git."""
    commit = _git("rev-parse", "HEAD", cwd=cwd)
    if commit is None:
        return "unknown", False
    status = _git("status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all", "--", ".", _NOT_CODE,
                  cwd=cwd)
    return commit, bool(status)


@lru_cache(maxsize=None)
def git_diff(cwd: Path) -> str | None:
    """The uncommitted changes to tracked files (``git diff HEAD``); None on a clean tree or outside git."""
    if not git_state(cwd)[1]:
        return None
    diff = _git("diff", "HEAD", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all", "--",
                ":(top)", _NOT_CODE, cwd=cwd)
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
    """The task's source hash (as in its trial ids), its files git does not track, and the commit and
    dirty flag of the git checkout its module sits in ('none' outside git): a task package in the
    researcher's own repository is named by its own commit, beside the harness's ``git_commit``."""
    code = task_code(task.__module__)
    loose = untracked(list(code.files.values()))
    names = [name for name, path in code.files.items() if path.resolve() in loose]
    digest = sha256_text("".join(f"{n}\0{code.files[n].read_text(encoding='utf-8', errors='replace')}" for n in names))
    module = code.files.get(task.__module__)
    top = None if module is None else _git("rev-parse", "--show-toplevel", cwd=module.resolve().parent)
    commit, dirty = git_state(Path(top)) if top else ("none", None)
    return as_stored(TaskEnvironment(task_code_sha256=code.sha256, task_untracked_files=" ".join(names) or "none",
                                     task_untracked_sha256=digest if names else "none", task_git_commit=commit,
                                     task_git_dirty=dirty))


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def environment(device: torch.device) -> dict[str, str]:
    """Everything short that can change a result or its speed, as strings (MLflow tags)."""
    repo = code_checkout()
    commit, dirty = git_state(repo)
    diff = git_diff(repo)
    lock = package_lock()
    env = {
        "git_diff_sha256": sha256_text(diff) if diff else "none",
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
        "cpu_capability": cpu_capability(),
        "torch_interop_threads": str(torch.get_num_interop_threads()),
        "packages_count": str(len(lock)),
        "packages_sha256": sha256_text("\n".join(lock)),
        "argv": redacted(" ".join(sys.argv)),
    }
    env.update(determinism_settings(device))
    env.update(numeric.recorded())
    env["mkldnn_enabled"] = str(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled).lower()
    env.update({f"env_{name}": os.environ.get(name, "unset") for name in THREAD_VARIABLES})
    peak = peak_flops(device)
    return as_stored(TrialEnvironment(
        git_commit=commit, git_dirty=dirty, device=str(device), device_name=device_name(device), cpu_model=cpu_model(),
        torch_threads=str(torch.get_num_threads()),
        peak_fp32_flops=f"{peak:.4g}" if peak else "unknown",
        run_id=current_run_id(),  # harness run: the results folder's run (harness.tracking.run_identity)
        rest=env))


def provenance_texts() -> dict[str, str]:
    """The long records as files for the suite's MLflow run: the lock, and the diff when dirty."""
    texts = {PACKAGES_FILE: "\n".join(package_lock()) + "\n"}
    diff = git_diff(code_checkout())
    if diff:
        texts[DIFF_FILE] = diff
    return texts


def save_diff(run_dir: Path) -> Path | None:
    """Keep the uncommitted diff in the run folder, named by its hash (the records name the hash)."""
    diff = git_diff(code_checkout())
    if not diff:
        return None
    path = Path(run_dir) / DIFF_DIR / f"git-{sha256_text(diff)[:12]}.diff"
    if not path.exists():
        write_text_atomic(path, diff)
    return path
