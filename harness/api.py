"""The Python API: what the CLI does, callable in-process (a notebook, a test, another tool).

``run`` owns a run's whole lifecycle: load and validate the suites, take the writer locks, open the
results store and the MLflow tracker, start the executor, run each suite through the run loop with its
MLflow mirror listening, build its report, have the mirror close its parent run, write the summary, and
release everything, also on Ctrl-C. ``report``,
``save_baselines``, ``gate``, ``plan_reproduction``/``reproduce`` and ``compare`` do the same for
the other commands. The click commands only parse options, call these and print.

Every usage error (a bad suite file, an unusable results folder, an unreachable tracking server, a
baseline of another run) is a ``UsageError`` with a one-line message; the CLI exits 2 on it.
"""
from __future__ import annotations

import errno
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, TypeVar

import torch

from harness.core import numeric
from harness.analysis.claim_status import NO_ANSWER
from harness.analysis.compare.comparison_plot import write_comparison_plot
from harness.analysis.compare.comparison_text import run_label
from harness.analysis.compare.run_comparison import CompareError, Comparison, load_pair
from harness.analysis.decide.run_decisions import RunAnalysis, analyse
from harness.analysis.pilot_warnings import PilotError
from harness.analysis.pilot_warnings import pilot_claims as read_pilot
from harness.analysis.decide.seed_planning import SeedPlan, family_sizes, plan_suite
from harness.analysis.present.claim_history import ClaimPoint, render_history, write_history_plot
from harness.analysis.present.run_costs import DriverSeconds, render_suite_phases, save_driver_seconds
from harness.analysis.present.run_report import RunReport, build_report, stored_report_text
from harness.analysis.present.run_summary import SUMMARY_MARKDOWN_FILE, SuiteSummary, render_summary
from harness.analysis.present import EXPORT_FORMATS
from harness.analysis.present.trial_table import export_frame, write_frame
from harness.analysis.present.verdict_tables import render_report
from harness.analysis.run_results import ResultsError, load_results
from harness.analysis.stats.sequential_design import Schedule
from harness.core.devices import resolve_device
from harness.evidence.ledger import LedgerError
from harness.evidence.registration import Study, studies
from harness.evidence.seal import SealError
from harness.evidence.seal import seal as seal_run
from harness.execution.allocation import ALLOCATIONS
from harness.execution.executor import Executor, capabilities_of
from harness.execution.registry import ExecutorError, ExecutorKind, executor_kind, executor_options, start_executor
from harness.execution.runner import SuiteOutcome, run_suite
from harness.execution.trials import planned_trials, suite_warnings
from harness.execution.tuning import TUNE_TAGS, TuneOutcome, tune_suite
from harness.suite.tuning_plan import tuning_suite
from harness.gating.baseline import DEFAULT_BASELINES_DIR
from harness.gating.baseline import save_baselines as save_baseline_files
from harness.gating.gate import GateResult
from harness.gating.gate import gate as gate_run
from harness.gating.values import GateError
from harness.listeners import FAILED, FINISHED, KILLED, RunEnd, RunListener, RunStart
from harness.core.locks import LockBusy, lock_writer
from harness.reproduction.reproduce import Plan, ReproductionOutcome, run_reproduction
from harness.reproduction.reproduce import plan_reproduction as plan
from harness.reproduction.sources import ReproduceError
from harness.reproduction.trial_values import SuiteValues, compare_trial_values
from harness.store import SUITE_FILE, RunFolder, iter_runs, write_json_atomic, write_text_atomic
from harness.tracking.run_identity import run_identity
from harness.suite.design import DesignChanged, check_design
from harness.suite.loader import load_suites as load_suite_files
from harness.suite.resolved_suite import DEFAULT_PROFILE, Suite, SuiteError
from harness.suite.references import MAX_TRIALS
from harness.suite.yaml_safety import MAX_SUITE_NODES
from harness.core.terminal import Console
from harness.tracking.history import claim_history, stored_claim_history
from harness.tracking.mirror import MlflowMirror
from harness.tracking.mlflow_tracker import (
    MlflowTracker,
    TrackingError,
    check_reachable,
    default_tracking_uri,
    missing_store,
)
from harness.tracking.sqlite_store import confined_tracker, foreign_store_note, prepare_named_store, unsafe_path

