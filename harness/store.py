"""The results store: one canonical JSON file per trial, written atomically.

The store is the source of truth; MLflow is a mirror. A trial's file appears only once it is
complete (tmp file + fsync + os.replace), so a crash or Ctrl-C can never leave a half-written
result, and a rerun finds exactly the trials that finished.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from harness.core.files import UnsafeFile, open_regular
from harness.core.record import RecordError, RecordMark, TrialRecord, from_json, to_json
from harness.core.stored_fields import from_stored

_UMASK = os.umask(0)
os.umask(_UMASK)
SUITE_FILE = "suite.json"
TRIALS_DIR = "trials"
SUPERSEDED_DIR = "superseded"  # under trials/: records a changed task or suite replaced (no reader looks there)
REPORT_DIR = "report"  # the analysis of the run: tables, plots, summary.json (rebuilt from the trials)
CORRUPT_SUFFIX = ".corrupt"
REDESIGNED_FILE = "redesigned.txt"  # under trials/superseded/: ids set aside by --redesign (never restored)
INCOMPLETE_FILE = "run.incomplete"  # present from a run's start until every trial of it is stored
_TMP_NAME = re.compile(r"^\..+\.tmp(\.\w+)?$")  # write_atomic's .<name>.<random>.tmp, and .<name>.<pid>.tmp.npz


def _clean(value: Any) -> Any:
    """Canonical JSON: NaN/inf become null (JSON has neither), tuples become lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def canonical_json(obj: Any) -> str:
    return json.dumps(_clean(obj), sort_keys=True, indent=1, allow_nan=False)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write obj to path so that readers see either the old file or the complete new one."""
    write_text_atomic(path, canonical_json(obj))


def write_text_atomic(path: Path, text: str) -> None:
    """Write text to path so that readers see either the old file or the complete new one."""
    write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))


def read_verified(path: Path, checksum: Path) -> bytes | None:
    """``path``'s bytes when they hash to the sha256 written in ``checksum``; None when either cannot be
    read or they differ, so a truncated or altered file is never used."""
    try:
        data, recorded = path.read_bytes(), checksum.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == recorded else None


def write_checksum(path: Path, checksum: Path) -> None:
    """Record the sha256 of ``path``'s bytes in ``checksum`` (atomically), for ``read_verified``."""
    write_text_atomic(checksum, hashlib.sha256(path.read_bytes()).hexdigest())


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """tmp file + fsync + rename: a crash leaves the old file or the new one, never a mix.

    ``write`` fills a binary handle (``torch.save(obj, handle)`` works); the tmp file is named
    ``.<name>.<random>.tmp`` next to path, so a reader of ``path`` never sees it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


MAX_READ_BYTES = 256 * 2**20  # a trial record, suite.json or marker is kilobytes; a received folder may hold anything


def read_regular(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``files.open_regular``); UnsafeFile otherwise."""
    with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(errno.EFBIG, f"over {limit // 2**20} MiB", str(path))
    return data


MAX_INT_DIGITS = 100  # a stored integer is a seed, a count or a byte size: far below this
MAX_JSON_DEPTH = 64  # a stored document nests a few levels (a suite's params); a hostile one, thousands


