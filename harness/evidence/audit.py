"""``harness audit``: a sealed bundle checked against the repository that holds it.

Each check fails in one line naming it:

- ``verdicts``: the report rebuilt from the bundle's suite.json and trials gives the sealed summary's
  validity, claims and premises (results, estimates and intervals);
- ``clean``: every trial ran on a clean checkout (``git_dirty`` false, no task file git does not track) at a
  commit this repository has;
- ``design``: at each such commit the suite file declares the sealed design (``Suite.locked_design``);
- ``analysis``: at each such commit the suite file and its tuning lock declare every field of suite.json the
  analysis reads (contrasts, claims, metrics and their directions, arm params and tuned points);
- ``registered``: the bundle confirms a registration of the ledger that covers its design and task code, ran
  that registration's seeds after it was committed, and is the bundle the ledger records as its seal (a
  bundle without a registration passes only when it was committed before the ledger began);
- ``dated``: every trial started after the commit that introduced that design (a later second than its
  author and committer dates: both are kept to the second);
- ``single_run``: the trials come from one run: one run id (a resumed run keeps its folder's), or, for trials
  that record none, invocations that follow one another at one commit; a design that declares a top-up
  (``sequential: {top_up: true}``) may hold runs that follow one another and share no seed;
- ``seeds``: no earlier bundle of the same suite that shares a claim used any of its seeds;
- ``provenance``: every cached artifact a registered run's trial loaded was built by a trial of the same
  bundle, into the same bytes (an artifact built by a side run or an earlier run is not this study's);
- ``statistics``: a design that declares a skewness bound holds data within it (the pooled skewness of its
  per-seed quality differences, ``skew_check``), or its calibrated critical values do not hold: it fails
  until the ledger records the study as invalidated (then it is a note, and the programme counts no evidence);
- ``findings``: every findings line citing the bundle (``citations``) gives its verdict's result.

A file that is no bundle (or a link, a FIFO, too large, markup in its names) is refused before any check:
``BundleError``, exit 2.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.analysis.present.markdown_tables import plain
from harness.evidence.bundle import SUFFIX, Bundle, BundleError, read_bundle
from harness.evidence.citations import citations
from harness.evidence.suite_history import DesignUnreadable, Repository
from harness.evidence.ledger import LEDGER_FILE, Ledger, LedgerError, Registration
from harness.evidence.registration import registered_digest
from harness.evidence.single_run import spliced
from harness.evidence.bundle_verdicts import differences, rebuilt_summary, verdicts_of
from harness.analysis.stats.skew_calibration import SkewCheck, skew_check
from harness.core.metrics import metric_family
from harness.core.record import TrialRecord
from harness.core.stored_fields import BOOLEAN, STRING, StoredFieldError, from_stored, stored
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.store import canonical_json
from harness.suite.design import design_record
from harness.suite.registered_design import ANALYSED_KEYS, analysed_value
from harness.suite.stored import StoredSuite

CHECKS = ("verdicts", "clean", "design", "analysis", "dated", "single_run", "seeds", "registered", "provenance",
          "statistics", "findings")
_SHOWN = 3  # trials or verdicts named in one failure line


@dataclass
class Audit:
    """One bundle's audit: the failures, one line each (``check: what``)."""

    bundle: Bundle
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the audit found and the record already says

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
    design = _comparable(canonical_json(design_record(bundle.suite_json)), bundle)
    _check_commits(found, repo, design)
    _check_single_run(found)
    _check_seeds(found)
    _check_registered(found, repo)
    _check_provenance(found)
    _check_statistics(found, repo)
    _check_findings(found, repo, sealed)
    return found


def _check_verdicts(found: Audit, sealed: dict) -> None:
    changed = differences(sealed, verdicts_of(rebuilt_summary(found.bundle)))
    if changed:
        found.fail("verdicts", f"the report rebuilt from the bundle's trials differs in {len(changed)} verdict(s): "
                   + "; ".join(changed[:_SHOWN]))


