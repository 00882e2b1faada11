"""Each claim of a suite across its parent MLflow runs: what was estimated, at which commit, when.

The parent run of every ``harness run`` carries each claim's estimate and the interval it was decided on
(older runs: the plain t interval) as metrics and its result as a tag (harness.tracking.claim_metrics);
read back in run order they are the claim's timeline, as asv's are for timings. Runs that logged no claims (interrupted ones) are left out.

Without an MLflow store (a run with ``--no-mlflow``) the stored run folder is the one run there is:
``stored_claim_history`` reads its claims from its trials, named as MLflow would name them.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from harness.analysis.present.claim_history import ClaimPoint
from harness.analysis.present.claim_interval import decided_interval
from harness.analysis.decide.run_decisions import analyse
from harness.analysis.run_results import load_results
from harness.core.trial_environment import TaskEnvironment, TrialEnvironment
from harness.tracking.claim_metrics import CLAIM_PREFIX, CLAIM_TAG_PREFIX, metric_path
from harness.tracking.mlflow_tracker import MlflowTracker


def claim_history(tracker: MlflowTracker, suite: str, profile: str) -> list[ClaimPoint]:
    """Every claim's value in every parent run of ``suite`` at ``profile``, oldest run first."""
    points = []
    for run in tracker.suite_runs(suite, profile):
        metrics, tags = run.data.metrics, run.data.tags
        started = datetime.fromtimestamp(run.info.start_time / 1000, tz=timezone.utc)
        # the run's environment, tagged harness.<key> (MlflowTracker.start_parent)
        tagged = {key.removeprefix("harness."): value for key, value in tags.items() if key.startswith("harness.")}
        environment, task = TrialEnvironment.of(tagged), TaskEnvironment.of(tagged)
        for name in sorted(m[len(CLAIM_PREFIX) + 1 : -len("/estimate")] for m in metrics
                           if m.startswith(CLAIM_PREFIX + "/") and m.endswith("/estimate")):
            base = f"{CLAIM_PREFIX}/{name}"
            points.append(ClaimPoint(
                claim=name, run_id=run.info.run_id, started=started, commit=environment.git_commit,
                dirty=environment.git_dirty is True, estimate=metrics[f"{base}/estimate"],
                low=metrics.get(f"{base}/interval_low", metrics.get(f"{base}/ci_low")),
                high=metrics.get(f"{base}/interval_high", metrics.get(f"{base}/ci_high")),
                result=tags.get(f"{CLAIM_TAG_PREFIX}/{name}", "?"), seeds=_int(metrics.get(f"{base}/seeds")),
                task_commit=task.task_git_commit, task_dirty=task.task_git_dirty is True,
            ))
    return points


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def stored_claim_history(folder: Path) -> list[ClaimPoint]:
    """The claims of the run stored in ``folder`` (``<suite>/<profile>``), as one run of the history:
    dated by its last trial's start, at the commit its trials record (ResultsError when unreadable)."""
    analysis = analyse(load_results(folder))
    last = max(analysis.results.finished, key=lambda r: r.started_at, default=None)
    started = datetime.fromisoformat(last.started_at) if last and last.started_at else datetime.fromtimestamp(0, timezone.utc)
    environment = TrialEnvironment.of(last.environment if last else {})
    task = TaskEnvironment.of(last.environment if last else {})
    return [ClaimPoint(
        claim=metric_path(CLAIM_PREFIX, claim.contrast, claim.key, claim.point)[len(CLAIM_PREFIX) + 1:],
        run_id="stored", started=started, commit=environment.git_commit,
        dirty=environment.git_dirty is True, estimate=claim.estimate,
        low=None if decided_interval(claim) is None else decided_interval(claim).low,
        high=None if decided_interval(claim) is None else decided_interval(claim).high,
        result=claim.result_text, seeds=claim.n, task_commit=task.task_git_commit,
        task_dirty=task.task_git_dirty is True,
    ) for claim in analysis.claims if claim.estimate is not None]
