"""Register before data: a suite's design written to the ledger, and a run of a registered design given
the registration's seeds.

A run is confirmatory only when its suite, at its profile, declares exactly a registered design (every
field the analysis reads, the task's code, the number of seeds: ``registered_record``); it then runs the
registration's seeds and is sealed when it ends. Any other run is exploratory and says so.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from harness.analysis.decide.tune_grid import edge_axes
from harness.evidence.bundle import SUFFIX, BundleError, read_bundle
from harness.evidence.suite_history import Repository
from harness.evidence.ledger import (
    LEDGER_FILE,
    REGISTERED,
    ABANDONED,
    INVALIDATED,
    Ledger,
    LedgerEntry,
    LedgerError,
    Registration,
    append,
    draw_seeds,
    now,
)
from harness.execution.runner import with_declarations
from harness.suite.design import seeds_registered
from harness.suite.resolved_suite import Suite
from harness.suite.registered_design import record_digest, registered_record
from harness.suite.stored import StoredSuite
from harness.suite.tuning_lock import TuningLock, lock_path
from harness.tasks.source import task_code
from harness.store import canonical_json
from harness.tracking import environment


def ledger_path(suite_file: Path) -> Path | None:
    """The ledger of the repository that holds ``suite_file``; None outside git (nothing there is registered)."""
    repo = Repository.containing(Path(suite_file).resolve())
    return None if repo is None else repo.root / LEDGER_FILE


def seed_count(suite: Suite) -> int:
    """Every seed the design may run: its last look's, or its fixed seeds."""
    return suite.sequential.max_seeds if suite.sequential is not None else len(suite.seeds)


def suite_record(suite: Suite) -> dict:
    """The record a registration of ``suite`` covers, as a run of it would store it."""
    stored = with_declarations(replace(suite.stored(), registration=None), suite.task)
    return registered_record(stored, task_code(suite.task.__module__).sha256, seed_count(suite))


def registered_digest(stored: StoredSuite, task_code_sha256: str) -> str:
    """The registered design a run's stored suite and its trials' task code give (what seal and audit compare
    with the ledger)."""
    count = seeds_registered(stored.sequential, stored.seeds)
    return record_digest(registered_record(stored, task_code_sha256, count))


@dataclass(frozen=True)
class Registered:
    registration: Registration
    new: bool  # False: the design was registered before (its seeds stand)


def tuned_on_edge(suite: Suite) -> list[str]:
    """Each arm the suite's tuning lock gives a point on the edge of its grid, with the axes: such an arm was
    not tuned as well as its grid could say, so a comparison with it is not fair yet."""
    lock = lock_path(Path(suite.source))
    if suite.tune is None or not suite.tuned or not lock.is_file():
        return []
    arms = TuningLock.read(lock, Path(suite.source)).arms
    found = []
    for name, entry in arms.items():
        if name in suite.arms and entry is not None and entry.grid and isinstance(entry.chosen, dict):
            axes = edge_axes([p.params for p in entry.grid if isinstance(p.params, dict)], entry.chosen)
            found += [f"{name}: {axis}" for axis in axes]
    return found


def register(suite: Suite, ledger: Ledger) -> Registered:
    """Append ``suite``'s design to the ledger and draw its seeds; a design registered before (and not
    abandoned) keeps its registration: registering again would draw other seeds for the same study. A
    design whose tuning lock chose a point on the edge of its grid is refused: every tuned point sits
    inside its grid before a confirmatory seed is drawn."""
    edges = tuned_on_edge(suite)
    if edges:
        raise LedgerError(f"{suite.source}: tune: the lock {lock_path(Path(suite.source)).name} chose points on the "
                          f"edge of their grids ({'; '.join(edges)}): extend tune.space past them and rerun "
                          "`harness tune` on the tuning seeds before registering")
    record = suite_record(suite)
    design = record_digest(record)
    found = ledger.matching(suite.name, suite.profile, design)
    if found is not None:
        return Registered(found, False)
    repo = Repository.containing(next(p for p in ledger.path.parents if p.is_dir()))
    suite_file = Path(suite.source).resolve()
    try:
        relative = suite_file.relative_to(repo.root.resolve()).as_posix() if repo else suite_file.name
    except ValueError:
        raise LedgerError(f"{suite.source} is not in {repo.root if repo else ledger.path.parent}, the repository "
                          "that holds the ledger: register a suite of that repository") from None
    at = now()
    seeds = draw_seeds(ledger.head, design, at, seed_count(suite), ledger.used_seeds(suite.name))
    entry = LedgerEntry(kind=REGISTERED, suite=suite.name, profile=suite.profile, at=at, previous="",
                        suite_file=relative, design=design, record=record, seeds=seeds)
    ledger, digest = append(ledger, entry)
    return Registered(next(r for r in ledger.registrations() if r.id == digest), True)


def abandon(ledger: Ledger, registration: Registration, reason: str) -> Ledger:
    """Append that a registered design will not be run to its end (it stays in the record, with why)."""
    entry = LedgerEntry(kind=ABANDONED, suite=registration.entry.suite, profile=registration.entry.profile,
                        at=now(), previous="", registration=registration.id, reason=reason)
    return append(ledger, entry)[0]


