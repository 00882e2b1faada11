"""Every committed document of a kind harness reads through the document layer (``core/stored_fields``)
reads back to the same bytes: read typed, written again with ``as_stored``, it is the file (or the line, or
the bundle's part) it was read from. So moving a writer onto the layer changes no committed byte, and no
sealed bundle, ledger line or lock stops matching its hash."""
from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

from harness.core.record import from_json, to_json
from harness.core.stored_fields import as_stored, from_stored
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.evidence.bundle import SUFFIX, BundleHeader, SuiteLine, SummaryLine, TrialLine
from harness.evidence.ledger import LEDGER_FILE, LedgerEntry
from harness.store import canonical_json, parse_json
from harness.suite.design import DesignLock
from harness.suite.tuning_lock import LOCK_SUFFIX, TuningLock

REPOSITORY = Path(__file__).resolve().parents[1]
LOCKS = sorted((REPOSITORY / "suites").glob(f"*{LOCK_SUFFIX}"))
BUNDLES = sorted((REPOSITORY / "evidence").glob(f"*/*{SUFFIX}"))


@cache
def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_every_ledger_line_writes_back_byte_identical():
    lines = (REPOSITORY / LEDGER_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 11
    for line in lines:
        assert from_stored(LedgerEntry, parse_json(line)).line() == line


@pytest.mark.parametrize("lock", LOCKS, ids=lambda path: path.name)
def test_every_tuning_lock_writes_back_byte_identical(lock):
    assert canonical_json(TuningLock.read(lock, lock).as_stored()) == lock.read_text(encoding="utf-8")


def test_every_sealed_design_lock_writes_back_byte_identical():
    assert len(BUNDLES) >= 20
    for path in BUNDLES:
        record = parse_json(_lines(path)[1])["suite_json"]["design"]
        assert canonical_json(as_stored(DesignLock.from_stored(record))) == canonical_json(record), path


def test_every_sealed_bundle_header_writes_back_byte_identical():
    for path in BUNDLES:
        line = _lines(path)[0]
        header = from_stored(BundleHeader, parse_json(line))
        assert header.design == path.name.removesuffix(SUFFIX)
        assert json.dumps(as_stored(header), sort_keys=True, separators=(",", ":")) == line, path


def test_every_sealed_trial_environment_writes_back_byte_identical():
    environments = [json.loads(line)["record"]["environment"] for path in BUNDLES for line in _lines(path)[3:]]
    assert len(environments) >= 700
    for environment in environments:
        assert as_stored(TrialEnvironment.of(environment)) == environment
        assert as_stored(TaskEnvironment.of(environment)) == environment
    assert {TrialEnvironment.of(environment).git_dirty for environment in environments} == {False}


def test_every_line_of_every_sealed_bundle_writes_back_byte_identical():
    """The suite and trial lines too, each trial's record read and written by the record's own reader and writer."""
    for path in BUNDLES:
        lines = _lines(path)
        suite_line = from_stored(SuiteLine, parse_json(lines[1]))
        trial_lines = [TrialLine(to_json(from_json(from_stored(TrialLine, parse_json(line)).record)))
                       for line in lines[3:]]
        written = [from_stored(BundleHeader, parse_json(lines[0])), suite_line,
                   from_stored(SummaryLine, parse_json(lines[2])), *trial_lines]
        assert [_canonical_line(as_stored(line)) for line in written] == lines, path


def _canonical_line(data: dict) -> str:
    return json.dumps(json.loads(canonical_json(data)), sort_keys=True, separators=(",", ":"))
