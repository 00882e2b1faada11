"""``harness seal``: a finished registered run's evidence bundle, written beside the findings it backs.

A bundle is sealed only from a complete run of a registered design (``harness register``) whose
``report/summary.json`` is what its trials give (the report rebuilt from the bundle itself is compared with
it before anything is written), so a bundle never holds a summary its own records contradict. A bundle is
never replaced, and each seal is a line of the ledger: the record only grows.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.present.run_report import SUMMARY_JSON_FILE
from harness.analysis.present.stored_summary import RunSummary
from harness.evidence.bundle import SUFFIX, TARGET_BYTES, BundleError, encode, parse
from harness.evidence.audit import pooled_skewness
from harness.evidence.suite_history import Repository
from harness.evidence.ledger import LEDGER_FILE, SEALED, Ledger, LedgerEntry, LedgerError, append, now
from harness.evidence.registration import registered_digest
from harness.evidence.bundle_verdicts import differences, rebuilt_summary, verdicts_of
from harness.core.record import TrialRecord
from harness.core.stored_fields import from_stored
from harness.core.trial_environment import TaskEnvironment
from harness.store import (
    REPORT_DIR,
    SUITE_FILE,
    CorruptTrial,
    RunFolder,
    incomplete_note,
    iter_trial_files,
    read_json,
    read_trial,
    write_atomic,
)
from harness.suite.schema import check_name
from harness.suite.stored import StoredSuite, StoredSuiteError

EVIDENCE_DIR = Path("evidence")


class SealError(ValueError):
    """A run that cannot be sealed, said in one line; nothing was written."""


@dataclass(frozen=True)
class Sealed:
    path: Path
    size: int
    trials: int
    registration: str  # the ledger id of the registered design the bundle confirms
    skewness: str | None = None  # where the design declares a bound: the pooled skewness against it

    @property
    def over_target(self) -> bool:
        return self.size > TARGET_BYTES


def seal(results: Path, suite: str, profile: str, out: Path = EVIDENCE_DIR) -> Sealed:
    """Seal the run of ``suite`` at ``profile`` under ``results`` into ``out/<suite>/<design hash>.jsonl.gz``."""
    try:
        folder = RunFolder(Path(results), check_name(suite, "suite"), check_name(profile, "profile"))
    except ValueError as exc:
        raise SealError(str(exc)) from None
    run_dir = folder.path
    if not (run_dir / SUITE_FILE).is_file():
        raise SealError(f"no run of suite {suite} at profile {profile} under {results} ({run_dir / SUITE_FILE} is missing)")
    if incomplete_note(run_dir):
        raise SealError(incomplete_note(run_dir))
    try:
        meta = read_json(run_dir / SUITE_FILE)
        stored = StoredSuite.read(run_dir / SUITE_FILE, meta)
        summary = from_stored(RunSummary, read_json(run_dir / REPORT_DIR / SUMMARY_JSON_FILE))
    except FileNotFoundError as exc:
        raise SealError(f"{exc.filename} is missing: run harness report {results} first") from None
    except (OSError, ValueError) as exc:
        raise SealError(f"{run_dir}: cannot be read ({exc})") from None
    records = _current_trials(run_dir, stored)
    out_dir = Path(out).absolute() / suite
    repo = Repository.containing(next(p for p in (out_dir, *out_dir.parents) if p.is_dir()))
    if repo is None:
        raise SealError(f"{out} is not inside a git checkout: a bundle is audited against the history of the "
                        "repository that holds it")
    ledger, registration = _registration(repo, stored, records, run_dir)
    raw = encode(_suite_file(stored, repo), meta, summary, records)
    try:
        bundle = parse(raw, out_dir / "?")
        changed = differences(verdicts_of(summary), verdicts_of(rebuilt_summary(bundle)))
    except BundleError as exc:
        raise SealError(f"{run_dir}: {exc}") from None
    if changed:
        raise SealError(f"{run_dir / REPORT_DIR / SUMMARY_JSON_FILE} is not what the run's trials give "
                        f"({changed[0]}): run harness report {results} first")
    path = out_dir / f"{bundle.design}{SUFFIX}"
    if path.exists() or path.is_symlink():
        raise SealError(f"{path} exists: a sealed bundle is never replaced (the run was sealed before)")
    write_atomic(path, lambda handle: handle.write(raw))
    entry = LedgerEntry(kind=SEALED, suite=suite, profile=profile, at=now(), previous="",
                        registration=registration, bundle=path.relative_to(repo.root.absolute()).as_posix(),
                        bundle_sha256=hashlib.sha256(raw).hexdigest())
    append(ledger, entry)
    checked = pooled_skewness(bundle)
    return Sealed(path, len(raw), len(records), registration, None if checked is None else checked.text())


def _registration(repo: Repository, stored: StoredSuite, records: list[TrialRecord],
                  run_dir: Path) -> tuple[Ledger, str]:
    """The ledger and the open registration the run confirms; SealError for an exploratory run, a design
    other than the registered one, or a registration already sealed or abandoned."""
    if stored.registration is None:
        raise SealError(f"{run_dir}: an exploratory run (its design is not registered): only a registered design's "
                        "run is sealed (harness register SUITE_FILE, commit the ledger, then run it)")
    try:
        ledger = Ledger.read(repo.root / LEDGER_FILE)
    except LedgerError as exc:
        raise SealError(str(exc)) from None
    found = ledger.registration(stored.registration)
    if found is None:
        raise SealError(f"{run_dir}: registration {stored.registration[:12]} is not in {repo.root / LEDGER_FILE}")
    if not found.open:
        raise SealError(f"{run_dir}: registration {found.short} was {'sealed' if found.sealed else 'abandoned'} "
                        "before: a registered design is sealed once")
    codes = {TaskEnvironment.of(r.environment).task_code_sha256 for r in records}
    if len(codes) != 1 or registered_digest(stored, codes.pop()) != found.entry.design:
        raise SealError(f"{run_dir}: the run's design or task code is not the one registered as {found.short}")
    return ledger, found.id


def _current_trials(run_dir: Path, stored: StoredSuite) -> list[TrialRecord]:
    """Every trial record of the run's current expansion and seeds (superseded and stale ones left out)."""
    records = []
    for path in iter_trial_files(run_dir):
        try:
            record = read_trial(path)
        except CorruptTrial as exc:
            raise SealError(f"{path}: {exc}; run the suite into {run_dir.parent.parent} again to redo it") from None
        if stored.includes(record.trial_id, record.seed):
            records.append(record)
    if not records:
        raise SealError(f"{run_dir}: no trial of the suite's current design to seal")
    return records


def _suite_file(stored: StoredSuite, repo: Repository) -> str:
    """The run's suite file relative to the repository (a run records the path it was given)."""
    source = Path(stored.source or "")
    source = (source if source.is_absolute() else Path.cwd() / source).resolve()
    try:
        return source.relative_to(repo.root.resolve()).as_posix()
    except ValueError:
        raise SealError(f"the run's suite file {source} is not in {repo.root}, the repository that holds the "
                        "evidence folder: seal into that suite's repository") from None
