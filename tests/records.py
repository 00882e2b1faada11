"""Trial records for tests that write results folders by hand: each is a checked ``TrialRecord`` (the
fields a test does not care about take neutral values), so a test cannot store a shape the harness
itself would never write."""
from __future__ import annotations

from typing import Any

from harness.core.record import TrialRecord, from_json
from harness.suite.points import point_label


def make_record(trial_id: str, arm: str = "control", seed: int = 0, **fields: Any) -> TrialRecord:
    point = fields.pop("point", {})
    return from_json({
        "trial_id": trial_id, "suite": "synth", "profile": "default", "task": "synth", "task_version": "1",
        "arm": arm, "arm_label": arm, "seed": seed, "point": point, "point_label": point_label(point),
        "params": {}, "status": "finished", "error": None, "metrics": {}, **fields,
    })
