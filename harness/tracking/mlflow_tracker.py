"""Mirror stored results to MLflow: one parent run per suite invocation, one nested run per trial.

The results store is the source of truth. A trial is mirrored only after its JSON is on disk,
in a handful of batched calls, and a marker file records the MLflow run it went to and the store
it is in (a replaced ``mlflow.db`` has another identity, so its markers no longer count). A trial
counts as mirrored only while its run is FINISHED (FAILED for a failed trial) with its metrics:
whenever a run touches MLflow it checks every stored trial against MLflow, deletes a trial's
leftover runs (a crash left it RUNNING or empty, an older attempt) and logs again what is
missing, so each trial id has exactly one run (on a shared store the runs are checked even where every
marker is in place: another folder may have deleted them). Parent runs are recorded in ``mlflow/parents/``
while open, so an invocation killed at any point is closed (KILLED) by the next.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlparse

from harness.core.faults import fault
from harness.core.record import TrialRecord
from harness.core.stored_fields import as_stored
from harness.core.trial_environment import TrialEnvironment
from harness.store import read_json, write_atomic, write_json_atomic
from harness.suite.stored import StoredSuite
from harness.tracking.mlflow_names import flatten, mlflow_key

if TYPE_CHECKING:
    from harness.tracking.trial_view import TrialView

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
NOTE_TAG = "mlflow.note.content"  # an experiment's description, shown on its page
MODEL_TRAINING_VIEW = "workflowType=machine_learning"  # the UI's runs-table view (MLflow 3 opens on GenAI)
# A saved view of each suite's runs table, kept as MLflow's shared view state (an experiment tag) and opened by
# ``#/experiments/<id>/runs?viewStateShareKey=arms``: the trial runs grouped by arm, charts at each arm's mean.
ARMS_VIEW = "arms"
ARMS_VIEW_TAG = f"mlflow.sharedViewState.{ARMS_VIEW}"
ARMS_VIEW_STATE = json.dumps({
    "searchFilter": "tags.`harness.kind` = 'trial'",
    "groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": "harness.arm_label"}]},
    "useGroupedValuesInCharts": True,
    "hideEmptyCharts": True,
}, sort_keys=True)
TRIAL_ID_TAG = "harness.trial_id"
RESULTS_ID_TAG = "harness.results_id"  # which results folder logged a run: other folders share a server
MARKER_DIR = "mlflow"
RESULTS_ID_FILE = "results-id"
PARENTS_DIR = "parents"
_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")
_COMMIT = re.compile(r"[0-9a-f]{40}")


class TrackingError(RuntimeError):
    """The tracking server or store cannot be used: one line for the user."""


def redacted(text: str) -> str:
    """``text`` with the user:password of every URL in it replaced by ***, for what is printed or
    stored (markers, records, run tags): results folders are shared, credentials are not."""
    return _CREDENTIALS.sub("***@", text)


def default_tracking_uri(results_root: Path) -> str:
    return f"sqlite:///{(results_root / 'mlflow.db').resolve()}"


def missing_store(uri: str) -> Path | None:
    """The file a ``sqlite:///`` URI names when it does not exist (MLflow would create an empty store
    there to look anything up in); None for a store that exists or a server."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri[len("sqlite:///"):])
    return None if path.is_file() else path


def location_inside(location: str, artifact_root: Path) -> bool:
    """Whether an artifact location (a URI) is a local folder under artifact_root, links resolved."""
    root = Path(artifact_root).resolve()
    if not location.startswith(root.as_uri() + "/"):
        return False
    path = Path(unquote(urlparse(location).path)).resolve()
    return path != root and root in path.parents


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """Fail fast (seconds, before any training) when an HTTP tracking server does not answer."""
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            if response.status >= 400:
                raise TrackingError(f"tracking server {redacted(uri)} answered HTTP {response.status} on /health")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(f"tracking server {redacted(uri)} is unreachable ({redacted(str(reason))})") from None