def _check_commits(found: Audit, repo: Repository, design: str) -> None:
    bundle = found.bundle
    dirty = [r for r in bundle.trials if TrialEnvironment.of(r.environment).git_dirty is not False
             or TaskEnvironment.of(r.environment).untracked]
    if dirty:
        found.fail("clean", f"{len(dirty)} trial(s) ran on a checkout with uncommitted changes or task files git "
                   f"does not track: {_titles(dirty)}")
    by_commit: dict[str, list[TrialRecord]] = {}
    for record in bundle.trials:
        by_commit.setdefault(TrialEnvironment.of(record.environment).git_commit, []).append(record)
    unknown: list[str] = []
    wrong: list[str] = []
    analysed: list[str] = []
    early: list[TrialRecord] = []
    introducing: set[str] = set()
    for sha, records in sorted(by_commit.items()):
        if repo.commit(sha) is None:
            unknown.append(f"{sha[:12] or 'none'} ({len(records)} trial(s))")
            continue
        try:
            at_commit = _comparable(repo.design_at(sha, bundle.suite_file, bundle.suite, bundle.profile), bundle)
        except DesignUnreadable as exc:
            wrong.append(str(exc))
            continue
        if at_commit != design:
            wrong.append(f"{bundle.suite_file} at {sha[:12]} declares another design ({len(records)} trial(s))")
            continue
        try:
            moved = _moved(bundle.stored, repo.analysed_at(sha, bundle.suite_file, bundle.suite, bundle.profile))
        except DesignUnreadable as exc:
            analysed.append(str(exc))
            continue
        if moved:
            analysed.append(f"{bundle.suite_file} at {sha[:12]} declares other {', '.join(moved)} "
                            f"({len(records)} trial(s))")
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
    if analysed:
        found.fail("analysis", "suite.json's fields the analysis reads are not the suite file's at the trials' commit: "
                   + "; ".join(analysed[:_SHOWN]))
    if early:
        found.fail("dated", f"{len(early)} trial(s) started before the commit that introduced design {bundle.design} "
                   f"({', '.join(sorted(introducing))}): {_titles(early)}")


def _check_single_run(found: Audit) -> None:
    problem = spliced(found.bundle.trials, found.bundle.stored.sequential)
    if problem:
        found.fail("single_run", problem)


def _comparable(design: str, bundle: Bundle) -> str:
    """A design lock as the suite file and the bundle can both give it: a registered run's seeds and
    registration come from the ledger, not the suite file (the ``registered`` check reads them there)."""
    if bundle.stored.registration is None:
        return design
    return canonical_json({k: v for k, v in json.loads(design).items() if k not in ("seeds", "registration")})


# What the suite file at a commit declares, read with today's task: its version and metric declarations are
# today's, not the commit's, so they are compared only where a registration recorded them (``registered``),
# except the direction of each metric a claim, premise or validity reads (a flipped direction flips a verdict).
_DECLARED_KEYS = tuple(key for key in ANALYSED_KEYS if key not in ("task_version", "metrics"))


def _moved(sealed: StoredSuite, declared: StoredSuite) -> list[str]:
    """The analysed fields in which the sealed suite.json and the suite file's declaration differ."""
    moved = [key for key in _DECLARED_KEYS
             if canonical_json(analysed_value(sealed, key)) != canonical_json(analysed_value(declared, key))]
    named = sealed.named_metrics | {premise.metric for premise in sealed.premises}
    flipped = sorted({name for name, _ in _directions(sealed, named) ^ _directions(declared, named)})
    return moved + [f"the direction of {name}" for name in flipped]


def _directions(suite: StoredSuite, metrics: set[str]) -> set[tuple[str, str]]:
    """(metric, declared direction) of each of ``metrics`` the suite declares (a name@suffix: its family's)."""
    return {(metric, spec.direction) for name, spec in suite.metrics.items() for metric in metrics
            if metric_family(metric) == name}