if TYPE_CHECKING:
    import pandas


class UsageError(Exception):
    """Bad input or an unusable environment, said in one line; nothing was run or written."""


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass(frozen=True)
class RunOptions:
    """How to run a suite file; the defaults are the CLI's."""

    profile: str = DEFAULT_PROFILE
    seeds: list[int] | None = None  # override the suite's seeds
    arms: list[str] | None = None  # run only these arms
    results: Path = Path("results")
    tracking_uri: str | None = None  # default: the embedded store RESULTS/mlflow.db
    mlflow: bool = True
    device: str = "auto"
    resume: bool = True  # skip trials whose finished result is stored
    executor: str = "auto"  # a registered executor (harness.execution.registry): auto, serial, parallel, ray
    # its own options by field name of its Options, e.g. {"workers": 2} (auto, parallel) or {"ray_address": ...}
    executor_options: Mapping[str, Any] = field(default_factory=dict)
    threads: int | None = None  # torch intra-op threads (float results can depend on it)
    numeric: str = numeric.DETERMINISTIC  # numeric mode (harness.core.numeric): the CPU kernels' ISA level pinned, or "fast"
    trial_timeout: float | None = None
    max_trials: int = MAX_TRIALS
    max_nodes: int = MAX_SUITE_NODES
    allocation: str = "open"  # a sequential suite's later looks: "open" runs the arms an open question reads, "all" every arm
    redesign: bool = False  # set aside a folder's trials of another (or an unreadable) design instead of refusing
    exploratory: bool = False  # run the suite files' own seeds even where a design is registered


@dataclass
class SuiteResult:
    """One suite of a run: what ran, and its analysis (``report`` is None when nothing new ran and the
    stored report stands)."""

    outcome: SuiteOutcome
    analysis: RunAnalysis
    report: RunReport | None

    def text(self, full: bool = False) -> str:
        """The verdict tables: key metrics only, or every row."""
        if self.report is not None:
            return self.report.full_text if full else self.report.text
        return render_report(self.analysis, full=full)


@dataclass
class RunResult:
    suites: list[SuiteResult] = field(default_factory=list)
    exit_code: int = 0  # 0 ok, 1 a trial failed, 130 interrupted
    seconds: float = 0.0
    results: Path = Path("results")
    tracker: MlflowTracker | None = None
    summary: str = ""  # the end-of-run Markdown summary (also RESULTS/summary.md)


def load_suites(suite_file: Path, options: RunOptions = RunOptions()) -> list[Suite]:
    """The suites of a file (its includes resolved, the profile applied), fully validated."""
    try:
        return load_suite_files(Path(suite_file), profile=options.profile, seeds=options.seeds, arms=options.arms,
                                max_trials=options.max_trials, max_nodes=options.max_nodes)
    except SuiteError as exc:
        raise UsageError(str(exc)) from None


def _writable_folder(results: Path) -> None:
    if results.exists() and not results.is_dir():
        raise UsageError(f"--results {results} is a file, not a folder")
    try:
        results.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=results):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write results to {results}: {exc.strerror or exc}") from None


def _executor_kind(options: RunOptions) -> tuple[type[ExecutorKind], object]:
    """The registered executor the options name, with its own options from theirs (unset ones left out)."""
    given = {name: value for name, value in options.executor_options.items() if value is not None}
    try:
        kind = executor_kind(options.executor)
        return kind, executor_options(kind, given)
    except ExecutorError as exc:
        raise UsageError(str(exc)) from None


def _executor(name: str, kind: type[ExecutorKind], kind_options: object, slots: int) -> Executor:
    """The executor registered as ``name``, started (a Ray cluster reached or launched) before any trial trains."""
    try:
        return start_executor(name, kind, kind_options, slots)
    except ExecutorError as exc:
        raise UsageError(str(exc)) from None


def suite_executor(suite: Suite, executor: Executor, console: Console) -> Executor:
    """The session's executor. A suite that claims a speed metric keeps its trials side by side but takes
    every timing alone (the run loop's quiet room): a claim on timings taken beside another trial's
    training would read the machine's load. An executor of one trial at a time has nothing to say, and one
    whose trials cannot take a timing alone (Ray's workers, on machines of their own) is left as it is."""
    declared = capabilities_of(executor)
    if not (declared.side_by_side and declared.quiet_timing) or not suite.speed_claims:
        return executor
    console.line(f"timing: {suite.name} claims a speed metric ({', '.join(sorted(set(suite.speed_claims)))}): "
                 "its trials run side by side and each timing is taken alone, the others waiting at their next step")
    return executor


