"""Every committed document of a kind harness reads through the document layer (``core/stored_fields``)
reads back to the same bytes: read typed, written again with ``as_stored``, it is the file (or the line, or
the bundle's part) it was read from. So moving a writer onto the layer changes no committed byte, and no
sealed bundle, ledger line or lock stops matching its hash."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness.core.stored_fields import as_stored, from_stored
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.evidence.bundle import SUFFIX, BundleHeader, read_bundle
from harness.evidence.ledger import LEDGER_FILE, LedgerEntry
from harness.store import canonical_json, parse_json
from harness.suite.design import DesignLock
from harness.suite.tuning_lock import LOCK_SUFFIX, TuningLock

REPOSITORY = Path(__file__).resolve().parents[1]
LOCKS = sorted((REPOSITORY / "suites").glob(f"*{LOCK_SUFFIX}"))
BUNDLES = sorted((REPOSITORY / "evidence").glob(f"*/*{SUFFIX}"))


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
        record = read_bundle(path).suite_json["design"]
        assert canonical_json(as_stored(DesignLock.from_stored(record))) == canonical_json(record), path


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_every_sealed_bundle_header_writes_back_byte_identical():
    for path in BUNDLES:
        line = _lines(path)[0]
        header = from_stored(BundleHeader, parse_json(line))
        assert header.design == path.name.removesuffix(SUFFIX)
        assert json.dumps(as_stored(header), sort_keys=True, separators=(",", ":")) == line, path


def test_every_sealed_summary_writes_back_byte_identical():
    for path in BUNDLES:
        line = _lines(path)[2]
        summary = read_bundle(path).summary
        assert summary.contrasts
        assert json.dumps({"kind": "summary", "summary": as_stored(summary)}, sort_keys=True,
                          separators=(",", ":")) == line, path


def test_every_sealed_trial_environment_writes_back_byte_identical():
    environments = [json.loads(line)["record"]["environment"] for path in BUNDLES for line in _lines(path)[3:]]
    assert len(environments) >= 700
    for environment in environments:
        assert as_stored(TrialEnvironment.of(environment)) == environment
        assert as_stored(TaskEnvironment.of(environment)) == environment
    assert {TrialEnvironment.of(environment).git_dirty for environment in environments} == {False}