class HostileJSON(json.JSONDecodeError):
    """JSON that parses only at a cost no stored document needs: an integer of too many digits (Python's
    conversion is quadratic, and refused past its own limit with a bare ValueError) or nesting too deep
    (a RecursionError while parsing, or in whatever walks it later). A JSONDecodeError, so that every reader
    that refuses malformed JSON in one line refuses this in the same line."""


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and objects deeper than MAX_JSON_DEPTH (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json(text: str) -> Any:
    """``text`` parsed as a stored document: the one JSON parser of every file the harness reads back (a
    received folder's may be hostile). JSONDecodeError (HostileJSON for the limits) when it is not one."""

    def bounded_int(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise HostileJSON(f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})", text,
                              max(text.find(digits), 0))
        return int(digits)

    try:
        value = json.loads(text, parse_int=bounded_int)
    except RecursionError:
        raise HostileJSON(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0) from None
    if isinstance(value, (dict, list)) and _too_deep(value):
        raise HostileJSON(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
    return value


def read_json(path: Path) -> Any:
    """A stored JSON document (``parse_json``) from a regular file of bounded size."""
    return parse_json(read_regular(path).decode("utf-8"))


class RunFolder:
    """The folder of one suite at one profile: ``<root>/<suite>/<profile>``."""

    def __init__(self, root: Path, suite: str, profile: str) -> None:
        self.path = Path(root) / suite / profile
        self.trials_dir = self.path / TRIALS_DIR

    def trial_path(self, trial_id: str) -> Path:
        return self.trials_dir / f"{trial_id}.json"

    def load_trials(self) -> tuple[dict[str, TrialRecord], list[tuple[Path, str]]]:
        """Every readable trial record by id, and the corrupt files, each moved aside to
        ``<id>.json.corrupt`` (out of every reader's way) with the reason: their trials rerun."""
        records: dict[str, TrialRecord] = {}
        corrupt: list[tuple[Path, str]] = []
        for path in iter_trial_files(self.path):
            try:
                record = read_trial(path)
            except CorruptTrial as exc:
                aside = path.with_name(path.name + CORRUPT_SUFFIX)
                os.replace(path, aside)
                corrupt.append((aside, str(exc)))
                continue
            records[record.trial_id] = record
        return records, corrupt

    @staticmethod
    def resumable(records: dict[str, TrialRecord]) -> dict[str, TrialRecord]:
        """The records a resumed run keeps: finished ones only (a failed trial runs again)."""
        return {trial_id: r for trial_id, r in records.items() if r.finished}

    def save_trial(self, record: TrialRecord) -> Path:
        """Checked before it is written (``record.to_json``): a malformed record never reaches the store."""
        path = self.trial_path(record.trial_id)
        write_json_atomic(path, to_json(record))
        return path

    def set_aside(self, trial_ids: list[str], redesign: bool = False) -> Path:
        """Move these trials' files to ``trials/superseded/`` (kept for the record, read by no analysis).
        A record set aside by ``--redesign`` is listed as such: it ran before the folder's design was
        fixed, so it never comes back (``restorable``); one a changed task set aside may."""
        aside = self.trials_dir / SUPERSEDED_DIR
        aside.mkdir(parents=True, exist_ok=True)
        for trial_id in trial_ids:
            os.replace(self.trial_path(trial_id), aside / f"{trial_id}.json")
        listed = self._redesigned()
        kept = listed | set(trial_ids) if redesign else listed - set(trial_ids)
        if kept != listed:
            write_text_atomic(aside / REDESIGNED_FILE, "".join(f"{trial_id}\n" for trial_id in sorted(kept)))
        return aside

    def _redesigned(self) -> set[str]:
        path = self.trials_dir / SUPERSEDED_DIR / REDESIGNED_FILE
        return set(path.read_text(encoding="utf-8").split()) if path.is_file() else set()

    def restorable(self, trial_ids: list[str]) -> dict[str, TrialRecord]:
        """The finished records in ``trials/superseded/`` with these ids (a task's code, version or
        params reverted to what they were when the record ran), those set aside by ``--redesign`` and
        unreadable files left out."""
        aside, redesigned = self.trials_dir / SUPERSEDED_DIR, self._redesigned()
        found: dict[str, TrialRecord] = {}
        for trial_id in trial_ids:
            path = aside / f"{trial_id}.json"
            if trial_id in redesigned or not path.is_file():
                continue
            try:
                record = read_trial(path)
            except CorruptTrial:
                continue
            if record.finished:
                found[trial_id] = record
        return found

    def restore(self, trial_ids: list[str]) -> None:
        """Move these records back from ``trials/superseded/`` into the run's trials."""
        for trial_id in trial_ids:
            os.replace(self.trials_dir / SUPERSEDED_DIR / f"{trial_id}.json", self.trial_path(trial_id))

    def mark_incomplete(self) -> None:
        """Before any trial runs: the run reads as incomplete until ``mark_complete``, so a process that
        ends early (a crash, a kill, a task calling ``_exit``) leaves a folder no reader takes for a result."""
        write_text_atomic(self.path / INCOMPLETE_FILE, f"harness run started by process {os.getpid()}\n")

    def mark_complete(self) -> None:
        (self.path / INCOMPLETE_FILE).unlink(missing_ok=True)

    def save_suite(self, stored: dict) -> Path:
        """Rewritten only when the resolved suite changed, so its mtime dates the last change (whoever writes
        it checks its design first: ``suite.design.check_design``)."""
        path = self.path / SUITE_FILE
        if not path.exists() or path.read_text(encoding="utf-8") != canonical_json(stored):
            write_json_atomic(path, stored)
        return path

    def set_aside_all(self) -> tuple[int, Path]:
        """Every stored trial moved to ``trials/superseded/`` (``--redesign``): the folder starts afresh."""
        trial_ids = [path.stem for path in iter_trial_files(self.path)]
        return len(trial_ids), self.set_aside(trial_ids, redesign=True)


def stale_note(count: int, where: Path) -> str:
    """The warning every reader (and the run) gives when stored trials were set aside; '' when none were."""
    if not count:
        return ""
    return (f"warning: {count} stored trial(s) in {where} are not of this suite's expansion and seeds "
            "(a param, sweep, arm or seed changed since they ran): set aside, not analysed")


def incomplete_note(run_dir: Path) -> str:
    """What every reader says of a run folder whose last run ended before all its trials were stored; ''
    for a complete one. The marker's content is never shown (a received folder's text is not ours)."""
    try:
        marked = (Path(run_dir) / INCOMPLETE_FILE).lstat().st_mtime
    except FileNotFoundError:
        return ""
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(marked))
    return (f"INCOMPLETE RUN: the run of {run_dir} started {since} ended before every trial was stored (a crash, "
            "a kill, Ctrl-C or a task that ended the process): its results are partial; run the suite into this "
            "folder again to complete it")