class MlflowTracker:
    """Batched MLflow logging with its own wall-clock accounting (MLflow's share of a run)."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None = None, identity: str | None = None,
                 shared: bool = False, confined: bool = False) -> None:
        self.uri = tracking_uri
        self.shared = shared  # other results folders log here too: find and delete only this folder's runs
        self.artifact_root = artifact_root
        # A store nobody named on the command line (a results folder's own): its artifacts stay under
        # artifact_root, whatever locations the store itself names.
        self.confined = confined and artifact_root is not None
        self.identity = identity or tracking_uri  # what markers name: changes when the store is replaced
        self.seconds = 0.0
        self._client = None
        self._experiments: dict[str, str] = {}
        self._depth = 0  # only the outermost timed call adds to self.seconds
        self._parent_markers: dict[str, Path] = {}

    # -- plumbing -------------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            self._client = self._timed(self._connect)
        return self._client

    def _connect(self):
        quiet_mlflow()
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def _timed(self, fn, *args, **kwargs):
        started = time.perf_counter()
        self._depth += 1
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if exc.__class__.__module__.startswith(("mlflow", "sqlalchemy")):
                first = (str(exc).splitlines() or [type(exc).__name__])[0]
                if self.uri.startswith("sqlite:///") and any(
                    word in first for word in ("malformed", "not a database", "no such table", "no such column")
                ):
                    db = self.uri[len("sqlite:///"):]
                    first += f"; move the store aside (mv {db} {db}.old) and rerun: it is rebuilt from the JSON trial files"
                raise TrackingError(redacted(f"MLflow ({self.uri}): {first}")) from exc
            raise
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - started

    def experiment_id(self, name: str) -> str:
        if name not in self._experiments:
            self._experiments[name] = self._timed(self._ensure_experiment, name)
        return self._experiments[name]

    def _ensure_experiment(self, name: str) -> str:
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            location = None
            if self.artifact_root is not None and not self.uri.startswith(("http://", "https://")):
                location = (self.artifact_root / name).resolve().as_uri()
            self._refuse_foreign(name, location)
            experiment_id = self.client.create_experiment(name, artifact_location=location)
        else:
            experiment_id = experiment.experiment_id
            self._refuse_foreign(name, experiment.artifact_location)
        tags = {} if experiment is None else experiment.tags
        if tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
            # MLflow 3 opens untagged experiments on the GenAI overview; this opens the runs table.
            self.client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        if tags.get(ARMS_VIEW_TAG) != ARMS_VIEW_STATE:
            self.client.set_experiment_tag(experiment_id, ARMS_VIEW_TAG, ARMS_VIEW_STATE)
        return experiment_id

    def check_destination(self, name: str) -> None:
        """Raise TrackingError when experiment ``name`` exists and would send artifacts outside the
        results folder (a received store naming a server or another folder); reads only."""
        def check() -> None:
            experiment = self.client.get_experiment_by_name(name)
            if experiment is not None:
                self._refuse_foreign(name, experiment.artifact_location)

        if self.confined and missing_store(self.uri) is None:  # a missing store is made later, with this folder's locations
            self._timed(check)

    def _refuse_foreign(self, name: str, location: str | None) -> None:
        if not self.confined or location_inside(location or "", self.artifact_root):
            return
        raise TrackingError(
            f"MLflow experiment {name!r} in {redacted(self.uri)} keeps its artifacts at {redacted(location or '')!r}, "
            f"outside {self.artifact_root}: a results folder's own store never sends files elsewhere; "
            "pass --tracking-uri to log to a store you name, or --no-mlflow"
        )

    def _log_batch(self, run_id: str, metrics=(), params: Mapping[str, str] | None = None, tags=None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        metric_list = list(metrics)
        for start in range(0, len(metric_list), 1000):
            self.client.log_batch(run_id, metrics=[Metric(*m) for m in metric_list[start : start + 1000]])
        param_items = list((params or {}).items())
        for start in range(0, len(param_items), 100):
            self.client.log_batch(run_id, params=[Param(k, v) for k, v in param_items[start : start + 100]])
        tag_items = list((tags or {}).items())
        for start in range(0, len(tag_items), 100):
            self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tag_items[start : start + 100]])

    # -- suite (parent) runs --------------------------------------------------------------
    def start_parent(
        self, suite: StoredSuite, environment: Mapping[str, str], run_name: str,
        run_dir: Path | None = None, extra_tags: Mapping[str, str] | None = None,
        texts: Mapping[str, str] | None = None,
    ) -> str:
        """The suite's parent run; while it is open a marker under run_dir says so (see open_parents).
        ``extra_tags`` add to (or override) the standard tags, ``texts`` become files of the run."""
        experiment_id = self.experiment_id(suite.suite)

        def start() -> str:
            description = suite.description or ""
            if description and self.client.get_experiment(experiment_id).tags.get(NOTE_TAG) != description:
                self.client.set_experiment_tag(experiment_id, NOTE_TAG, description)
            tags = {
                "mlflow.runName": run_name,
                "harness.kind": "suite",
                "harness.pid": os.getpid(),
                "harness.host": socket.gethostname(),
                "harness.suite": suite.suite,
                "harness.profile": suite.profile,
                "harness.task": suite.task,
                **{f"harness.{k}": v for k, v in environment.items()},
                **convention_tags(environment, suite.source or ""),
                **(extra_tags or {}),
            }
            run = self.client.create_run(experiment_id, tags={k: str(v) for k, v in tags.items()})
            if run_dir is not None:
                marker = parent_marker_path(run_dir, run.info.run_id)
                self.write_marker(marker, run.info.run_id)
                self._parent_markers[run.info.run_id] = marker
            self._log_batch(
                run.info.run_id,
                params=flatten("", {"seeds": list(suite.seeds), "sweep": dict(suite.sweep), "params": dict(suite.params)}),
            )
            self.client.log_dict(run.info.run_id, as_stored(suite), "suite.json")
            self.client.log_dict(run.info.run_id, dict(environment), "environment.json")
            for name, text in (texts or {}).items():
                self.client.log_text(run.info.run_id, text, name)
            return run.info.run_id

        return self._timed(start)

    def close_parents(self, markers: Iterable[Path]) -> int:
        """Mark KILLED the parent runs these markers name that are still RUNNING (their invocation
        died; the caller is the suite's only writer), then drop the markers."""

        def close() -> int:
            closed = 0
            for path in markers:
                marker = read_json(path)
                if marker.get("store") == redacted(self.identity):  # else the store it was in is gone
                    try:
                        run = self.client.get_run(marker["run_id"])
                    except Exception as exc:  # noqa: BLE001
                        if getattr(exc, "error_code", "") != "RESOURCE_DOES_NOT_EXIST":
                            raise
                        run = None
                    if run is not None and run.info.status == "RUNNING":
                        self.client.set_terminated(run.info.run_id, "KILLED")
                        closed += 1
                path.unlink(missing_ok=True)
            return closed

        return self._timed(close)

    def close_stale_parents(self, suite: str, profile: str, results_id: str | None, kind: str = "suite") -> int:
        """Mark KILLED the ``kind`` runs (suite runs, reproductions) of this host whose process died
        (SIGKILL, power loss)."""
        experiment_id = self.experiment_id(suite)
        scope = "" if results_id is None else self._scope(results_id)

        def close() -> int:
            stale = 0
            for run in self.client.search_runs(
                [experiment_id],
                filter_string=f"tags.`harness.kind` = '{kind}' and tags.`harness.profile` = '{profile}' "
                f"and attributes.status = 'RUNNING' and tags.`harness.host` = '{socket.gethostname()}'" + scope,
            ):
                if not _alive(int(run.data.tags.get("harness.pid", "0"))):
                    self.client.set_terminated(run.info.run_id, "KILLED")
                    stale += 1
            return stale

        return self._timed(close)

    def suite_runs(self, suite: str, profile: str) -> list[Any]:
        """The parent runs of ``suite`` at ``profile``, oldest first; none when the experiment does not
        exist (it is not created by looking)."""

        def search() -> list[Any]:
            experiment = self.client.get_experiment_by_name(suite)
            if experiment is None:
                return []
            runs, token = [], None
            while True:
                page = self.client.search_runs(
                    [experiment.experiment_id], order_by=["attributes.start_time ASC"], max_results=1000,
                    filter_string=f"tags.`harness.kind` = 'suite' and tags.`harness.profile` = '{profile}'",
                    page_token=token,
                )
                runs.extend(page)
                token = page.token
                if not token:
                    return runs

        return self._timed(search)

    def finish_parent(
        self, run_id: str, status: str, metrics: Mapping[str, float | Sequence[float]], artifacts: Iterable[Path] = (),
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Log what the run concluded and close it; a metric given as a list is a series, one step per value."""
        def finish() -> None:
            now = int(time.time() * 1000)
            batch = [(mlflow_key(k), float(v), now, step) for k, values in metrics.items()
                     for step, v in enumerate(values if isinstance(values, Sequence) else [values])]
            self._log_batch(run_id, metrics=batch, tags=tags)
            for path in artifacts:
                folder = "plots" if path.parent.name == "plots" else None  # forest plots go first, at the root
                self.client.log_artifact(run_id, str(path), folder)
                fault("report")
            self.client.set_terminated(run_id, status)

        self._timed(finish)
        marker = self._parent_markers.pop(run_id, None)
        if marker is not None:
            marker.unlink(missing_ok=True)

    # -- trial (nested) runs --------------------------------------------------------------
    def log_trial(
        self, parent_id: str, record: TrialRecord, trial_file: Path, marker: Path, *, view: TrialView,
        work_dir: Path | None = None, extra_tags: Mapping[str, str] | None = None,
    ) -> str:
        """One nested run holding the trial's params, curves, final metrics, workload, tags and files,
        spanning the trial's own start and end; ``view`` says which metrics and what workload it shows,
        ``extra_tags`` add to (or override) the standard ones."""
        experiment_id = self.experiment_id(record.suite)

        def log() -> str:
            env = record.environment
            tags = {
                **convention_tags(env, view.source),
                "mlflow.parentRunId": parent_id,
                "mlflow.runName": f"{record.arm_label} s{record.seed}"
                + (f" {record.point_label}" if record.point_label else ""),
                "harness.kind": "trial",
                TRIAL_ID_TAG: record.trial_id,
                "harness.config_hash": record.trial_id,
                "harness.suite": record.suite,
                "harness.profile": record.profile,
                "harness.task": record.task,
                "harness.task_version": record.task_version,
                "harness.arm": record.arm,
                "harness.arm_label": record.arm_label,
                "harness.seed": record.seed,
                "harness.point": record.point_label,
                "harness.status": record.status,
                **{f"harness.{k}": v for k, v in env.items() if k != "argv"},
                **(extra_tags or {}),
            }
            if record.error:
                tags["harness.error"] = record.error[:8000]
            start_ms, end_ms = trial_span_ms(record)
            run = self.client.create_run(experiment_id, start_time=start_ms, tags={k: str(v) for k, v in tags.items()})
            fault("trial-run-created")
            metrics = [
                (mlflow_key(key), float(value), start_ms, int(step))
                for key, points in record.curves.items()
                if any(value for _, value in points)  # an all-zero (or all-NaN) curve draws an empty chart
                for step, value in points
                if value is not None  # a NaN point, stored as null
            ]
            metrics += [(mlflow_key(k), float(v), end_ms, 0) for k, v in view.shown_metrics(record).items()]
            metrics.append(("wall_seconds", record.wall_seconds, end_ms, 0))
            self._log_batch(run.info.run_id, metrics=metrics, params=flatten("", record.params))
            self.client.log_inputs(run.info.run_id, datasets=[view.workload(record).as_input()])
            self.client.log_artifact(run.info.run_id, str(trial_file))
            if work_dir is not None and work_dir.is_dir() and any(work_dir.iterdir()):
                self.client.log_artifacts(run.info.run_id, str(work_dir), "files")
            fault("trial-run-logged")
            self.client.set_terminated(run.info.run_id, "FINISHED" if record.finished else "FAILED", end_time=end_ms)
            fault("trial-mirrored")
            return run.info.run_id

        run_id = self._timed(log)
        self.write_marker(marker, run_id)
        return run_id

    def write_marker(self, marker: Path, run_id: str) -> None:
        write_json_atomic(marker, {"tracking_uri": redacted(self.uri), "store": redacted(self.identity), "run_id": run_id})

    def delete_runs(self, run_ids: Iterable[str]) -> None:
        def delete() -> None:
            for run_id in run_ids:
                self.client.delete_run(run_id)

        self._timed(delete)

    def _scope(self, results_id: str) -> str:
        """The search filter that keeps a shared store's runs of other results folders out of reach.

        A folder's own ``mlflow.db`` holds only its runs, including those logged before runs were
        tagged with their folder, so it is searched whole."""
        return f" and tags.`{RESULTS_ID_TAG}` = '{results_id}'" if self.shared else ""

    def trial_runs(self, suite: str, profile: str, results_id: str) -> dict[str, list[TrialRun]]:
        """Trial id -> every MLflow run of that trial that this results folder logged in this suite
        and profile (oldest first)."""
        experiment_id = self.experiment_id(suite)

        def search() -> dict[str, list[TrialRun]]:
            found: dict[str, list[TrialRun]] = {}
            token = None
            while True:
                page = self.client.search_runs(
                    [experiment_id],
                    filter_string=f"tags.`harness.kind` = 'trial' and tags.`harness.profile` = '{profile}'"
                    + self._scope(results_id),
                    max_results=1000,
                    order_by=["attributes.start_time ASC"],
                    page_token=token,
                )
                for run in page:
                    found.setdefault(run.data.tags.get(TRIAL_ID_TAG, ""), []).append(
                        TrialRun(run.info.run_id, run.info.status, frozenset(run.data.metrics))
                    )
                token = page.token
                if not token:
                    return found

        return self._timed(search)


@dataclass(frozen=True)
class TrialRun:
    run_id: str
    status: str
    metrics: frozenset[str]

    def mirrors(self, record: TrialRecord, view: TrialView) -> bool:
        """Complete: closed with the record's status and carrying every metric ``view`` shows of it."""
        status = "FINISHED" if record.finished else "FAILED"
        wanted = {mlflow_key(k) for k in view.shown_metrics(record)}
        return self.status == status and "wall_seconds" in self.metrics and wanted <= self.metrics


def convention_tags(environment: Mapping[str, str], source: str) -> dict[str, str]:
    """MLflow's own tags for the Source and User columns: the commit that ran, the suite file, who ran it."""
    tags = {"mlflow.source.type": "LOCAL", "mlflow.user": _user()}
    if source:
        tags["mlflow.source.name"] = source
    commit = TrialEnvironment.of(environment).git_commit
    if _COMMIT.fullmatch(commit):
        tags["mlflow.source.git.commit"] = commit
    return tags


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        return "unknown"


def trial_span_ms(record: TrialRecord) -> tuple[int, int]:
    """The trial's own start and end in epoch milliseconds, from its record, so MLflow's Duration is the
    trial's; a record without a start (written before it was kept) ends now."""
    try:
        started = datetime.fromisoformat(record.started_at)
    except ValueError:
        end = int(time.time() * 1000)
        return end - round(record.wall_seconds * 1000), end
    if started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    start = round(started.timestamp() * 1000)
    return start, start + round(record.wall_seconds * 1000)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def results_id(run_dir: Path) -> str:
    """The id of this results folder, tagged on every run it logs, so that on a shared tracking server
    a folder finds, replaces and deletes only its own runs.

    A random value made on first use, bound to the folder's real path: a copy of the folder (or one
    whose stored value was edited to another folder's) gets an id of its own, and never touches the
    original's runs."""
    path = run_dir / MARKER_DIR / RESULTS_ID_FILE
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError:
        value = ""
    if not re.fullmatch(r"[0-9a-f]{32}", value):
        value = uuid.uuid4().hex
        write_atomic(path, lambda handle: handle.write(value.encode()))
    return hashlib.sha256(f"{value}\n{os.path.realpath(run_dir)}".encode()).hexdigest()[:32]


def marker_path(run_dir: Path, trial_id: str) -> Path:
    return run_dir / MARKER_DIR / f"{trial_id}.json"


def is_mirrored(run_dir: Path, trial_id: str, tracker: MlflowTracker) -> bool:
    """A marker names this very store (not only its URI): a deleted or replaced store is mirrored anew.

    On a shared store no marker counts: another folder (a copy made before ids were bound to the path,
    or a user) can delete this folder's runs there, so the mirror checks the runs themselves and logs
    again what is gone."""
    if tracker.shared:
        return False
    path = marker_path(run_dir, trial_id)
    if not path.exists():
        return False
    try:
        marker = read_json(path)
        return marker.get("tracking_uri") == redacted(tracker.uri) and marker.get("store") == redacted(tracker.identity)
    except (OSError, ValueError, AttributeError):
        return False


def parent_marker_path(run_dir: Path, run_id: str) -> Path:
    return run_dir / MARKER_DIR / PARENTS_DIR / f"{run_id}.json"


def open_parents(run_dir: Path, tracker: MlflowTracker) -> list[Path]:
    """Markers of parent runs in this tracker's store that were started and never closed."""
    found = []
    for path in sorted((run_dir / MARKER_DIR / PARENTS_DIR).glob("*.json")):
        try:
            marker = read_json(path)
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if isinstance(marker, dict) and marker.get("tracking_uri") == redacted(tracker.uri):
            found.append(path)
    return found


def quiet_mlflow() -> None:
    """Keep MLflow's store creation and migrations out of the terminal, where a refusal must be one line.

    MLflow reads ``MLFLOW_LOGGING_LEVEL`` once, when it is first imported; in a process that imported it
    earlier (a notebook, a test worker) only the logger's own level still counts. A level the user set is kept.
    """
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"].upper())
