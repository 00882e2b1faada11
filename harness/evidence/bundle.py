"""An evidence bundle: one confirmatory run as ``evidence/<suite>/<design hash>.jsonl.gz``.

One JSON object a line, gzip-compressed: a header (what was sealed, from which suite file), the run's
``suite.json`` (its design lock), its ``report/summary.json`` and every current trial record. A bundle is
received data like a results folder: it is read only as a regular file (never through a link), within
a size cap before and after decompression, and each part is checked by the store's own readers
(``StoredSuite``, ``record.from_json``) before anything uses it. Whatever is wrong is one line.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence, TypeVar

from harness.analysis.present.stored_summary import RunSummary
from harness.core.files import UnsafeFile
from harness.core.record import RecordError, TrialRecord, from_json, to_json
from harness.core.stored_fields import (
    COUNT,
    MAPPING,
    STRING,
    Schema,
    Shape,
    StoredFieldError,
    as_stored,
    document,
    from_stored,
    one_of,
    stored,
)
from harness.store import canonical_json, parse_json, read_regular
from harness.suite.design import design_record
from harness.suite.references import MAX_TRIALS
from harness.suite.schema import SAFE_NAME, SAFE_NAME_RULE
from harness.suite.stored import StoredSuite, StoredSuiteError

FORMAT = "harness-evidence"
_Line = TypeVar("_Line")
SUFFIX = ".jsonl.gz"
TARGET_BYTES = 2**20  # small enough to commit beside the findings: seal warns above it
MAX_BUNDLE_BYTES = 16 * 2**20  # what a received bundle may weigh on disk
MAX_TEXT_BYTES = 64 * 2**20  # what it may inflate to (a gzip bomb stops here)
_HASH = re.compile(r"[0-9a-f]{8}")
_SUITE_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,255}\.ya?ml")


class BundleError(ValueError):
    """A file that is not an evidence bundle this harness reads (exit 2): one line naming it."""


def design_hash(design: Mapping[str, Any]) -> str:
    """The first 8 hex digits of the design's sha256: the digits ``DesignLock.label`` prints."""
    return hashlib.sha256(canonical_json(design).encode()).hexdigest()[:8]


def _safe_suite_file(value: Any) -> bool:
    return (isinstance(value, str) and bool(_SUITE_FILE.fullmatch(value))
            and ".." not in PurePosixPath(value).parts and "//" not in value)


NAME = Shape(f"a plain word ({SAFE_NAME_RULE}; it is used in paths)",
             lambda value: isinstance(value, str) and bool(SAFE_NAME.fullmatch(value)))


@dataclass(frozen=True)
class BundleHeader:
    """A bundle's first line: what was sealed (suite, profile, the design's hash), from which suite file
    (relative to the repository), when, and how many trial lines follow."""

    stored_schema = Schema(1)
    suite: str = stored(NAME)
    profile: str = stored(NAME)
    design: str = stored(Shape("8 hex digits", lambda value: isinstance(value, str) and bool(_HASH.fullmatch(value))))
    suite_file: str = stored(Shape("a .yaml path inside the repository", _safe_suite_file))
    sealed_at: str = stored(STRING)  # ISO 8601, UTC, whole seconds
    trials: int = stored(COUNT)
    kind: str = stored(one_of("evidence"), default="evidence")
    format: str = stored(one_of(FORMAT), default=FORMAT)


@dataclass(frozen=True)
class SuiteLine:
    """A bundle's second line: the run's suite.json (checked by ``StoredSuite``)."""

    suite_json: dict[str, Any] = stored(MAPPING)
    kind: str = stored(one_of("suite"), default="suite")


@dataclass(frozen=True)
class SummaryLine:
    """A bundle's third line: the run's report/summary.json."""

    summary: RunSummary = stored(document(RunSummary))
    kind: str = stored(one_of("summary"), default="summary")


@dataclass(frozen=True)
class TrialLine:
    """Each later line: one trial's record (checked by ``record.from_json``)."""

    record: dict[str, Any] = stored(MAPPING)
    kind: str = stored(one_of("trial"), default="trial")


@dataclass(frozen=True)
class Bundle:
    """A bundle read back and checked: its header fields, design lock, run summary and trials."""

    path: Path
    suite: str
    profile: str
    design: str  # design_hash of the suite.json's design
    suite_file: str  # the suite file, relative to the repository that holds the bundle
    sealed_at: str
    suite_json: dict[str, Any]
    stored: StoredSuite
    summary: RunSummary
    trials: tuple[TrialRecord, ...]

    @property
    def name(self) -> str:
        """'<suite>/<design hash>': how findings cite the bundle."""
        return f"{self.suite}/{self.design}"

    @property
    def seeds(self) -> set[int]:
        return {record.seed for record in self.trials}

    @property
    def first_start(self) -> str:
        """The earliest trial start (ISO 8601): bundles of a claim are ordered by it."""
        return min(record.started_at for record in self.trials)


