"""``harness audit``: a sealed bundle checked against the repository that holds it.

Each check fails in one line naming it:

- ``verdicts``: the report rebuilt from the bundle's suite.json and trials gives the sealed summary's
  validity, claims and premises (results, estimates and intervals);
- ``clean``: every trial ran on a clean checkout (``git_dirty`` false, no task file git does not track) at a
  commit this repository has;
- ``design``: at each such commit the suite file declares the sealed design (``Suite.locked_design``);
- ``dated``: every trial started after the commit that introduced that design (a later second than its
  author and committer dates: both are kept to the second);
- ``seeds``: no earlier bundle of the same suite that shares a claim used any of its seeds;
- ``findings``: every findings line citing the bundle (``citations``) gives its verdict's result.

A file that is no bundle (or a link, a FIFO, too large, markup in its names) is refused before any check:
``BundleError``, exit 2.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.analysis.present.markdown_tables import plain
from harness.evidence.bundle import SUFFIX, Bundle, BundleError, read_bundle
from harness.evidence.citations import citations
from harness.evidence.history import DesignUnreadable, Repository
from harness.evidence.verdicts import differences, rebuilt_summary, verdicts_of
from harness.core.record import TrialRecord
from harness.store import canonical_json
from harness.suite.design import design_record

CHECKS = ("verdicts", "clean", "design", "dated", "seeds", "findings")
_SHOWN = 3  # trials or verdicts named in one failure line


@dataclass
class Audit:
    """One bundle's audit: the failures, one line each (``check: what``)."""

    bundle: Bundle
    failures: list[str] = field(default_factory=list)

    def fail(self, check: str, message: str) -> None:
        self.failures.append(f"{check}: {plain(message)}")

    @property
    def passed(self) -> bool:
        return not self.failures


def bundle_paths(target: Path) -> list[Path]:
    """The bundle ``target`` names, or every ``*.jsonl.gz`` under the folder it names: a linked folder is
    not entered, a linked file is listed (and refused when read)."""
    target = Path(target)
    if target.is_symlink() or not target.is_dir():
        return [target]
    return sorted(Path(folder) / name for folder, _, names in os.walk(target) for name in names
                  if name.endswith(SUFFIX))


def audit(path: Path) -> Audit:
    """Every check on the bundle at ``path``; BundleError when it is no bundle or lies outside git."""
    bundle = read_bundle(path)
    repo = Repository.containing(bundle.path)
    if repo is None:
        raise BundleError(f"{path}: not inside a git checkout (the audit reads the suite file's history from it)")
    found = Audit(bundle)
    sealed = verdicts_of(bundle.summary)
    _check_verdicts(found, sealed)
    design = canonical_json(design_record(bundle.suite_json))
    _check_commits(found, repo, design)
    _check_seeds(found)
    _check_findings(found, repo, sealed)
    return found


def _check_verdicts(found: Audit, sealed: dict) -> None:
    changed = differences(sealed, verdicts_of(rebuilt_summary(found.bundle)))
    if changed:
        found.fail("verdicts", f"the report rebuilt from the bundle's trials differs in {len(changed)} verdict(s): "
                   + "; ".join(changed[:_SHOWN]))


def _check_commits(found: Audit, repo: Repository, design: str) -> None:
    bundle = found.bundle
    dirty = [r for r in bundle.trials if r.environment.get("git_dirty") != "false"
             or r.environment.get("task_untracked_files", "none") != "none"]
    if dirty:
        found.fail("clean", f"{len(dirty)} trial(s) ran on a checkout with uncommitted changes or task files git "
                   f"does not track: {_titles(dirty)}")
    by_commit: dict[str, list[TrialRecord]] = {}
    for record in bundle.trials:
        by_commit.setdefault(record.environment.get("git_commit", ""), []).append(record)
    unknown: list[str] = []
    wrong: list[str] = []
    early: list[TrialRecord] = []
    introducing: set[str] = set()
    for sha, records in sorted(by_commit.items()):
        if repo.commit(sha) is None:
            unknown.append(f"{sha[:12] or 'none'} ({len(records)} trial(s))")
            continue
        try:
            at_commit = repo.design_at(sha, bundle.suite_file, bundle.suite, bundle.profile)
        except DesignUnreadable as exc:
            wrong.append(str(exc))
            continue
        if at_commit != design:
            wrong.append(f"{bundle.suite_file} at {sha[:12]} declares another design ({len(records)} trial(s))")
            continue
        introduced = repo.introduced(sha, bundle.suite_file, bundle.suite, bundle.profile)
        before = [r for r in records if introduced is None or not _after(r.started_at, introduced.time)]
        if before:
            early.extend(before)
            introducing.add(introduced.sha[:12] if introduced else "none")
    if unknown:
        found.fail("clean", f"trials ran at commits this repository does not have: {', '.join(unknown[:_SHOWN])}")
    if wrong:
        found.fail("design", f"the sealed design {bundle.design} is not the suite file's at the trials' commit: "
                   + "; ".join(wrong[:_SHOWN]))
    if early:
        found.fail("dated", f"{len(early)} trial(s) started before the commit that introduced design {bundle.design} "
                   f"({', '.join(sorted(introducing))}): {_titles(early)}")


def _after(started_at: str, commit_time: int) -> bool:
    try:
        started = datetime.fromisoformat(started_at)
    except ValueError:
        return False
    if started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    return int(started.timestamp()) > commit_time


def _check_seeds(found: Audit) -> None:
    bundle = found.bundle
    claims = {n for n in verdicts_of(bundle.summary) if n.startswith("claim/")}
    for other_path in sorted(bundle.path.parent.glob(f"*{SUFFIX}")):
        if other_path.name == bundle.path.name:
            continue
        try:
            other = read_bundle(other_path)
            shared = claims & set(verdicts_of(other.summary))
        except BundleError as exc:
            found.fail("seeds", f"an earlier bundle beside it cannot be read ({exc})")
            continue
        overlap = sorted(bundle.seeds & other.seeds)
        if shared and overlap and (other.first_start, other.design) < (bundle.first_start, bundle.design):
            found.fail("seeds", f"seed(s) {_seeds(overlap)} were used by the earlier bundle {other.name} "
                       f"(first trial {other.first_start}) for the same claim(s): {', '.join(sorted(shared)[:_SHOWN])}")


def _check_findings(found: Audit, repo: Repository, sealed: dict) -> None:
    bundle = found.bundle
    for citation in citations(repo.root):
        if not citation.bundle:
            if bundle.name in citation.verdict:
                found.fail("findings", f"{citation.where} cites {bundle.name} in a line not of the form "
                           "- evidence `<suite>/<hash>` `<verdict>` **<result>**")
            continue
        if citation.bundle != bundle.name:
            continue
        verdict = sealed.get(citation.verdict)
        if verdict is None:
            found.fail("findings", f"{citation.where} cites {citation.verdict}, which {bundle.name} does not decide")
        elif verdict.result != citation.result:
            found.fail("findings", f"{citation.where} says {citation.verdict} is {citation.result}; "
                       f"{bundle.name} gives {verdict.result}")


def _titles(records: list[TrialRecord]) -> str:
    shown = ", ".join(r.title for r in records[:_SHOWN])
    return shown + (f" and {len(records) - _SHOWN} more" if len(records) > _SHOWN else "")


def _seeds(seeds: list[int]) -> str:
    shown = ",".join(map(str, seeds[:10]))
    return shown + (f" and {len(seeds) - 10} more" if len(seeds) > 10 else "")