def _tracker(options: RunOptions, locks: ExitStack, warn: Callable[[str], None]) -> MlflowTracker | None:
    """The MLflow mirror: the embedded store in the results folder (locked while we write it), a
    tracking server, or none."""
    if not options.mlflow:
        return None
    if options.tracking_uri:
        note = foreign_store_note(options.tracking_uri)
        if note:
            warn(f"warning: {note}")
        try:
            prepare_named_store(options.tracking_uri)
        except TrackingError as exc:
            raise UsageError(str(exc)) from None
        return MlflowTracker(options.tracking_uri, artifact_root=options.results / "mlartifacts", shared=True)
    try:
        tracker, store = confined_tracker(options.results, say=warn)
    except TrackingError as exc:
        raise UsageError(str(exc)) from None
    locks.callback(store.lock.release)  # held shared while this run writes the store
    for note in store.notes:
        warn(f"warning: {note}")
    return tracker


def _answerless_claims(suite: Suite, analysis: RunAnalysis) -> list[str]:
    """One line per claim of the default profile between arms that gave bit-identical values on every seed
    (NO ANSWER): the run that was to decide the question asked nothing, so it exits 1. A smoke or ci
    profile only checks that the suite runs, and keeps its exit code."""
    if suite.profile != DEFAULT_PROFILE:
        return []
    return [f"error: {suite.name} ({suite.profile}): claim {c.contrast} {c.key}{f' @ {c.point}' if c.point else ''}: "
            "no answer (arms identical): treatment and control gave bit-identical values on every seed (is the "
            "mechanism switched on?)" for c in analysis.claims if c.status == NO_ANSWER]


def _analysed(suite_run: SuiteOutcome, slots: int) -> tuple[SuiteResult, RunEnd]:
    """A finished suite analysed (its report says where the time went, ``slots`` trials at a time), and how
    it ended, for its followers (the MLflow mirror closes its parent run with the report's claims)."""
    status = FAILED if suite_run.failed else FINISHED
    if suite_run.ran == 0 and stored_report_text(suite_run.run_dir) is not None:
        # nothing new ran: the stored verdicts stand, no need to redraw plots; the parent run still
        # carries the claims (a rerun into a new store would otherwise chart nothing)
        analysis = analyse(load_results(suite_run.run_dir))
        return SuiteResult(suite_run, analysis, None), RunEnd(status, analysis)
    save_driver_seconds(suite_run.run_dir, DriverSeconds(suite_run.wall_seconds, suite_run.analysis_seconds,
                                                         suite_run.listener_seconds, slots))
    report = build_report(suite_run.run_dir)
    end = RunEnd(status, report.analysis, suite_run.wall_seconds, len(suite_run.failed), tuple(report.artifact_paths))
    return SuiteResult(suite_run, report.analysis, report), end


@dataclass
class _Session:
    """What a run of suites writes with: the results folder (its suites locked), device, MLflow mirror, executor."""

    results: Path
    device: torch.device
    tracker: MlflowTracker | None
    executor: Executor
    console: Console

    def mirrors(self, tags: dict[str, str] | None = None) -> list[MlflowMirror]:
        """A suite's MLflow mirror (``tags`` on every run it logs): one, or none without MLflow."""
        return [MlflowMirror(self.tracker, tags)] if self.tracker else []


Ran = TypeVar("Ran")