def encode(suite_file: str, suite_json: Mapping[str, Any], summary: RunSummary,
           records: Sequence[TrialRecord]) -> bytes:
    """The bundle's bytes (gzip without its own timestamp: the bytes depend on the content alone)."""
    stored = StoredSuite.from_stored(suite_json)
    header = BundleHeader(suite=stored.suite, profile=stored.profile, design=design_hash(design_record(suite_json)),
                          suite_file=suite_file, sealed_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          trials=len(records))
    lines = [as_stored(header), as_stored(SuiteLine(dict(suite_json))), as_stored(SummaryLine(summary)),
             *(as_stored(TrialLine(to_json(record))) for record in records)]
    # canonical_json first: it turns what JSON cannot hold (NaN in a task's details) into null
    text = "".join(json.dumps(json.loads(canonical_json(line)), sort_keys=True, separators=(",", ":")) + "\n"
                   for line in lines)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def read_bundle(path: Path) -> Bundle:
    """The bundle at ``path``, checked; BundleError names the file and what is wrong with it."""
    path = Path(path)
    try:
        raw = read_regular(path, MAX_BUNDLE_BYTES)
    except UnsafeFile as exc:
        raise BundleError(f"{path}: refused: {exc.strerror}") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    bundle = parse(raw, path)
    if path.name != f"{bundle.design}{SUFFIX}":
        raise BundleError(f"{path}: holds design {bundle.design}, so it is named {bundle.design}{SUFFIX}")
    if path.parent.name != bundle.suite:
        raise BundleError(f"{path}: holds suite {bundle.suite}, so it lies in a folder named {bundle.suite}")
    return bundle


def parse(raw: bytes, path: Path) -> Bundle:
    """A bundle from its compressed bytes (``path`` names it in errors)."""
    lines = _lines(_inflate(raw, path), path)
    if len(lines) < 4:
        raise BundleError(f"{path}: {len(lines)} line(s); a bundle holds a header, suite.json, the summary and trials")
    header = _line(BundleHeader, lines[0], path, 1)
    suite, profile, design = header.suite, header.profile, header.design
    suite_json = _line(SuiteLine, lines[1], path, 2).suite_json
    try:
        stored = StoredSuite.from_stored(suite_json)
    except StoredSuiteError as exc:
        raise BundleError(f"{path}: line 2: suite.json: {exc}") from None
    if (stored.suite, stored.profile) != (suite, profile):
        raise BundleError(f"{path}: line 2: suite.json is of {_shown(stored.suite)}/{_shown(stored.profile)}, "
                          f"the header names {suite}/{profile}")
    if design_hash(design_record(suite_json)) != design:
        raise BundleError(f"{path}: line 2: suite.json's design hashes to {design_hash(design_record(suite_json))}, "
                          f"the header names {design}")
    summary = _line(SummaryLine, lines[2], path, 3).summary
    if (summary.suite, summary.profile) != (suite, profile):
        raise BundleError(f"{path}: line 3: not the summary of {suite}/{profile}")
    if len(lines) - 3 > MAX_TRIALS:
        raise BundleError(f"{path}: refused: {len(lines) - 3} trials, over the {MAX_TRIALS} one suite may expand to")
    trials = tuple(_trial(line, path, n, stored) for n, line in enumerate(lines[3:], start=4))
    ids = [record.trial_id for record in trials]
    if len(set(ids)) != len(ids):
        raise BundleError(f"{path}: a trial id appears twice")
    if header.trials != len(trials):
        raise BundleError(f"{path}: line 1 counts {header.trials} trials; the bundle holds {len(trials)}")
    return Bundle(path, suite, profile, design, header.suite_file, header.sealed_at, suite_json, stored, summary,
                  trials)


def _inflate(raw: bytes, path: Path) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(raw, MAX_TEXT_BYTES + 1)
    except zlib.error as exc:
        raise BundleError(f"{path}: not gzip data ({exc})") from None
    if len(data) > MAX_TEXT_BYTES:
        raise BundleError(f"{path}: refused: inflates to over {MAX_TEXT_BYTES // 2**20} MiB")
    if not inflater.eof or inflater.unused_data:
        raise BundleError(f"{path}: truncated, or data after its gzip stream")
    return data


def _lines(data: bytes, path: Path) -> list[Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(f"{path}: not UTF-8 text") from None
    parsed = []
    for n, line in enumerate(text.splitlines(), start=1):
        try:
            parsed.append(parse_json(line))
        except json.JSONDecodeError as exc:
            raise BundleError(f"{path}: line {n}: not JSON ({exc.msg})") from None
    return parsed


def _line(cls: type[_Line], line: Any, path: Path, n: int) -> _Line:
    """Line ``n`` read as the document it must be; BundleError names the line and the key that is wrong."""
    try:
        return from_stored(cls, line)
    except StoredFieldError as exc:
        raise BundleError(f"{path}: line {n}: {exc}") from None


def _trial(line: Any, path: Path, n: int, stored: StoredSuite) -> TrialRecord:
    try:
        record = from_json(_line(TrialLine, line, path, n).record)
    except RecordError as exc:
        raise BundleError(f"{path}: line {n}: {exc}") from None
    if (record.suite, record.profile) != (stored.suite, stored.profile) or not stored.includes(record.trial_id, record.seed):
        raise BundleError(f"{path}: line {n}: trial {_shown(record.trial_id)} is not of the sealed suite's expansion")
    return record


def _shown(value: Any) -> str:
    """A received value in a message: its repr (escapes and all), cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