class CorruptTrial(ValueError):
    """A trial file that is not a trial record (truncated by hand, overwritten, not UTF-8 JSON)."""


def read_trial(path: Path) -> TrialRecord:
    """A trial record, or CorruptTrial saying why the file is not one."""
    try:
        record = read_json(path)
    except UnsafeFile as exc:
        raise CorruptTrial(exc.strerror) from None
    except UnicodeDecodeError:
        raise CorruptTrial("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise CorruptTrial(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(record, dict):
        raise CorruptTrial(f"holds {type(record).__name__ if record is not None else 'null'}, not a trial record")
    mark = from_stored(RecordMark, record)
    if mark.trial_id != path.stem or not mark.status:
        raise CorruptTrial("not a trial record (trial_id or status missing or wrong)")
    try:
        return from_json(record)
    except RecordError as exc:
        raise CorruptTrial(f"not a trial record ({exc})") from None


def clean_stray_tmp(*folders: Path, min_age: float = 0.0, skip: Path | None = None) -> int:
    """Remove temporary files that an interrupted atomic write left (crash, SIGKILL) under folders.

    Call only while no other process writes there (the suite's writer lock); ``min_age`` spares
    files younger than that many seconds, ``skip`` a subfolder (a concurrent ``harness report``
    may be writing there).
    """
    removed = 0
    now = time.time()
    for folder in folders:
        if not Path(folder).is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            if skip is not None:
                dirnames[:] = [d for d in dirnames if Path(dirpath) / d != skip]
            for name in filenames:
                if _TMP_NAME.match(name):
                    path = Path(dirpath) / name
                    try:
                        if min_age and now - path.stat().st_mtime < min_age:
                            continue
                        path.unlink()
                        removed += 1
                    except FileNotFoundError:
                        pass
    return removed


def iter_runs(path: Path) -> list[Path]:
    """Every ``<suite>/<profile>`` folder under path, or path itself when it is one."""
    path = Path(path)
    if (path / SUITE_FILE).exists():
        return [path]
    return sorted(p.parent for p in path.glob(f"*/*/{SUITE_FILE}")) + sorted(
        p.parent for p in path.glob(f"*/{SUITE_FILE}")
    )


def iter_trial_files(run_dir: Path) -> Iterator[Path]:
    yield from sorted((Path(run_dir) / TRIALS_DIR).glob("*.json"))
