"""The stored runs a report is built from: each ``<suite>/<profile>`` folder analysed, with what names it
across commits and machines (the commit and machine its trials ran on, when, the task code and design)."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from harness.analysis.decide.run_decisions import RunAnalysis, analyse
from harness.analysis.run_results import ResultsError, load_results
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.store import SUITE_FILE, iter_runs, read_json
from harness.suite.design import DesignLock
from harness.suite.schema import check_name
from harness.tracking.environment import read_git


_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256


class PublishError(ValueError):
    """Nothing to publish, or a folder that cannot be read: one line for the user."""


@dataclass(frozen=True)
class PublishedRun:
    """One run folder, analysed, and where and when its trials ran."""

    folder: Path
    analysis: RunAnalysis
    commit: str  # the commit its trials ran at, short ("mixed: ..." when they differ)
    git_commit: str  # that commit in full, "" when the trials differ or none was recorded: what git orders
    machine: str
    finished_at: str  # ISO 8601, the last trial's start
    task_code: str  # sha256 of the task's source
    design: str  # DesignLock.label: the design's hash and what it is

    @property
    def suite(self) -> str:
        return self.analysis.results.suite

    @property
    def profile(self) -> str:
        return self.analysis.results.profile

    @property
    def label(self) -> str:
        """'<commit> on <machine>, <date>': how the claims table heads this run's column."""
        return f"{self.commit} on {self.machine}, {self.finished_at[:16].replace('T', ' ') or 'no date'}"


def _most_common(values: Iterable[str], unknown: str) -> str:
    counts = Counter(v for v in values if v)
    if not counts:
        return unknown
    if len(counts) == 1:
        return next(iter(counts))
    return "mixed: " + ", ".join(value for value, _ in counts.most_common())


def published_run(folder: Path) -> PublishedRun:
    """``folder`` (one ``<suite>/<profile>``) read and analysed; PublishError names it when it cannot be."""
    try:
        results = load_results(folder)
        check_name(results.suite, "suite")  # both become paths under --out: '..' would write and delete above it
        check_name(results.profile, "profile")
        analysis = analyse(results)
        design = DesignLock.of_suite(read_json(folder / SUITE_FILE))
    except (ResultsError, OSError, ValueError) as exc:
        raise PublishError(f"{folder}: {exc}") from None
    records = analysis.results.finished
    environments = [TrialEnvironment.of(r.environment) for r in records]
    commit = _most_common((env.git_commit[:12] + ("+dirty" if env.git_dirty else "") for env in environments),
                          "unknown commit")
    machine = _most_common((env.device_name or env.cpu_model for env in environments), "unknown machine")
    recorded = {env.git_commit for env in environments}
    full = recorded.pop() if len(recorded) == 1 else ""
    return PublishedRun(
        folder=folder, analysis=analysis, commit=commit, machine=machine,
        git_commit=full if _COMMIT.fullmatch(full) else "",  # a stored value reaches git's command line: hex only
        finished_at=max((r.started_at for r in records), default=""),
        task_code=_most_common((TaskEnvironment.of(r.environment).task_code_sha256 for r in records), "unknown"),
        design=design.label(),
    )


def collect_runs(roots: Iterable[Path], repo: Path) -> list[PublishedRun]:
    """Every run folder under each results root in ``repo``'s git order (see ``git_order``); PublishError
    when a root has none."""
    runs = []
    for root in roots:
        if not Path(root).exists():
            raise PublishError(f"{root} does not exist")
        folders = iter_runs(Path(root))
        if not folders:
            raise PublishError(f"no stored results under {root} (expected <suite>/<profile>/{SUITE_FILE})")
        runs += [published_run(folder) for folder in folders]
    return git_order(sorted(runs, key=lambda run: (run.finished_at, str(run.folder))), repo)


def git_order(runs: Sequence[PublishedRun], repo: Path) -> list[PublishedRun]:
    """``runs`` (oldest first) reordered by their commits' order in ``repo``'s history, ancestors first.

    A run's date says when it ran, not which code it ran: a fix benchmarked today on an old branch is
    older code than yesterday's run of main. Runs at one commit keep their date order, and a run whose
    commit ``repo`` does not know (another clone, a mixed run) keeps its place among the dates."""
    commits = [run.git_commit for run in runs if run.git_commit]
    listed = read_git("rev-list", "--topo-order", "--reverse", "--ignore-missing", *dict.fromkeys(commits), "--",
                      cwd=repo) if commits else None
    position = {commit: n for n, commit in enumerate((listed or "").split())}
    known = [n for n, run in enumerate(runs) if run.git_commit in position]
    ordered = list(runs)
    for slot, run in zip(known, sorted((runs[n] for n in known), key=lambda run: position[run.git_commit])):
        ordered[slot] = run
    return ordered