def _each_suite(session: _Session, suites: list[Suite], run_one: Callable[[Suite, Sequence[RunListener]], Ran],
                outcome_of: Callable[[Ran], SuiteOutcome], conclude: Callable[[Ran], tuple[RunEnd, bool]],
                on_suite: Callable[[Ran], None] | None, tags: dict[str, str] | None = None) -> int:
    """The per-suite loop of ``run`` and ``tune``: each suite run (``run_one``) with its MLflow mirror
    following, then concluded (``conclude``: how it ended, and whether it failed), its followers told how it
    ended (KILLED when interrupted, the suites after it not run), then ``on_suite``. The exit code: 0, 1 a
    suite failed, 130 interrupted."""
    exit_code = 0
    try:
        for suite in suites:
            study = {"harness.study": "exploratory" if suite.registration is None else "confirmatory",
                     **({"harness.registration": suite.registration} if suite.registration else {})}
            followers = session.mirrors({**(tags or {}), **study})
            ran = run_one(suite, followers)
            suite_run = outcome_of(ran)
            suite_run.parent_run_id = next((m.run_id for m in followers if m.run_id), None)
            if suite_run.interrupted:
                session.console.line(f"interrupted: {suite_run.ran} trial(s) of {suite.name!r} finished and are stored")
                _tell(followers, RunEnd(KILLED))
                return 130
            end, failed = conclude(ran)
            _tell(followers, end)
            exit_code = 1 if failed else exit_code
            if on_suite:
                on_suite(ran)
    except KeyboardInterrupt:
        return 130
    return exit_code


def _studies(suites: list[Suite], suite_file: Path, options: RunOptions) -> list[Study]:
    """How each suite's run counts (registered or exploratory); a registered design that cannot run
    confirmatory here is a UsageError before anything runs."""
    reason = ("--exploratory" if options.exploratory else "--seeds" if options.seeds else
              "--arms" if options.arms else None)
    try:
        return studies(suites, suite_file, reason)
    except LedgerError as exc:
        raise UsageError(str(exc)) from None


def _seal_registered(study: Study, suite_run: SuiteOutcome, warn: Callable[[str], None]) -> None:
    """A complete confirmatory run sealed into its repository's evidence, whatever its result; an
    incomplete one says what it still needs (a rerun completes it, or ``harness abandon`` records why not)."""
    if not study.to_seal or suite_run.interrupted:
        return
    name = f"{study.suite.name} ({study.suite.profile})"
    if suite_run.failed:
        warn(f"{name}: not sealed: {len(suite_run.failed)} trial(s) failed; rerun to complete the registered run, "
             f"or record it with harness abandon {study.registration.short}")
        return
    evidence = study.registration_ledger.parent
    try:
        sealed = seal_run(suite_run.run_dir.parent.parent, study.suite.name, study.suite.profile, evidence)
    except SealError as exc:
        warn(f"{name}: not sealed: {exc}")
        return
    warn(f"{name}: sealed {sealed.path} (registered design {study.registration.short}); commit it with the ledger")
    if sealed.skewness:
        warn(f"{name}: {sealed.skewness}")


def _tell(followers: Sequence[RunListener], end: RunEnd) -> None:
    for follower in followers:
        follower.finished(end)


@contextmanager
def _session(suites: list[Suite], options: RunOptions, console: Console | None, warn: Callable[[str], None],
             on_started: Callable[[torch.device], None] | None = None,
             written: list[Suite] | None = None) -> Iterator[_Session]:
    """Everything a run of ``suites`` needs, checked before any trial trains and released after, also on
    Ctrl-C; MLflow and disk-full errors inside become one-line ``UsageError``s. ``written``: the suites whose
    folders the run writes, when not ``suites`` themselves (a tuning run's), for the design check."""
    try:
        numeric.apply(options.numeric)
    except (ValueError, numeric.NumericModeError) as exc:
        raise UsageError(str(exc)) from None
    try:
        device = resolve_device(options.device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    kind, kind_options = _executor_kind(options)
    workers = kind.slots(kind_options, device, options.threads or 1)  # trials side by side in processes here
    threads = options.threads or (1 if workers else None)  # side by side: one thread each unless told
    if threads:  # before anything reads the count: the trials, their records and the device name
        torch.set_num_threads(threads)
    results = Path(options.results)
    try:
        if options.mlflow and not options.tracking_uri and unsafe_path(results):
            raise UsageError(unsafe_path(results))
        if options.mlflow and options.tracking_uri:
            check_reachable(options.tracking_uri)
    except TrackingError as exc:
        raise UsageError(str(exc)) from None
    _writable_folder(results)
    with ExitStack() as locks:
        try:  # one writer per results folder and suite, until the run ends (or its process dies)
            for name in sorted({s.name for s in suites}):
                locks.callback(lock_writer(results, name).release)
        except LockBusy as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot write results to {results}: {exc.strerror or exc}") from None
        tracker = _tracker(options, locks, warn)
        for suite in written if written is not None else suites:  # before anything runs: each folder's design is this run's
            folder = RunFolder(results, suite.name, suite.profile)
            try:
                check_design(folder, suite.locked_design())
            except DesignChanged as exc:
                if not options.redesign:
                    raise UsageError(str(exc)) from None
                moved, aside = folder.set_aside_all()
                warn(f"warning: --redesign: {moved} stored trial(s) of another or an unreadable design moved to "
                     f"{aside}; {suite.name}/{suite.profile} runs its design afresh")
        executor = _executor(options.executor, kind, kind_options, workers)
        if on_started:
            on_started(device)
        try:
            yield _Session(results, device, tracker, executor, console or Console())
        except TrackingError as exc:
            raise UsageError(f"{exc} (finished trials are stored under {results}; rerun to mirror them)") from None
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):  # a folder made read-only mid-run
                raise UsageError(f"cannot write {exc.filename or results} ({exc.strerror}); the trials stored "
                                 "before it are kept: make it writable and rerun") from None
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise UsageError(f"no space left writing {exc.filename or results} ({exc.strerror}); the trials stored "
                             "before it are kept: free some space and rerun") from None
        finally:
            executor.close()


