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
from harness.evidence.ledger import LEDGER_FILE, Ledger, LedgerEntry
from harness.evidence.registration import registered_digest
from harness.store import canonical_json, parse_json
from harness.suite.design import DesignLock
from harness.suite.stored import StoredSuite
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


def test_every_sealed_suite_json_writes_back_byte_identical():
    """Every suite.json harness has written, as the sealed bundles hold it (no results folder is committed), read
    typed (its sequential design, design lock and tuned params too) and written again, as the store writes it."""
    for path in BUNDLES:
        suite_json = from_stored(SuiteLine, parse_json(_lines(path)[1])).suite_json
        stored = StoredSuite.from_stored(suite_json)
        assert stored.design is not None and stored.sequential == stored.design.sequential, path
        assert canonical_json(as_stored(stored)) == canonical_json(suite_json), path


def test_every_registered_sealed_run_still_gives_its_registered_digest():
    """A registration's hash covers suite.json's analysed fields as the typed suite gives them back, so each
    registered bundle's suite.json and task code still give the digest its ledger line holds."""
    registered = {r.id: r.entry.design for r in Ledger.read(REPOSITORY / LEDGER_FILE).registrations()}
    checked = 0
    for path in BUNDLES:
        lines = _lines(path)
        stored = StoredSuite.from_stored(from_stored(SuiteLine, parse_json(lines[1])).suite_json)
        if stored.registration is None:
            continue  # sealed before the ledger began
        (code,) = {TaskEnvironment.of(parse_json(line)["record"]["environment"]).task_code_sha256 for line in lines[3:]}
        assert registered_digest(stored, code) == registered[stored.registration], path
        checked += 1
    assert checked >= 11


def test_every_sealed_trial_record_writes_back_byte_identical():
    records = [from_stored(TrialLine, parse_json(line)).record for path in BUNDLES for line in _lines(path)[3:]]
    assert len(records) >= 700
    for record in records:
        assert canonical_json(to_json(from_json(record))) == canonical_json(record)


def test_every_line_of_every_sealed_bundle_writes_back_byte_identical():
    """The suite and trial lines too, each read and written by its document's own reader and writer."""
    for path in BUNDLES:
        lines = _lines(path)
        suite_json = from_stored(SuiteLine, parse_json(lines[1])).suite_json
        suite_line = SuiteLine(as_stored(StoredSuite.from_stored(suite_json)))
        trial_lines = [TrialLine(to_json(from_json(from_stored(TrialLine, parse_json(line)).record)))
                       for line in lines[3:]]
        written = [from_stored(BundleHeader, parse_json(lines[0])), suite_line,
                   from_stored(SummaryLine, parse_json(lines[2])), *trial_lines]
        assert [_canonical_line(as_stored(line)) for line in written] == lines, path


def _canonical_line(data: dict) -> str:
    return json.dumps(json.loads(canonical_json(data)), sort_keys=True, separators=(",", ":"))