def _check_registered(found: Audit, repo: Repository) -> None:
    bundle = found.bundle
    registration_id = bundle.stored.registration
    if registration_id is None:
        ledger_began = repo.added(LEDGER_FILE.as_posix())
        added = repo.added(bundle.path.resolve().relative_to(repo.root.resolve()).as_posix())
        if ledger_began is not None and (added is None or added.time > ledger_began.time):
            found.fail("registered", f"{bundle.name} confirms no registration, and was not committed before the ledger "
                       f"began ({ledger_began.sha[:12]}): a confirmatory run is a registered design's")
        return
    try:
        ledger = Ledger.read(repo.root / LEDGER_FILE)
    except LedgerError as exc:
        found.fail("registered", str(exc))
        return
    registration = ledger.registration(registration_id)
    if registration is None:
        found.fail("registered", f"registration {registration_id[:12]} is not in {LEDGER_FILE}")
        return
    codes = sorted({TaskEnvironment.of(r.environment).task_code_sha256 for r in bundle.trials})
    if len(codes) != 1 or registered_digest(bundle.stored, codes[0]) != registration.entry.design:
        found.fail("registered", f"the bundle's design or task code is not the one registered as {registration.short} "
                   "(contrasts, claims, metrics, arm params, tuned points, the task's code and the seed count are "
                   "all registered)")
    drawn = list(registration.entry.seeds)
    ran = sorted(bundle.seeds, key=lambda seed: drawn.index(seed) if seed in drawn else len(drawn))
    if set(ran) - set(drawn) or ran != drawn[:len(ran)]:
        found.fail("registered", f"seed(s) {_seeds(sorted(set(ran) - set(drawn)) or ran)} are not the first "
                   f"{len(ran)} seeds registration {registration.short} drew")
    missing = [sha[:12] for sha in sorted({TrialEnvironment.of(r.environment).git_commit for r in bundle.trials})
               if registration.id not in _line_hashes(repo.file_at(sha, LEDGER_FILE.as_posix()))]
    early = [r for r in bundle.trials if not _later(r.started_at, registration.entry.at)]
    if missing or early:
        found.fail("registered", f"registration {registration.short} was not committed before the run: "
                   + (f"not in the ledger at {', '.join(missing[:_SHOWN])}" if missing else
                      f"{len(early)} trial(s) started before it: {_titles(early)}"))
    sealed = registration.sealed
    relative = bundle.path.resolve().relative_to(repo.root.resolve()).as_posix()
    if sealed is None or sealed.bundle != relative:
        found.fail("registered", f"the ledger does not record {relative} as the seal of registration {registration.short}")
    elif sealed.bundle_sha256 != hashlib.sha256(bundle.path.read_bytes()).hexdigest():
        found.fail("registered", f"{relative} is not the bundle the ledger sealed (its bytes changed since)")


@dataclass(frozen=True)
class _CacheUse:
    """One cached artifact as a trial's ``cache`` detail records it."""

    key: str = stored(STRING, missing="")
    loaded: bool = stored(BOOLEAN, missing=False)
    sha256: str = stored(STRING, missing="")
    built_by: str = stored(STRING, missing="unknown")


def _cache_uses(record: TrialRecord) -> list[_CacheUse]:
    uses = record.details.get("cache") if isinstance(record.details, dict) else None
    if not isinstance(uses, dict):
        return []
    found = []
    for use in uses.values():
        try:
            found.append(from_stored(_CacheUse, use))
        except StoredFieldError:
            found.append(_CacheUse())
    return found


def _check_provenance(found: Audit) -> None:
    bundle = found.bundle
    if bundle.stored.registration is None:
        return  # sealed before the ledger: its trials recorded no builder
    built = {(use.key, use.sha256, record.trial_id) for record in bundle.trials for use in _cache_uses(record)
             if not use.loaded}
    outside = [f"{record.title} ({use.key[:12]} built by {use.built_by[:12]})" for record in bundle.trials
               for use in _cache_uses(record) if use.loaded and (use.key, use.sha256, use.built_by) not in built]
    if outside:
        found.fail("provenance", f"{len(outside)} cached artifact(s) were built outside this run: "
                   + ", ".join(outside[:_SHOWN]) + ": rerun the registered design into a fresh results folder")


