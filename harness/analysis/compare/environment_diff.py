"""What differs between the environment two sets of trial records ran in (or records and this
machine): environment keys, task versions and installed packages. A reproduction shows it before
it reruns anything; ``harness compare`` shows it beside the metric shifts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from harness.core.record import TrialRecord

NOT_RECORDED = "not recorded"
ABSENT = "absent"
IGNORED_KEYS = ("argv", "executor", "run_id")  # how (and which) run was started, not what it ran with


@dataclass(frozen=True)
class Difference:
    key: str
    recorded: str
    here: str


def environment_differences(
    records: Sequence[TrialRecord], here: Mapping[str, str], task_versions: Mapping[str, str]
) -> list[Difference]:
    """Each environment key (and each task's version) whose recorded value is not this one's.

    Records of one run may hold several values (a run resumed after an upgrade): all are shown.
    """
    keys: list[str] = [k for k in here if k not in IGNORED_KEYS]
    for record in records:
        keys.extend(k for k in record.environment if k not in IGNORED_KEYS and k not in keys)
    found = []
    for key in keys:
        recorded = _distinct(str(r.environment.get(key, NOT_RECORDED)) for r in records)
        value = here.get(key, NOT_RECORDED)
        if recorded != [value]:
            found.append(Difference(key, " | ".join(recorded), value))
    for task, version in task_versions.items():
        recorded = _distinct(r.task_version for r in records if r.task == task)
        if recorded != [version]:
            found.append(Difference(f"task {task} version", " | ".join(recorded), version))
    return found


def package_differences(records: Sequence[TrialRecord], here: Sequence[str]) -> list[Difference]:
    """Each distribution installed in a different version (or only on one side), by name."""
    locks = [r.packages for r in records]
    if not locks:
        return [Difference("packages", NOT_RECORDED, f"{len(here)} installed")]
    recorded = [_versions(lock) for lock in locks]
    current = _versions(here)
    names = sorted({n for lock in recorded for n in lock} | set(current))
    found = []
    for name in names:
        was = _distinct(lock.get(name, ABSENT) for lock in recorded)
        now = current.get(name, ABSENT)
        if was != [now]:
            found.append(Difference(name, " | ".join(was), now))
    return found


def _versions(lock: Iterable[str]) -> dict[str, str]:
    """``name==version`` lines by normalised name (PEP 503: case, '-', '_' and '.' alike)."""
    out = {}
    for line in lock:
        name, _, version = str(line).partition("==")
        out[_normalise(name)] = version or "?"
    return out


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distinct(values: Iterable[str]) -> list[str]:
    return sorted(set(values))