def run(
    suite_file: Path,
    options: RunOptions = RunOptions(),
    *,
    console: Console | None = None,
    on_suite: Callable[[SuiteResult], None] | None = None,
    on_started: Callable[[torch.device], None] | None = None,
    warn: Callable[[str], None] = _to_stderr,
) -> RunResult:
    """Run every trial of a suite file, analyse each suite, mirror everything to MLflow.

    ``on_started(device)`` is called once the executor runs (after ``ray.init``, which installs signal
    handlers of its own); ``on_suite`` with each suite's result as it is done. Ctrl-C stops the run
    with every finished trial stored (``exit_code`` 130)."""
    started = time.perf_counter()
    if options.allocation not in ALLOCATIONS:
        raise UsageError(f"unknown allocation {options.allocation!r}; expected one of: {', '.join(ALLOCATIONS)}")
    planned = _studies(load_suites(suite_file, options), suite_file, options)
    suites = [study.suite for study in planned]
    for study in planned:
        for warning in suite_warnings(study.suite):
            warn(warning)
    outcome = RunResult(results=Path(options.results))
    summaries: list[SuiteSummary] = []
    with _session(suites, options, console, warn, on_started) as session:
        outcome.tracker = session.tracker
        for study in planned:  # how each counts, once nothing stands in the run's way
            session.console.line(study.note)
        for suite in suites:
            session.console.expect(planned_trials(suite))
        def run_one(suite: Suite, followers: Sequence[RunListener]) -> SuiteOutcome:
            with run_identity(RunFolder(session.results, suite.name, suite.profile).path):  # each trial's run_id
                return run_suite(suite, session.results, session.device, session.console, options.resume,
                                 suite_executor(suite, session.executor, session.console), options.trial_timeout,
                                 listeners=followers, allocation=options.allocation)

        def conclude(suite_run: SuiteOutcome) -> tuple[RunEnd, bool]:
            session.console.unplanned(planned_trials(suite_run.suite) - len(suite_run.records))
            result, end = _analysed(suite_run, getattr(session.executor, "workers", None) or 1)
            _seal_registered(next(s for s in planned if s.suite.name == suite_run.suite.name), suite_run, warn)
            outcome.suites.append(result)
            summaries.append(SuiteSummary(result.analysis, suite_run.wall_seconds))
            answerless = _answerless_claims(suite_run.suite, result.analysis)
            for line in answerless:
                warn(line)
            return end, bool(suite_run.failed or answerless)

        outcome.exit_code = _each_suite(session, suites, run_one, lambda ran: ran, conclude,
                                        on_suite and (lambda _: on_suite(outcome.suites[-1])))
    outcome.seconds = time.perf_counter() - started
    results = outcome.results
    if summaries:
        outcome.summary = render_summary(summaries)
        try:
            write_text_atomic(results / SUMMARY_MARKDOWN_FILE, outcome.summary)
        except OSError as exc:
            warn(f"warning: cannot write {results / SUMMARY_MARKDOWN_FILE} ({exc.strerror or exc})")
    return outcome