def pooled_skewness(bundle: Bundle) -> SkewCheck | None:
    """The skewness check of a bundle whose design declares a bound (None when it declares none): every
    non-speed contrast row's per-seed differences, one set each."""
    sequential = bundle.stored.sequential
    bound = None if sequential is None else sequential.spec.skew_bound
    if bound is None:
        return None
    speed = {name for name, metric in bundle.stored.metrics.items() if metric.kind == "speed"}
    groups = []
    for row in bundle.summary.contrasts:
        if row.metric.split("@")[0] not in speed and row.metric not in speed:
            groups.append([float(v) for v in row.differences if v is not None])
    return skew_check(groups, float(bound))


def _check_statistics(found: Audit, repo: Repository) -> None:
    checked = pooled_skewness(found.bundle)
    if checked is None or not checked.exceeds:
        return
    invalidated = _registration_of(found.bundle, repo)
    if invalidated is not None and invalidated.invalidated is not None:
        found.notes.append(f"statistics: {checked.text()}; the ledger invalidates the study "
                           f"({invalidated.invalidated.reason})")
        return
    found.fail("statistics", f"{checked.text()}: the design's calibrated critical values do not hold for these "
               f"data (record it: harness invalidate {(found.bundle.stored.registration or '')[:12]} --reason ...)")


def _registration_of(bundle: Bundle, repo: Repository) -> Registration | None:
    if bundle.stored.registration is None:
        return None
    try:
        return Ledger.read(repo.root / LEDGER_FILE).registration(bundle.stored.registration)
    except LedgerError:
        return None


def _line_hashes(text: str | None) -> set[str]:
    return {hashlib.sha256(line.encode("utf-8")).hexdigest() for line in (text or "").splitlines()}


def _later(started_at: str, at: str) -> bool:
    """Whether a trial started in a later second than the ledger line written ``at``."""
    try:
        return _after(started_at, int(datetime.fromisoformat(at).timestamp()))
    except ValueError:
        return False


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


def audit_ledger(repo: Repository) -> list[str]:
    """The ledger's own checks, one line each (``ledger: what``): its chain reads, every committed version is
    a prefix of the next (it only grew), every registration was sealed or abandoned, no registration of a
    suite drew a seed another drew, and each seal names the bundle that lies there, byte for byte."""
    path = repo.root / LEDGER_FILE
    try:
        ledger = Ledger.read(path)
    except LedgerError as exc:
        return [f"ledger: {plain(str(exc))}"]
    failures = []
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    versions = [*repo.versions(LEDGER_FILE.as_posix()), current]
    rewritten = sum(not later.startswith(earlier) for earlier, later in zip(versions, versions[1:]))
    if rewritten:
        failures.append(f"ledger: {rewritten} version(s) of {LEDGER_FILE} do not begin with the version before: "
                        "a line was changed or removed (the ledger is append-only)")
    drawn: dict[tuple[str, int], str] = {}
    for registration in ledger.registrations():
        if registration.open:
            failures.append(f"ledger: registration {registration.short} ({registration.entry.suite}) has neither a "
                            "sealed bundle nor an abandonment: run it to its end, or harness abandon it")
        for seed in registration.entry.seeds:
            other = drawn.setdefault((registration.entry.suite, seed), registration.short)
            if other != registration.short:
                failures.append(f"ledger: seed {seed} of {registration.entry.suite} was drawn by {other} and "
                                f"{registration.short}")
        sealed = registration.sealed
        if sealed is not None:
            bundle = repo.root / (sealed.bundle or "")
            if not bundle.is_file() or bundle.is_symlink():
                failures.append(f"ledger: the seal of {registration.short} names {sealed.bundle}, which is not there")
            elif hashlib.sha256(bundle.read_bytes()).hexdigest() != sealed.bundle_sha256:
                failures.append(f"ledger: {sealed.bundle} is not the bundle sealed for {registration.short} "
                                "(its bytes changed since)")
    return failures
