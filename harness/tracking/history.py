"""Each claim of a suite across its parent MLflow runs: what was estimated, at which commit, when.

The parent run of every ``harness run`` carries each claim's estimate and interval as metrics and
its result as a tag (harness.tracking.claim_metrics); read back in run order they are the claim's
timeline, as asv's are for timings. Runs that logged no claims (interrupted ones) are left out.
"""
from __future__ import annotations

from datetime import datetime, timezone

from harness.analysis.present.claim_history import ClaimPoint
from harness.tracking.claim_metrics import CLAIM_PREFIX, CLAIM_TAG_PREFIX
from harness.tracking.mlflow_tracker import MlflowTracker


def claim_history(tracker: MlflowTracker, suite: str, profile: str) -> list[ClaimPoint]:
    """Every claim's value in every parent run of ``suite`` at ``profile``, oldest run first."""
    points = []
    for run in tracker.suite_runs(suite, profile):
        metrics, tags = run.data.metrics, run.data.tags
        started = datetime.fromtimestamp(run.info.start_time / 1000, tz=timezone.utc)
        commit = tags.get("harness.git_commit", "")
        for name in sorted(m[len(CLAIM_PREFIX) + 1 : -len("/estimate")] for m in metrics
                           if m.startswith(CLAIM_PREFIX + "/") and m.endswith("/estimate")):
            base = f"{CLAIM_PREFIX}/{name}"
            points.append(ClaimPoint(
                claim=name, run_id=run.info.run_id, started=started, commit=commit,
                dirty=tags.get("harness.git_dirty") == "true", estimate=metrics[f"{base}/estimate"],
                low=metrics.get(f"{base}/ci_low"), high=metrics.get(f"{base}/ci_high"),
                result=tags.get(f"{CLAIM_TAG_PREFIX}/{name}", "?"), seeds=_int(metrics.get(f"{base}/seeds")),
            ))
    return points


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
