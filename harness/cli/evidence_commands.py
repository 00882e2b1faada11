"""``harness register``, ``seal``, ``abandon``, ``audit`` and ``programme``: confirmatory runs registered
before their data and kept as evidence.

Exit codes: 0 sealed / every check passed, 1 a check failed (one line each, naming the check), 2 a usage
error or a file that is no evidence bundle (a link, too large, malformed), one line on stderr.
"""
from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import click

from harness.suite.resolved_suite import DEFAULT_PROFILE

USAGE_ERROR = 2
FAILED = 1
_EVIDENCE_DIR = Path("evidence")


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(USAGE_ERROR)


def _ledger_entry_command(reason_help: str):
    """The arguments an appended ledger line about one registration takes: its id, why, and the ledger."""
    def decorate(command):
        command = click.option("--ledger", "ledger_file", type=click.Path(dir_okay=False, path_type=Path),
                               default=_EVIDENCE_DIR / "ledger.jsonl", show_default=True,
                               help="The ledger that holds it.")(command)
        command = click.option("--reason", required=True, help=reason_help)(command)
        return click.command()(click.argument("registration")(command))
    return decorate


def _named(ledger, ledger_file: Path, registration: str):
    """The registration REGISTRATION names in the ledger, or one error line."""
    found = ledger.registration(registration)
    if found is None:
        _fail(f"{ledger_file}: no registration {registration} (give 12 or more hex digits of its id)")
    return found


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
@click.argument("suite")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="The profile of the run to seal.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=_EVIDENCE_DIR, show_default=True,
              help="Evidence folder (inside the suite's git checkout): the bundle goes to OUT/SUITE/<design>.jsonl.gz.")
def seal(results: Path, suite: str, profile: str, out: Path) -> None:
    """Seal the run of SUITE (its name) under RESULTS as an evidence bundle: every current trial record, the
    design lock and the run's summary, small enough to commit."""
    from harness.evidence.bundle import TARGET_BYTES
    from harness.evidence.seal import SealError
    from harness.evidence.seal import seal as seal_run

    try:
        sealed = seal_run(results, suite, profile, out)
    except SealError as exc:
        _fail(str(exc))
    click.echo(f"sealed: {sealed.path} ({sealed.trials} trials, {sealed.size / 1024:.0f} KiB, registered design "
               f"{sealed.registration[:12]}); check it with: harness audit {sealed.path}")
    if sealed.skewness:
        click.echo(sealed.skewness)
    if sealed.over_target:
        click.echo(f"warning: {sealed.path} is over {TARGET_BYTES // 2**20} MiB, more than a repository should "
                   "carry per suite", err=True)


@click.command()
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--reproduce", "reruns", type=click.IntRange(min=0), default=0, show_default=True,
              help="Also rerun this many trials of each bundle, sampled at random, in the deterministic numeric "
              "mode on CPU: every value but the speed ones must come back bit for bit.")
@click.option("--cheapest", is_flag=True, help="--reproduce the trials that took the least wall time instead of a "
              "random sample (what CI affords on every commit).")
@click.option("--task-path", "task_paths", multiple=True, metavar="MODULE:CLASS",
              help="Trust this task for --reproduce when no installed package registers it (as harness reproduce).")
def audit(target: Path, reruns: int, cheapest: bool, task_paths: tuple[str, ...]) -> None:
    """Check the evidence bundle TARGET (or every bundle under the folder TARGET) against its repository:
    rebuilt verdicts, clean commits, the design and analysed fields at each commit, trial dates, one run, fresh seeds,
    the registration, findings; for a folder, the ledger too."""
    from harness.core import numeric
    from harness.evidence.audit import audit as audit_bundle
    from harness.evidence.audit import bundle_paths
    from harness.evidence.bundle import BundleError
    from harness.reproduction.record_rerun import rerun, sample

    if reruns:
        try:
            numeric.apply(numeric.DETERMINISTIC)
        except numeric.NumericModeError as exc:
            _fail(str(exc))

    if not target.exists() and not target.is_symlink():
        _fail(f"{target} does not exist")
    paths = bundle_paths(target)
    if not paths:
        _fail(f"no evidence bundles (*.jsonl.gz) under {target}")
    malformed = failed = 0
    for path in paths:
        try:
            outcome = audit_bundle(path)
        except BundleError as exc:
            click.echo(f"error: {exc}", err=True)
            malformed += 1
            continue
        if reruns:
            _rerun_checks(outcome, rerun(outcome.bundle.suite_json,
                                         sample(outcome.bundle.trials, reruns, cheapest=cheapest), task_paths))
        for line in outcome.notes:
            click.echo(f"{path}: note {line}")
        for line in outcome.failures:
            click.echo(f"{path}: FAIL {line}")
        failed += not outcome.passed
        if outcome.passed:
            click.echo(f"{path}: ok ({len(outcome.bundle.trials)} trials, design {outcome.bundle.design})")
    ledger_failures = _audit_ledger(target) if target.is_dir() else []
    if malformed:
        raise click.exceptions.Exit(USAGE_ERROR)
    if failed or ledger_failures:
        raise click.exceptions.Exit(FAILED)


@_ledger_entry_command("Which assumption of its verdicts the study's own data break.")
def invalidate(registration: str, reason: str, ledger_file: Path) -> None:
    """Record that the sealed study REGISTRATION (its id, 12 or more hex digits) does not support its own
    verdicts (its pooled skewness exceeds its declared bound, say): it stays in the record, with why, the
    audit says so instead of failing, and the programme counts it as no evidence."""
    from harness.evidence.ledger import Ledger, LedgerError
    from harness.evidence.registration import invalidate as invalidate_study

    try:
        ledger = Ledger.read(ledger_file)
        found = _named(ledger, ledger_file, registration)
        if found.sealed is None or found.invalidated is not None:
            _fail(f"{ledger_file}: registration {found.short} is "
                  f"{'invalidated already' if found.invalidated else 'not sealed'}: only a sealed study is invalidated")
        invalidate_study(ledger, found, reason)
    except LedgerError as exc:
        _fail(str(exc))
    click.echo(f"invalidated: {found.short} ({found.entry.suite}); commit {ledger_file}")


