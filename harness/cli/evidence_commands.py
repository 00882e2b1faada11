"""``harness seal``, ``harness audit`` and ``harness programme``: confirmatory runs kept as evidence.

Exit codes: 0 sealed / every check passed, 1 a check failed (one line each, naming the check), 2 a usage
error or a file that is no evidence bundle (a link, too large, malformed), one line on stderr.
"""
from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import click

from harness.suite.model import DEFAULT_PROFILE

USAGE_ERROR = 2
FAILED = 1
_EVIDENCE_DIR = Path("evidence")


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(USAGE_ERROR)


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
    click.echo(f"{'replaced' if sealed.replaced else 'sealed'}: {sealed.path} ({sealed.trials} trials, "
               f"{sealed.size / 1024:.0f} KiB); check it with: harness audit {sealed.path}")
    if sealed.over_target:
        click.echo(f"warning: {sealed.path} is over {TARGET_BYTES // 2**20} MiB, more than a repository should "
                   "carry per suite", err=True)


@click.command()
@click.argument("target", type=click.Path(path_type=Path))
def audit(target: Path) -> None:
    """Check the evidence bundle TARGET (or every bundle under the folder TARGET) against its repository:
    rebuilt verdicts, clean commits, the design at each commit, trial dates, fresh seeds, findings."""
    from harness.evidence.audit import audit as audit_bundle
    from harness.evidence.audit import bundle_paths
    from harness.evidence.bundle import BundleError

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
        for line in outcome.failures:
            click.echo(f"{path}: FAIL {line}")
        failed += not outcome.passed
        if outcome.passed:
            click.echo(f"{path}: ok ({len(outcome.bundle.trials)} trials, design {outcome.bundle.design})")
    if malformed:
        raise click.exceptions.Exit(USAGE_ERROR)
    if failed:
        raise click.exceptions.Exit(FAILED)


@click.command()
@click.argument("evidence", type=click.Path(file_okay=False, path_type=Path), default=_EVIDENCE_DIR)
def programme(evidence: Path) -> None:
    """Each claim across its sealed designs under EVIDENCE, oldest first, with every verdict; an exploratory
    pooled estimate over all sealed seed sets beside the latest verdict."""
    from harness.evidence.bundle import BundleError
    from harness.evidence.programme import render

    if not evidence.is_dir():
        _fail(f"{evidence} is not a folder of evidence bundles")
    try:
        click.echo(render(evidence))
    except BundleError as exc:
        _fail(str(exc))


COMMANDS = (seal, audit, programme)
