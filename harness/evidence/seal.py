"""``harness seal``: a finished run's evidence bundle, written beside the findings it backs.

A bundle is sealed only from a complete run whose ``report/summary.json`` is what its trials give (the
report rebuilt from the bundle itself is compared with it before anything is written), so a bundle
never holds a summary its own records contradict.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.analysis.present.run_report import SUMMARY_JSON_FILE
from harness.evidence.bundle import SUFFIX, TARGET_BYTES, BundleError, encode, parse
from harness.evidence.history import Repository
from harness.evidence.verdicts import differences, rebuilt_summary, verdicts_of
from harness.core.record import TrialRecord
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
    replaced: bool  # a bundle of this design was there before (the same run sealed again, or more seeds)

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
        summary = read_json(run_dir / REPORT_DIR / SUMMARY_JSON_FILE)
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
    replaced = path.exists()
    write_atomic(path, lambda handle: handle.write(raw))
    return Sealed(path, len(raw), len(records), replaced)


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