@dataclass
class TuneResult:
    suites: list[TuneOutcome] = field(default_factory=list)
    exit_code: int = 0  # 0 ok, 1 a trial failed or an arm has no grid point that finished, 130 interrupted
    results: Path = Path("results")
    tracker: MlflowTracker | None = None


def tune(
    suite_file: Path,
    options: RunOptions = RunOptions(),
    *,
    console: Console | None = None,
    on_suite: Callable[[TuneOutcome], None] | None = None,
    on_started: Callable[[torch.device], None] | None = None,
    warn: Callable[[str], None] = _to_stderr,
) -> TuneResult:
    """Tune every suite of a file that has a ``tune:`` block and write its lock beside its suite file.

    The suites load without their present locks (tuning starts from the hand-set recipe); the profile
    sets everything but the seeds, which are the tune block's."""
    try:
        suites = [s for s in load_suite_files(Path(suite_file), profile=options.profile, max_trials=options.max_trials,
                                              max_nodes=options.max_nodes, apply_locks=False) if s.tune is not None]
    except SuiteError as exc:
        raise UsageError(str(exc)) from None
    if not suites:
        raise UsageError(f"{suite_file}: no suite there has a tune: block (seeds, metric, space) to tune")
    outcome = TuneResult(results=Path(options.results))
    tunings = [tuning_suite(suite, suite.tune) for suite in suites]
    with _session(suites, options, console, warn, on_started, written=tunings) as session:
        outcome.tracker = session.tracker
        for suite in suites:  # the progress bar's total: every tuned arm x grid point x tuning seed
            session.console.expect(planned_trials(tuning_suite(suite, suite.tune)))

        def run_one(suite: Suite, followers: Sequence[RunListener]) -> TuneOutcome:
            return tune_suite(suite, session.results, session.device, session.console, options.resume,
                              session.executor, options.trial_timeout, listeners=followers)

        def conclude(tuned: TuneOutcome) -> tuple[RunEnd, bool]:
            outcome.suites.append(tuned)
            artifacts = tuple(p for p in (tuned.lock, tuned.plot) if p is not None)
            end = RunEnd(FAILED if tuned.run.failed else FINISHED, wall_seconds=tuned.run.wall_seconds,
                         artifacts=artifacts)
            return end, bool(tuned.run.failed) or tuned.lock is None

        outcome.exit_code = _each_suite(session, suites, run_one, lambda tuned: tuned.run, conclude, on_suite,
                                        TUNE_TAGS)
    return outcome


def run_folders(results: Path) -> list[Path]:
    """The ``<suite>/<profile>`` folders under a results root, or the one folder given."""
    results = Path(results)
    if not results.exists():
        raise UsageError(f"{results} does not exist")
    runs = iter_runs(results)
    if not runs:
        raise UsageError(f"no stored results under {results} (expected <suite>/<profile>/suite.json)")
    return runs


def report(results: Path) -> list[RunReport]:
    """Rebuild every run's verdict tables, summary JSON and plots from its stored trials."""
    try:
        return [build_report(run_dir) for run_dir in run_folders(results)]
    except ResultsError as exc:
        raise UsageError(str(exc)) from None


def mirror_reports(reports: list[RunReport], results: Path, tracking_uri: str | None = None,
                   warn: Callable[[str], None] = _to_stderr) -> list[str]:
    """Fill MLflow (the embedded store of ``results``, or ``tracking_uri``) from stored runs, rerunning
    nothing: each stored trial MLflow lacks is logged, under a parent run that carries the run's claims
    and report. A line per run says what it did."""
    lines = []
    with ExitStack() as locks:
        try:
            for name in sorted({built.suite for built in reports}):
                locks.callback(lock_writer(Path(results), name).release)
        except LockBusy as exc:
            raise UsageError(str(exc)) from None
        tracker = _tracker(RunOptions(results=Path(results), tracking_uri=tracking_uri), locks, warn)
        assert tracker is not None  # options.mlflow is on
        for built in reports:
            results_of = built.analysis.results
            done = sorted(results_of.finished, key=lambda r: r.started_at)
            mirror = MlflowMirror(tracker)
            folder = RunFolder(built.run_dir.parent.parent, built.suite, built.profile)
            mirror.started(RunStart(folder, results_of.stored, done[-1].environment if done else {}))
            try:
                mirror.look(results_of.stored, done, 0)
                mirror.finished(RunEnd(FAILED if results_of.failed else FINISHED, built.analysis,
                                       artifacts=tuple(built.artifact_paths)))
            except TrackingError as exc:
                raise UsageError(str(exc)) from None
            lines.append(f"{built.suite}/{built.profile}: " + (
                f"{len(done)} stored trial(s) in MLflow under a new parent run with the run's claims"
                if mirror.run_id else "every stored trial already in MLflow; nothing logged"))
    return lines


