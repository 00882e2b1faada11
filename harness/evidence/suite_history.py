"""A suite file's history in the repository that holds a bundle: its design at a commit, and the commit
that introduced that design.

The repository may be a received clone, so git is read as ``tracking.environment`` reads it: with every
configured program (fsmonitor, hooks, filters, textconv, pager) off. A design is what the project's own
loader makes of the suite file at that commit (``Suite.locked_design``), so two files that differ only in
comments, order or params outside the design have the same one.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from harness.core.stored_fields import as_stored
from harness.execution.runner import with_declarations
from harness.store import canonical_json
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import Suite, SuiteError
from harness.suite.stored import StoredSuite
from harness.suite.tuning_lock import lock_path
from harness.tracking.environment import read_git

_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Commit:
    sha: str
    time: int  # the later of its author and committer dates (seconds since the epoch)


class DesignUnreadable(ValueError):
    """The suite file at a commit is missing or does not load: the message says which and why."""


@dataclass
class Repository:
    """The git checkout at ``root``, with what it has loaded kept (a bundle's trials share a few commits)."""

    root: Path
    _designs: dict[tuple[str, str, str, str], str] = field(default_factory=dict, repr=False)
    _analysed: dict[tuple[str, str, str, str], StoredSuite] = field(default_factory=dict, repr=False)

    @classmethod
    def containing(cls, path: Path) -> Repository | None:
        """The checkout that holds ``path`` (a file or folder); None outside git."""
        folder = Path(path) if Path(path).is_dir() else Path(path).parent
        top = read_git("rev-parse", "--show-toplevel", cwd=folder.resolve())
        return cls(Path(top)) if top else None

    def commit(self, sha: str) -> Commit | None:
        """The commit ``sha`` (40 hex digits) names, when this repository has it."""
        if not _COMMIT.fullmatch(sha):
            return None
        line = read_git("log", "-1", "--format=%H %at %ct", f"{sha}^{{commit}}", "--", cwd=self.root)
        return _commit(line) if line else None

    def file_commits(self, sha: str, path: str) -> list[Commit]:
        """The commits up to ``sha`` that changed ``path``, newest first."""
        out = read_git("log", "--format=%H %at %ct", "--no-renames", sha, "--", path, cwd=self.root)
        return [_commit(line) for line in (out or "").splitlines() if line.strip()]

    def design_at(self, sha: str, path: str, suite: str, profile: str) -> str:
        """The canonical JSON of the design ``path`` declares for ``suite`` at ``profile`` at commit ``sha``."""
        key = (sha, path, suite, profile)
        if key not in self._designs:
            self._designs[key] = canonical_json(self._load(sha, path, suite, profile))
        return self._designs[key]

    def analysed_at(self, sha: str, path: str, suite: str, profile: str) -> StoredSuite:
        """The stored suite that ``path`` and its tuning lock declare for ``suite`` at ``profile`` at commit
        ``sha`` (as a run of it would store it, unregistered): the fields the analysis reads
        (``analysed_fields``: contrasts, claims, metrics and their directions, every arm's params and tuned
        points) are compared with a bundle's."""
        key = (sha, path, suite, profile)
        if key not in self._analysed:
            found = self._suite(sha, path, suite, profile, apply_locks=True)
            self._analysed[key] = with_declarations(replace(found.stored(), registration=None), found.task)
        return self._analysed[key]

    def _load(self, sha: str, path: str, suite: str, profile: str) -> dict[str, Any]:
        return as_stored(self._suite(sha, path, suite, profile, apply_locks=False).locked_design())

    def _suite(self, sha: str, path: str, suite: str, profile: str, apply_locks: bool) -> Suite:
        text = read_git("cat-file", "blob", f"{sha}:{path}", cwd=self.root)
        if text is None:
            raise DesignUnreadable(f"{path} is not in commit {sha[:12]}")
        with tempfile.TemporaryDirectory(prefix="harness-design-") as scratch:
            copy = Path(scratch) / PurePosixPath(path).name
            copy.write_text(text + "\n", encoding="utf-8")
            lock = str(PurePosixPath(path).with_name(lock_path(copy).name))
            lock_text = read_git("cat-file", "blob", f"{sha}:{lock}", cwd=self.root) if apply_locks else None
            if lock_text is not None:
                lock_path(copy).write_text(lock_text + "\n", encoding="utf-8")
            try:
                found = [s for s in load_suites(copy, profile, apply_locks=apply_locks, lock_of_any_version=True)
                         if s.name == suite]
            except (SuiteError, ValueError, OSError) as exc:
                message = str(exc).replace(str(copy), f"{path}@{sha[:12]}")
                raise DesignUnreadable(f"{path} at {sha[:12]} does not load with this harness ({message})") from None
        if not found:
            raise DesignUnreadable(f"{path} at {sha[:12]} declares no suite {suite}")
        return found[0]

    def file_at(self, sha: str, path: str) -> str | None:
        """The text of ``path`` at commit ``sha``; None where the commit has no such file."""
        return read_git("cat-file", "blob", f"{sha}:{path}", cwd=self.root)

    def versions(self, path: str) -> list[str]:
        """Every committed version of ``path`` up to HEAD, oldest first (its text at each commit that changed it)."""
        out = read_git("log", "--format=%H", "--no-renames", "--reverse", "HEAD", "--", path, cwd=self.root)
        return [text for sha in (out or "").split() if (text := self.file_at(sha, path)) is not None]

    def added(self, path: str) -> Commit | None:
        """The commit that first added ``path``; None when it was never committed."""
        out = read_git("log", "--format=%H %at %ct", "--diff-filter=A", "--no-renames", "HEAD", "--", path, cwd=self.root)
        lines = [line for line in (out or "").splitlines() if line.strip()]
        return _commit(lines[-1]) if lines else None

    def introduced(self, sha: str, path: str, suite: str, profile: str) -> Commit | None:
        """The oldest commit up to ``sha`` from which ``path`` has declared the design it declares at ``sha``
        without a change in between; None when ``path`` has no history up to ``sha``."""
        design = self.design_at(sha, path, suite, profile)
        introducing = None
        for commit in self.file_commits(sha, path):
            try:
                if self.design_at(commit.sha, path, suite, profile) != design:
                    break
            except DesignUnreadable:
                break
            introducing = commit
        return introducing


def _commit(line: str) -> Commit:
    sha, author, committer = line.split()
    return Commit(sha, max(int(author), int(committer)))