def _rerun_checks(outcome, found) -> None:
    """The rerun's findings as the audit's ``reproduce`` check (a skipped trial is said, not failed)."""
    if found.error:
        outcome.fail("reproduce", found.error)
    for line in found.differing[:3]:
        outcome.fail("reproduce", f"not bit-identical: {line}")
    for line in found.skipped:
        click.echo(f"{outcome.bundle.path}: reproduce skipped {line}")
    if found.rerun and not found.differing and not found.error:
        click.echo(f"{outcome.bundle.path}: reproduce: {len(found.rerun)} trial(s) rerun, every value bit for bit "
                   f"({', '.join(found.rerun)})")


def _audit_ledger(target: Path) -> list[str]:
    """The ledger of the repository that holds the folder TARGET, when it has one: its checks, printed."""
    from harness.evidence.audit import audit_ledger
    from harness.evidence.suite_history import Repository
    from harness.evidence.ledger import LEDGER_FILE, Ledger, LedgerError

    repo = Repository.containing(target.resolve())
    if repo is None or not (repo.root / LEDGER_FILE).exists():
        return []
    path = repo.root / LEDGER_FILE
    failures = audit_ledger(repo)
    for line in failures:
        click.echo(f"{path}: FAIL {line}")
    if not failures:
        try:
            registrations = Ledger.read(path).registrations()
        except LedgerError:
            registrations = []
        sealed = sum(r.sealed is not None for r in registrations)
        invalidated = sum(r.invalidated is not None for r in registrations)
        click.echo(f"{path}: ok ({len(registrations)} registration(s): {sealed} sealed, "
                   f"{len(registrations) - sealed} abandoned, {invalidated} of the sealed invalidated)")
    return failures


@click.command()
@click.argument("evidence", type=click.Path(file_okay=False, path_type=Path), default=_EVIDENCE_DIR)
def programme(evidence: Path) -> None:
    """Each claim across its sealed designs under EVIDENCE, oldest first, with every verdict; a programme
    verdict over every registered study (the product of their e-values, valid under optional continuation)
    and an exploratory pooled estimate beside the latest verdict."""
    from harness.evidence.bundle import BundleError
    from harness.evidence.suite_history import Repository
    from harness.evidence.ledger import LEDGER_FILE, Ledger, LedgerError
    from harness.evidence.programme import render

    if not evidence.is_dir():
        _fail(f"{evidence} is not a folder of evidence bundles")
    repo = Repository.containing(evidence.resolve())
    try:
        ledger = Ledger.read(repo.root / LEDGER_FILE) if repo else None
        click.echo(render(evidence, ledger, repo and (lambda path: len(repo.versions(path)))))
    except (BundleError, LedgerError) as exc:
        _fail(str(exc))


@click.command()
@click.argument("suite_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--suite", "names", multiple=True, help="Register only this suite of the file (repeatable; default: all).")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="The profile whose design is registered.")
def register(suite_file: Path, names: tuple[str, ...], profile: str) -> None:
    """Register the designs SUITE_FILE declares (every field a verdict reads, the task's code, the number of
    seeds) in the repository's ledger, evidence/ledger.jsonl, before any confirmatory trial: each draws its
    seeds from its ledger line. Commit the ledger, then `harness run` runs the registered seeds."""
    from harness.api import RunOptions, UsageError, load_suites
    from harness.evidence.ledger import Ledger, LedgerError
    from harness.evidence.registration import ledger_path, register as register_design

    path = ledger_path(suite_file)
    if path is None:
        _fail(f"{suite_file} is not inside a git checkout: the ledger is committed beside the suites it registers")
    try:
        suites = [s for s in load_suites(suite_file, RunOptions(profile=profile)) if not names or s.name in names]
        unknown = sorted(set(names) - {s.name for s in suites})
        if unknown:
            _fail(f"{suite_file}: no suite {unknown[0]} in it")
        for suite in suites:
            done = register_design(suite, Ledger.read(path))
            seeds = ", ".join(map(str, done.registration.entry.seeds))
            click.echo(f"{'registered' if done.new else 'already registered'}: {suite.name} ({profile}) as "
                       f"{done.registration.short}, seeds {seeds}")
    except (UsageError, LedgerError) as exc:
        _fail(str(exc))
    click.echo(f"commit {path} before the confirmatory runs: harness run {suite_file}")


@_ledger_entry_command("Why the registered design will not be run to its end.")
def abandon(registration: str, reason: str, ledger_file: Path) -> None:
    """Record that the registered design REGISTRATION (its id, 12 or more hex digits) will not be run to its
    end: it stays in the record, with why, and counts in the programme."""
    from harness.evidence.ledger import Ledger, LedgerError
    from harness.evidence.registration import abandon as abandon_design

    try:
        ledger = Ledger.read(ledger_file)
        found = _named(ledger, ledger_file, registration)
        if not found.open:
            _fail(f"{ledger_file}: registration {found.short} was {'sealed' if found.sealed else 'abandoned'} already")
        abandon_design(ledger, found, reason)
    except LedgerError as exc:
        _fail(str(exc))
    click.echo(f"abandoned: {found.short} ({found.entry.suite}); commit {ledger_file}")


COMMANDS = (register, seal, abandon, invalidate, audit, programme)