def phase_table(reports: list[RunReport]) -> str:
    """Where each suite's time went, one row per suite (its trials' phases, its run's driver seconds and
    its report's building)."""
    return render_suite_phases([(built.suite, built.phases) for built in reports if built.phases is not None])


def summary(reports: list[RunReport]) -> str:
    """The Markdown summary of rebuilt reports: validity and primary claims per suite."""
    return render_summary([SuiteSummary(r.analysis) for r in reports])


def plan_seeds(suite_file: Path, options: RunOptions = RunOptions(), pilot: Path | None = None,
               warn: Callable[[str], None] = _to_stderr) -> list[SeedPlan]:
    """Seeds each primary claim needs: fixed for 80% power, and under the suite's sequential design
    (or, for a fixed suite, a sequential one up to four times its seeds), at a pilot's effects or assumed ones."""
    plans = []
    for suite in load_suites(suite_file, options):
        design = Schedule.of(suite.sequential, len(suite.seeds)) if suite.sequential else Schedule(
            max(len(suite.seeds), 2), max(4 * len(suite.seeds), 3))
        metrics = {m.name: m for m in suite.task.metrics}
        claims = [c.model_dump(exclude_none=True) for c in suite.claims]
        try:  # validate and run --pilot read a pilot the same way (harness.analysis.pilot_warnings)
            pilot_claims = None if pilot is None else read_pilot(pilot, suite.name, "--from", warn)
        except PilotError as exc:
            raise UsageError(str(exc)) from None
        plans.append(plan_suite(suite.name, suite.confidence, family_sizes(claims, metrics), design, pilot_claims))
    return plans


def save_baselines(results: Path, out_dir: Path = DEFAULT_BASELINES_DIR,
                   numeric: str = numeric.DETERMINISTIC) -> list[Path]:
    """A baseline from every run under ``results`` (each run of the ``numeric`` mode; "fast" accepts
    either); none is written when one of them is refused."""
    try:
        return save_baseline_files(run_folders(results), Path(out_dir), numeric)
    except (GateError, ResultsError) as exc:
        raise UsageError(str(exc)) from None


def gate(results: Path, baseline: Path | None = None,
         baselines_dir: Path = DEFAULT_BASELINES_DIR) -> list[GateResult]:
    """Every run under ``results`` against its baseline (``baseline`` names one for a single run)."""
    runs = run_folders(results)
    if baseline is not None and len(runs) > 1:
        raise UsageError(f"--baseline names one file but {results} holds {len(runs)} runs; "
                         "give one <suite>/<profile> folder")
    try:
        return [gate_run(run_dir, baseline, Path(baselines_dir)) for run_dir in runs]
    except (GateError, ResultsError) as exc:
        raise UsageError(str(exc)) from None


def export(results: Path, fmt: str = "csv", out: Path | None = None) -> "pandas.DataFrame":
    """Every stored trial under ``results`` as a row per trial and metric; written to ``out`` (atomically)
    when given."""
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"unknown export format {fmt!r}; expected one of: {', '.join(EXPORT_FORMATS)}")
    try:
        frame = export_frame(run_folders(results))
    except ResultsError as exc:
        raise UsageError(str(exc)) from None
    if out is not None:
        try:
            write_frame(frame, Path(out), fmt)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    return frame


@dataclass
class History:
    """Each claim of a suite across its parent MLflow runs, oldest first (``plot`` when one was drawn)."""

    suite: str
    profile: str
    uri: str
    points: list[ClaimPoint]
    plot: Path | None = None

    def text(self) -> str:
        runs = len({p.run_id for p in self.points})
        return f"{self.suite} ({self.profile}): {runs} run(s) in {self.uri}\n" + render_history(self.points)