def invalidate(ledger: Ledger, registration: Registration, reason: str) -> Ledger:
    """Append that a sealed study's verdicts are not supported by its own data (it stays in the record,
    with why; the programme counts it as no evidence)."""
    entry = LedgerEntry(kind=INVALIDATED, suite=registration.entry.suite,
                        profile=registration.entry.profile, at=now(), previous="", registration=registration.id,
                        reason=reason)
    return append(ledger, entry)[0]


def confirmatory(suite: Suite, ledger: Ledger) -> Suite:
    """``suite`` as a run of its registered design (the registration's seeds and id) when the ledger holds
    one for exactly this design; otherwise ``suite`` unchanged, an exploratory run."""
    found = ledger.matching(suite.name, suite.profile, record_digest(suite_record(suite)))
    if found is None:
        return suite
    seeds = list(found.entry.seeds)
    return replace(suite, seeds=seeds[:len(suite.seeds)], seed_pool=tuple(seeds), registration=found.id)


@dataclass(frozen=True)
class Study:
    """How a run of one suite counts: confirmatory (a registered design's seeds) or exploratory, and why."""

    suite: Suite
    note: str  # one line for the terminal
    registration: Registration | None = None
    registration_ledger: Path | None = None  # the ledger that holds it

    @property
    def to_seal(self) -> bool:
        """A confirmatory run whose registration is still open: sealed when it ends."""
        return self.registration is not None and self.registration.open


def studies(suites: list[Suite], suite_file: Path, exploratory_reason: str | None = None) -> list[Study]:
    """Each suite as the run will count it. A registered design not yet sealed runs only from a clean
    checkout whose committed ledger holds its registration (LedgerError otherwise, before anything runs):
    otherwise its seeds would be spent on code or a record nobody can audit."""
    path = ledger_path(suite_file)
    ledger = Ledger.read(path) if path is not None else None
    if exploratory_reason:
        return [Study(s, f"{s.name} ({s.profile}): exploratory ({exploratory_reason}){_reread(s, ledger)}")
                for s in suites]
    found = []
    for suite in suites:
        run = confirmatory(suite, ledger) if ledger is not None else suite
        registration = ledger.registration(run.registration) if ledger and run.registration else None
        if registration is None:
            found.append(Study(suite, f"{suite.name} ({suite.profile}): exploratory ({_unregistered(suite, ledger)}: "
                                      f"harness register {suite_file} --suite {suite.name}){_reread(suite, ledger)}"))
            continue
        seeds = ", ".join(map(str, run.seeds))
        if registration.open:
            _check_runnable(registration, ledger)
            note = f"confirmatory run of registered design {registration.short} (seeds {seeds}; sealed when it ends)"
        else:
            where = registration.sealed.bundle if registration.sealed else "abandoned"
            note = f"replication of registered design {registration.short} (seeds {seeds}; its record: {where})"
        found.append(Study(run, f"{suite.name} ({suite.profile}): {note}", registration, ledger.path))
    return found


def _unregistered(suite: Suite, ledger: Ledger | None) -> str:
    """Why the run's design is not a registered one: none of the suite is, or what differs from the latest
    registration of it (the task's code, after an edit of the task, is the usual answer)."""
    latest = [r for r in ledger.registrations() if (r.entry.suite, r.entry.profile) == (suite.name, suite.profile)
              and r.abandoned is None] if ledger else []
    if not latest or latest[-1].entry.record is None:
        return "its design is not registered"
    registered, here = latest[-1].entry.record, json.loads(canonical_json(suite_record(suite)))
    changed = sorted(key for key in {*registered, *here} if registered.get(key) != here.get(key))
    return (f"its design differs from registered design {latest[-1].short} in {', '.join(changed) or 'its digest'}; "
            "register this one")


def _reread(suite: Suite, ledger: Ledger | None) -> str:
    """A warning for an exploratory run on seeds a registered or sealed study of the suite used: its figures
    re-read that study's data (a redesign checked on them is selected, not confirmed)."""
    used = set(ledger.used_seeds(suite.name)) if ledger else set()
    folder = ledger.path.parent / suite.name if ledger else None
    for bundle in sorted(folder.glob(f"*{SUFFIX}")) if folder and folder.is_dir() else []:
        try:
            used |= read_bundle(bundle).seeds
        except BundleError:
            continue
    again = sorted(set(suite.seeds) & used)
    if not again:
        return ""
    return (f"; warning: seed(s) {', '.join(map(str, again[:5]))} were used by a registered or sealed study of "
            f"{suite.name}: this run re-reads them and can confirm nothing")


def _check_runnable(registration: Registration, ledger: Ledger) -> None:
    repo = Repository.containing(ledger.path.parent)
    checkout = environment.code_checkout()
    _, dirty = environment.git_state(checkout)
    committed = environment.read_git("show", f"HEAD:{LEDGER_FILE.as_posix()}", cwd=repo.root) if repo else None
    name = f"{registration.entry.suite} ({registration.entry.profile})"
    if dirty:
        raise LedgerError(f"{name}: registered design {registration.short} is not sealed yet and the checkout at "
                          f"{checkout} has uncommitted changes: commit them first (its confirmatory run needs a clean "
                          "commit), or run --exploratory")
    if committed is None or not any(hashlib.sha256(line.encode()).hexdigest() == registration.id
                                    for line in committed.splitlines()):
        raise LedgerError(f"{name}: registration {registration.short} is not in the committed "
                          f"{LEDGER_FILE}: commit the ledger before its confirmatory run")
