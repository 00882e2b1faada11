"""The ledger: an append-only record, committed in the repository, of every design registered before its
data, every registered run sealed, every registration abandoned, and every sealed study invalidated (its
own data break an assumption its verdicts rest on, such as the declared skewness bound).

One JSON object a line (``evidence/ledger.jsonl``). Each line names the sha256 of the line before it, so a
line edited, removed or put in another order breaks the chain, and git's history of the file shows
whether it only ever grew. A registration draws its seeds from its own line (the previous line's hash,
the design's hash and the second it was written), so nobody knows them before the design is registered,
and it never draws a seed an earlier registration of the suite drew: a redesign always runs on fresh seeds.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core.stored_fields import (
    ANY,
    INTEGER,
    STRING,
    TEXT,
    Schema,
    StoredFieldError,
    as_stored,
    from_stored,
    list_of,
    one_of,
    optional,
    stored,
)
from harness.store import canonical_json, parse_json

LEDGER_FILE = Path("evidence") / "ledger.jsonl"
REGISTERED, SEALED, ABANDONED, INVALIDATED = "registered", "sealed", "abandoned", "invalidated"
SEED_FLOOR, SEED_CEILING = 100_000, 10_000_000  # registered seeds: far from the hand-picked ones of earlier designs
MAX_LEDGER_BYTES = 16 * 2**20


class LedgerError(ValueError):
    """A ledger that cannot be read or extended: one line naming the file, the line and what is wrong."""


@dataclass(frozen=True)
class LedgerEntry:
    """One line of the ledger; which fields are set depends on its kind."""

    stored_schema = Schema(1)
    kind: str = stored(one_of(REGISTERED, SEALED, ABANDONED, INVALIDATED))
    suite: str = stored(TEXT)
    profile: str = stored(TEXT)
    at: str = stored(TEXT)  # when it was written: ISO 8601, UTC, whole seconds
    previous: str = stored(STRING)  # sha256 of the line before ("" on the first line)
    # the rest are set by some kinds only, and a line holds only those set (so it is as short as its kind):
    # registered: the suite file (relative to the repository), record_digest(record), what it covers, its seeds;
    # sealed: the registration's id, the bundle's path and its bytes' sha256; abandoned: its id and why;
    # invalidated: its id and why
    suite_file: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)
    design: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)
    record: Mapping[str, Any] | None = stored(optional(ANY), missing=None, omit_missing=True, default=None)
    seeds: tuple[int, ...] = stored(list_of(INTEGER, "a list of integers"), missing=(), omit_missing=True, default=())
    registration: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)
    bundle: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)
    bundle_sha256: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)
    reason: str | None = stored(optional(TEXT), missing=None, omit_missing=True, default=None)

    def line(self) -> str:
        """The entry as one line: canonical JSON (sorted keys, no spaces), so its hash is the content's."""
        return json.dumps(json.loads(canonical_json(as_stored(self))), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Registration:
    """A registered design, with its id (the sha256 of its line) and what became of it."""

    id: str
    entry: LedgerEntry
    sealed: LedgerEntry | None = None
    abandoned: LedgerEntry | None = None
    invalidated: LedgerEntry | None = None  # a sealed study whose verdicts its own data do not support (why)

    @property
    def short(self) -> str:
        """The first 12 hex digits of the id: how the terminal, tags and bundles name it."""
        return self.id[:12]

    @property
    def open(self) -> bool:
        """Registered, and neither sealed nor abandoned yet."""
        return self.sealed is None and self.abandoned is None


@dataclass(frozen=True)
class Ledger:
    """The ledger file read back: every line in order, each checked against its predecessor."""

    path: Path
    entries: tuple[LedgerEntry, ...]
    line_hashes: tuple[str, ...]  # sha256 of each line's bytes: a registration's id, the next line's previous

    @classmethod
    def read(cls, path: Path) -> Ledger:
        """The ledger at ``path`` (an absent file is an empty ledger); LedgerError on a malformed line or a
        broken chain."""
        path = Path(path)
        try:
            if path.is_symlink():
                raise LedgerError(f"{path}: refused: a link (the ledger is read only as a regular file)")
            if path.exists() and path.stat().st_size > MAX_LEDGER_BYTES:
                raise LedgerError(f"{path}: refused: over {MAX_LEDGER_BYTES // 2**20} MiB")
            text = path.read_text(encoding="utf-8") if path.exists() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerError(f"{path}: cannot be read ({exc})") from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: Path) -> Ledger:
        entries, hashes = [], []
        previous = ""
        for number, line in enumerate(text.splitlines(), start=1):
            entry = _entry(line, path, number)
            if entry.previous != previous:
                raise LedgerError(f"{path}: line {number}: previous is {entry.previous[:12] or 'empty'}, the line "
                                  f"before hashes to {previous[:12] or 'nothing'}: a line was edited, removed or moved")
            previous = hashlib.sha256(line.encode("utf-8")).hexdigest()
            entries.append(entry)
            hashes.append(previous)
        return cls(path, tuple(entries), tuple(hashes))

    @property
    def head(self) -> str:
        """The hash the next line names as its previous."""
        return self.line_hashes[-1] if self.line_hashes else ""

    def registrations(self) -> list[Registration]:
        """Every registration in the order written, with each later line that closes it attached under its kind
        (a Registration's field is named as the kind of line it holds: sealed, abandoned, invalidated)."""
        lines = list(zip(self.entries, self.line_hashes))
        return [replace(Registration(digest, entry), **{later.kind: later for later, _ in lines[n + 1:]
                                                        if later.kind != REGISTERED and later.registration == digest})
                for n, (entry, digest) in enumerate(lines) if entry.kind == REGISTERED]

    def registration(self, prefix: str) -> Registration | None:
        """The registration whose id starts with ``prefix`` (12 or more hex digits)."""
        matches = [r for r in self.registrations() if len(prefix) >= 12 and r.id.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def matching(self, suite: str, profile: str, design: str) -> Registration | None:
        """The latest registration of this design of ``suite`` at ``profile`` that was not abandoned."""
        found = [r for r in self.registrations() if r.abandoned is None and
                 (r.entry.suite, r.entry.profile, r.entry.design) == (suite, profile, design)]
        return found[-1] if found else None

    def used_seeds(self, suite: str) -> set[int]:
        """Every seed any registration of ``suite`` drew."""
        return {seed for r in self.registrations() if r.entry.suite == suite for seed in r.entry.seeds}


def _entry(line: str, path: Path, number: int) -> LedgerEntry:
    try:
        data = parse_json(line)
    except ValueError as exc:
        raise LedgerError(f"{path}: line {number}: not JSON ({str(exc)[:80]})") from None
    try:
        entry = from_stored(LedgerEntry, data, unknown="not a field of a ledger entry")
    except StoredFieldError as exc:
        raise LedgerError(f"{path}: line {number}: {exc}") from None
    if line != entry.line():
        raise LedgerError(f"{path}: line {number}: not written as the harness writes it (canonical JSON)")
    return entry


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def draw_seeds(previous: str, design: str, at: str, count: int, used: Iterable[int]) -> tuple[int, ...]:
    """``count`` seeds from the registration's own line (its predecessor, its design and its second), none of
    them in ``used``: deterministic given the line, unknowable before it is written."""
    taken, seeds, counter = set(used), [], 0
    while len(seeds) < count:
        digest = hashlib.sha256(f"{previous}|{design}|{at}|{counter}".encode()).digest()
        seed = SEED_FLOOR + int.from_bytes(digest[:8], "big") % (SEED_CEILING - SEED_FLOOR)
        counter += 1
        if seed not in taken:
            taken.add(seed)
            seeds.append(seed)
    return tuple(seeds)


def append(ledger: Ledger, entry: LedgerEntry) -> tuple[Ledger, str]:
    """Write ``entry`` after the ledger's last line (made durable before returning); the ledger as it now
    is, and the new line's hash (a registration's id)."""
    entry = replace(entry, previous=ledger.head)
    line = entry.line()
    ledger.path.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger.path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    digest = hashlib.sha256(line.encode("utf-8")).hexdigest()
    return Ledger(ledger.path, (*ledger.entries, entry), (*ledger.line_hashes, digest)), digest