def history(suite: str, profile: str = DEFAULT_PROFILE, tracking_uri: str | None = None,
            results: Path = Path("results"), out: Path | None = None) -> History:
    """Each claim's estimate, interval and result in every parent run of ``suite`` at ``profile``; a plot
    of them at ``out`` (written atomically) when given."""
    uri = tracking_uri or default_tracking_uri(Path(results))
    missing = missing_store(uri)
    if missing is not None and tracking_uri is None:
        return _stored_history(suite, profile, Path(results), missing, out)
    if missing is not None:
        raise UsageError(f"no MLflow store at {missing} (run a suite first, or give --tracking-uri)")
    try:
        check_reachable(uri)
        points = claim_history(MlflowTracker(uri), suite, profile)
    except TrackingError as exc:
        raise UsageError(str(exc)) from None
    if not points:
        raise UsageError(f"no runs of suite {suite!r} (profile {profile}) with claims in {uri}")
    return _drawn(History(suite, profile, uri, points), out)


def _stored_history(suite: str, profile: str, results: Path, missing: str, out: Path | None) -> History:
    """Without an MLflow store: the one run stored under ``results`` (``harness report --mlflow`` fills a store)."""
    folder = RunFolder(results, suite, profile).path
    if not (folder / SUITE_FILE).is_file():
        raise UsageError(f"no MLflow store at {missing} and no stored run of suite {suite!r} (profile {profile}) "
                         f"in {results} (run a suite first, or give --tracking-uri)")
    try:
        points = stored_claim_history(folder)
    except ResultsError as exc:
        raise UsageError(str(exc)) from None
    if not points:
        raise UsageError(f"no claims in the stored run {folder}")
    return _drawn(History(suite, profile, f"the stored trials of {folder} (no MLflow store at {missing}; "
                                          f"`harness report {results} --mlflow` fills one)", points), out)


def _drawn(found: History, out: Path | None) -> History:
    """``found`` with its plot written to ``out`` (atomically) when given."""
    if out is not None:
        try:
            found.plot = write_history_plot(found.points, Path(out), f"{found.suite} ({found.profile}): claims across runs")
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    return found


def plan_reproduction(target: str, tracking_uri: str | None = None, results: Path | None = None,
                      out: Path | None = None, device: str = "recorded", mlflow: bool = True,
                      task_paths: Sequence[str] = (), seed_batch: int | None = None) -> Plan:
    """What reproducing ``target`` (an MLflow run id, a results folder or a trial JSON) will rerun, where,
    and where it will log; nothing runs yet. The records' tasks are imported only when registered or
    named in ``task_paths`` (``package.module:Class`` paths the caller trusts)."""
    try:
        return replace(plan(target, tracking_uri, results, out, device, mlflow, task_paths), seed_batch=seed_batch)
    except (ReproduceError, TrackingError) as exc:
        raise UsageError(str(exc)) from None


def reproduce(reproduction: Plan, console: Console | None = None) -> ReproductionOutcome:
    """Rerun a planned reproduction and compare every metric with the record."""
    try:
        return run_reproduction(reproduction, console or Console())
    except TrackingError as exc:
        raise UsageError(f"{exc} (the rerun is stored under {reproduction.out_root})") from None


def compare_trials(results_a: Path, results_b: Path) -> list[SuiteValues]:
    """Two runs of the same suites trial by trial, matched by (suite, arm, point, seed): every value but
    speed, bit for bit (``harness compare --trials``)."""
    try:
        return compare_trial_values(Path(results_a), Path(results_b))
    except (CompareError, ResultsError) as exc:
        raise UsageError(str(exc)) from None


def compare(results_a: Path, results_b: Path, out: Path | None = None) -> list[tuple[Comparison, Path, Path | None]]:
    """Two runs of the same suites: each comparison with its JSON summary and plot, written to ``out``
    (default RESULTS_B/compare)."""
    try:
        comparisons = load_pair(Path(results_a), Path(results_b))
    except (CompareError, ResultsError) as exc:
        raise UsageError(str(exc)) from None
    out_dir = Path(out) if out else Path(results_b) / "compare"
    written = []
    for comparison in comparisons:
        stem = f"compare-{comparison.b.suite}"
        summary_path = out_dir / f"{stem}.json"
        write_json_atomic(summary_path, comparison.as_dict())
        plot = write_comparison_plot(comparison, out_dir / f"{stem}.png", run_label("A", comparison.a),
                                     run_label("B", comparison.b))
        written.append((comparison, summary_path, plot))
    return written
