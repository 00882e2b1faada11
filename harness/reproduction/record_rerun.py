"""Sampled trial records rerun, every value required bit for bit (``harness audit --reproduce N``).

The audit's other checks read an evidence bundle against git; a value no verdict reads (an exploratory
metric a finding cites) or a forged whole bundle is consistent with itself. A rerun is not: each sampled
trial is rebuilt from its record (task, version, arm, seed, params) and run again on this machine's CPU in
the deterministic numeric mode, with its cached artifacts built afresh, and every metric but the speed ones
must come back identical. A trial whose task code here is not the code it ran is not rerun (its values would
differ for that reason alone): the line says which commit's harness can rerun it.
"""
from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from typing import Any, Mapping, Sequence

from harness.core.record import TrialRecord
from harness.core.terminal import Console
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.reproduction.reproduce import plan_reproduction, run_reproduction
from harness.reproduction.sources import ReproduceError
from harness.store import RunFolder
from harness.tasks import UnknownTaskError, load_received_task
from harness.tasks.source import task_code


@dataclass
class Rerun:
    """What the rerun of a bundle's sample found."""

    rerun: list[str] = field(default_factory=list)  # titles of the trials rerun
    differing: list[str] = field(default_factory=list)  # "<trial>: <metric> recorded X, rerun Y"
    skipped: list[str] = field(default_factory=list)  # why a sampled trial was not rerun
    error: str | None = None


def sample(records: Sequence[TrialRecord], count: int, seed: int | None = None,
           cheapest: bool = False) -> list[TrialRecord]:
    """``count`` finished trials drawn at random (``seed`` fixes the draw, for a test), or with ``cheapest``
    the ``count`` that took the least wall time (what CI can afford on every commit); a trial trained in a
    seed batch brings its batch-mates, since it reruns only in the same batch."""
    finished = [record for record in records if record.finished]
    if cheapest:
        chosen = sorted(finished, key=lambda record: (record.wall_seconds, record.trial_id))[:count]
    else:
        chooser = random.Random(seed) if seed is not None else random.SystemRandom()
        chosen = chooser.sample(finished, min(count, len(finished)))
    batches = {(r.arm_label, r.point_label, r.seed_batch) for r in chosen if r.seed_batch}
    mates = [r for r in finished if (r.arm_label, r.point_label, r.seed_batch) in batches and r not in chosen]
    return chosen + mates


def rerun(suite_json: Mapping[str, Any], records: Sequence[TrialRecord], task_paths: tuple[str, ...] = ()) -> Rerun:
    """Rerun ``records`` (trials of the stored suite ``suite_json``) and compare every non-speed value with the
    record (``task_paths``: tasks trusted by module path, as ``harness reproduce --task-path``)."""
    found = Rerun()
    chosen = []
    for record in records:
        try:
            here = task_code(load_received_task(record.task, task_paths).__module__).sha256
        except UnknownTaskError as exc:
            found.skipped.append(f"{record.title}: {exc}")
            continue
        recorded = TaskEnvironment.of(record.environment).task_code_sha256
        if here != recorded:
            found.skipped.append(f"{record.title}: its task's code changed since it ran (rerun it with the harness at "
                                 f"{(TrialEnvironment.of(record.environment).git_commit or 'its commit')[:12]})")
            continue
        chosen.append(record)
    if not chosen:
        return found
    with tempfile.TemporaryDirectory(prefix="harness-audit-rerun-") as scratch:
        folder = RunFolder(Path(scratch) / "recorded", chosen[0].suite, chosen[0].profile)
        folder.save_suite(dict(suite_json))
        for record in chosen:
            folder.save_trial(record)
        try:
            plan = plan_reproduction(str(folder.path), None, Path(scratch), Path(scratch) / "rerun", "cpu", False,
                                     task_paths)
            outcome = run_reproduction(plan, Console(quiet=True))
        except ReproduceError as exc:
            found.error = str(exc)
            return found
    found.rerun = [record.title for record in chosen]
    comparison = outcome.comparison
    found.differing = [f"{check.trial}: {check.key} recorded {check.recorded!r}, rerun {check.reproduced!r}"
                       for check in comparison.differing]
    found.differing += [f"{change.key}: {change.recorded} -> {change.here}" for change in comparison.status_changes]
    found.differing += [f"{title}: not rerun" for title in comparison.not_rerun]
    return found
