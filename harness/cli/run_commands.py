"""`harness run`, `validate`, `list` and `ui`: from suite files to stored, tracked results."""
from __future__ import annotations

import errno
import math
import signal
import subprocess
import sys
import time
import webbrowser
from pathlib import Path

import click
from click.core import ParameterSource

from harness.execution.registry import (BUILTIN_EXECUTORS, DEFAULT_EXECUTOR, ENTRY_POINT_GROUP, ExecutorError,
                                        ExecutorOption, executor_names, offered_options)
from harness.core.numeric import DETERMINISTIC, MODES, OPTION
from harness.suite.resolved_suite import DEFAULT_PROFILE
from harness.suite.references import MAX_TRIALS
from harness.suite.yaml_safety import MAX_SUITE_NODES

RESULTS_DEFAULT = Path("results")
UI_PORT = 5000  # `harness ui`'s default port, which the run's last lines link to
EXIT_USAGE = 2


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(EXIT_USAGE)


def _seed_list(_ctx, _param, value: str | None) -> list[int] | None:
    from harness.suite.schema import check_seeds

    if value is None:
        return None
    try:
        seeds = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not seeds:
        raise click.BadParameter("no seeds given (leave --seeds out to run the suite's seeds)")
    try:
        return check_seeds(seeds)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _finite_seconds(_ctx, _param, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number of seconds, got {value}")
    return value


def _str_list(_ctx, _param, value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise click.BadParameter("no arm names given (leave --arms out to run every arm)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise click.BadParameter(f"arm(s) given twice: {', '.join(repeated)}")
    return names


suite_argument = click.argument("suite_file", metavar="SUITE.yaml", type=click.Path(path_type=Path))
max_trials_option = click.option(
    "--max-trials", type=click.IntRange(min=1), default=MAX_TRIALS, show_default=True,
    help="Refuse a suite that expands to more trials (seeds x sweep points x arm variants).",
)
max_nodes_option = click.option(
    "--max-suite-nodes", "max_nodes", type=click.IntRange(min=1), default=MAX_SUITE_NODES, show_default=True,
    help="Refuse a suite file with more YAML nodes once aliases are expanded.",
)
results_option = click.option(
    "--results", "results_root", type=click.Path(path_type=Path), default=RESULTS_DEFAULT, show_default=True,
    help="Results folder (trial JSON, plots, the embedded MLflow store).",
)
pilot_option = click.option(
    "--pilot", type=click.Path(path_type=Path), metavar="RESULTS",
    help="A pilot run of the suite (a smoke or exploratory run's results, as harness plan --from reads them): "
    "before anything runs, warn of each claim whose minimum detectable effect at max_seeds (a fixed design's "
    "seeds), at the pilot's spread, is more than twice its margin. Without it nothing is read.",
)
redesign_option = click.option(
    "--redesign", is_flag=True, help="When the results folder's trials belong to another design, or to one that "
    "cannot be read (suite.json deleted or damaged), set them aside (trials/superseded/) and run this design "
    "afresh in the folder; without it such a run is refused.",
)


def install_interrupts() -> None:
    """SIGTERM and SIGINT stop a run with its finished trials stored. Called after ray.init, which installs
    its own SIGTERM handler; a shell starts a background job with SIGINT ignored, and Python then never
    installs its handler: Ctrl-C (or kill -INT) must stop a run however it was started."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


class RegisteredExecutor(click.Choice):
    """``--executor``'s choices, read from the package metadata when the command line is parsed (a package
    installed since the CLI loaded is offered), and without importing any executor."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(executor_names())

    @choices.setter
    def choices(self, _given: object) -> None:
        """The registry, not a list fixed at start, holds the choices."""


EXECUTOR_FLAGS = "harness.executor_flags"  # ctx.meta: the executor options this invocation offers


class ExecutorCommand(click.Command):
    """A command that trains trials: it offers each executor's own options as flags, built from the fields of
    the executor's ``Options`` (``harness.execution.registry.offered_options``) instead of a list here: the
    built-in executors' always, and another package's when ``--executor`` names it (its module is imported
    only then). The callback receives those given on the command line as ``executor_options`` (a dict)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        named = _named_executor(args)
        ctx.meta[EXECUTOR_FLAGS] = _offered(named)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            if named not in BUILTIN_EXECUTORS or set(executor_names()) <= BUILTIN_EXECUTORS:
                raise
            raise click.UsageError(f"{exc.format_message()} (another package's executor offers its options when "
                                   "--executor names it)", ctx) from None

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        offered = ctx.meta.get(EXECUTOR_FLAGS)
        if offered is None:  # help asked for outside parsing
            offered = ctx.meta[EXECUTOR_FLAGS] = _offered(DEFAULT_EXECUTOR)
        taken = {opt for param in params for opt in param.opts} | {p.name for p in params} | {"executor_options"}
        clashing = [o for o in offered if o.flag in taken or o.name in taken]
        if clashing:
            raise click.UsageError(f"executor {', '.join(clashing[0].executors)} declares option {clashing[0].name!r}, "
                                   f"which {ctx.command_path} takes itself ({clashing[0].flag})")
        at = next(i for i, param in enumerate(params) if param.name == "executor_name") + 1
        return [*params[:at], *(_flag(o) for o in offered), *params[at:]]

    def invoke(self, ctx: click.Context):
        given = {}
        for offered in ctx.meta.get(EXECUTOR_FLAGS, ()):
            value = ctx.params.pop(offered.name, None)
            if ctx.get_parameter_source(offered.name) not in (None, ParameterSource.DEFAULT):
                given[offered.name] = value
        ctx.params["executor_options"] = given
        return super().invoke(ctx)


def _named_executor(args: list[str]) -> str:
    """The executor an invocation's arguments name (the last --executor before a ``--``), else the default."""
    named = DEFAULT_EXECUTOR
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--executor" and i + 1 < len(args):
            named = args[i + 1]
        elif arg.startswith("--executor="):
            named = arg.partition("=")[2]
    return named


def _offered(named: str) -> list[ExecutorOption]:
    """The options of the built-in executors and of the one named (imported only when it is another
    package's): one that cannot be loaded offers none here, and its run says why in one line."""
    names = sorted(BUILTIN_EXECUTORS, key=lambda name: (name != DEFAULT_EXECUTOR, name))
    for offering in ([*names, named], names) if named not in BUILTIN_EXECUTORS else (names,):
        try:
            return offered_options(offering)
        except ExecutorError:
            continue
    return []


def _flag(offered: ExecutorOption) -> click.Option:
    """The flag of one executor option: its type (a bool a flag), its help, and which executors take it."""
    takers = f"For --executor {', '.join(offered.executors)}."
    help_text = f"{offered.help} {takers}" if offered.help else takers
    if offered.type is bool:
        return click.Option([offered.flag, offered.name], is_flag=True, default=None, help=help_text)
    kind: click.ParamType | type = offered.type
    if offered.minimum is not None and offered.type is int:
        kind = click.IntRange(min=int(offered.minimum))
    elif offered.minimum is not None and offered.type is float:
        kind = click.FloatRange(min=offered.minimum)
    return click.Option([offered.flag, offered.name], type=kind, metavar=offered.metavar, help=help_text)


def execution_options(command):
    """The options of every command that trains trials (run, tune): where results go, MLflow, device,
    executor, threads, timeouts and limits."""
    options = [
        results_option,
        click.option("--tracking-uri", help="MLflow tracking URI (default: sqlite:///RESULTS/mlflow.db)."),
        click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"])),
        click.option("--no-resume", is_flag=True, help="Rerun trials even if a finished result is stored."),
        click.option("--no-mlflow", is_flag=True, help="Store results only; do not mirror them to MLflow."),
        click.option("--executor", "executor_name", type=RegisteredExecutor(),
                     default=DEFAULT_EXECUTOR, show_default=True,
                     help="How trials run: auto (parallel on the CPU where at least two trials fit the cores, once a "
                     "trial proves long enough, else serial), serial (one trial at a time in this process), parallel "
                     "(trials side by side in worker processes), ray (Ray tasks, pip install 'harness[ray]'), or any "
                     f"executor another package registers under the entry-point group {ENTRY_POINT_GROUP}."),
        click.option("--threads", type=click.IntRange(min=1),
                     help="torch intra-op threads for every trial [default: 1 side by side, else torch's, one per "
                     "core]. Float results can "
                     "depend on it: pin it (e.g. to a baseline's count) to compare quality across machines."),
        click.option(OPTION, "numeric", type=click.Choice(MODES), default=DETERMINISTIC, show_default=True,
                     help="deterministic: torch, MKL and oneDNN held to one CPU vector ISA level (AVX2 on x86-64) "
                     "and torch's deterministic algorithms on every device, so CPUs of other ISAs compute the same "
                     "floats; fast: each library's best kernels here, or the levels ATEN_CPU_CAPABILITY, MKL_CBWR and "
                     "ONEDNN_MAX_CPU_ISA name (and CUDA's fast paths). Recorded in every trial; the gate refuses a "
                     "baseline of the other mode."),
        click.option("--trial-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
                     callback=_finite_seconds,
                     help="Fail a trial that runs longer than this many seconds (its reason says so); the others go on."),
        max_trials_option,
        max_nodes_option,
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command(cls=ExecutorCommand)
@suite_argument
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True, help="Named profile of the suite, e.g. smoke.")
@click.option("--seeds", callback=_seed_list, help="Override the seeds, e.g. 0,1 (distinct, 0 <= seed < 2**63).")
@click.option("--arms", callback=_str_list, help="Run only these arms, e.g. raw,compressed.")
@execution_options
@click.option("--verbose", is_flag=True, help="Print every metric and every exploratory row (default: key metrics; "
              "the full tables are in report/verdicts.txt either way).")
@redesign_option
@pilot_option
@click.option("--exploratory", is_flag=True, help="Run the suite files' own seeds, an exploratory run, even where "
              "a design is registered (a registered design otherwise runs its registration's seeds).")
@click.option("--allocation", type=click.Choice(["open", "all"]), default="open", show_default=True,
              help="A sequential suite's later looks: open runs only the arms that an open claim, a premise or the "
              "validity controls read (the same decisions); all runs every arm at every look.")
def run(suite_file, profile, seeds, arms, results_root, tracking_uri, device, no_resume, no_mlflow,
        executor_name, executor_options, threads, numeric, trial_timeout, max_trials, max_nodes, verbose,
        allocation,
        redesign, pilot, exploratory) -> None:
    """Run every trial of SUITE.yaml, print tables and verdicts, log to MLflow; a summary comes last."""
    from harness import api
    from harness.analysis.present.run_summary import SuiteSummary, render_terminal_summary
    from harness.analysis.present.verdict_tables import render_arm_table
    from harness.cli.outputs import append_step_summary
    from harness.core.devices import device_name
    from harness.core.terminal import Console

    options = api.RunOptions(
        profile=profile, seeds=seeds, arms=arms, results=results_root, tracking_uri=tracking_uri,
        mlflow=not no_mlflow, device=device, resume=not no_resume, executor=executor_name,
        executor_options=executor_options, threads=threads, numeric=numeric, trial_timeout=trial_timeout,
        max_trials=max_trials, max_nodes=max_nodes, allocation=allocation, redesign=redesign, exploratory=exploratory,
    )
    if pilot is not None:  # before anything runs: claims whose margin its seeds cannot resolve
        try:
            suites = api.load_suites(suite_file, options)
        except api.UsageError as exc:
            _fail(str(exc))
        for line in (warning for suite in suites for warning in _pilot_lines(suite, pilot)):
            click.echo(line, err=True)
    console = Console()

    def started(device_used) -> None:
        install_interrupts()
        console.line(f"device: {device_used} ({device_name(device_used)})")

    def print_suite(result: api.SuiteResult) -> None:
        console.out(_suite_header(result.outcome))
        console.out(render_arm_table(result.analysis.results, full=verbose))
        console.out(result.text(full=verbose))

    try:
        outcome = api.run(suite_file, options, console=console, on_suite=print_suite, on_started=started,
                          warn=lambda line: click.echo(line, err=True))
    except api.UsageError as exc:
        _fail(str(exc))
    _footer(outcome)
    reports = [s.report for s in outcome.suites if s.report is not None]  # a suite with nothing new has no new time
    if reports:
        click.echo("\n" + api.phase_table(reports))
    if outcome.summary:
        append_step_summary(outcome.summary)
        summaries = [SuiteSummary(s.analysis, s.outcome.wall_seconds) for s in outcome.suites]
        click.echo("\n" + render_terminal_summary(summaries).rstrip("\n"))
    raise SystemExit(outcome.exit_code)


def _interrupt(_signum, _frame) -> None:
    """`kill` stops a run like Ctrl-C: finished trials stay stored, the MLflow run is marked KILLED."""
    raise KeyboardInterrupt


def _suite_header(outcome) -> str:
    suite = outcome.suite
    parts = [f"{outcome.ran} ran", f"{outcome.skipped} already finished"]
    if outcome.failed:
        parts.append(f"{len(outcome.failed)} FAILED")
    lines = [f"\n== {suite.name} ({suite.profile}) — {', '.join(parts)}, {outcome.wall_seconds:.1f}s"]
    if suite.tuned:
        chosen = "; ".join(f"{arm} {', '.join(f'{k}={v}' for k, v in entry.params.items()) or '(none)'}"
                           + (f" (keeps its own {', '.join(entry.kept)})" if entry.kept else "")
                           for arm, entry in suite.tuned.arms.items())
        lines.append(f"   tuned params from {suite.tuned.lock}: {chosen}")
    for record in outcome.failed:
        lines.append(f"   failed: {record.title}: {record.error}")
    return "\n".join(lines)


def _footer(outcome) -> None:
    # an interrupted suite is not among the finished ones: then the invocation's own time is the base
    wall = sum(s.outcome.wall_seconds for s in outcome.suites) or outcome.seconds
    lines = [f"\nresults: {outcome.results.resolve()}  ({outcome.seconds:.1f}s)"]
    if outcome.tracker is not None:
        share = 100 * outcome.tracker.seconds / max(wall, 1e-9)
        lines.append(f"mlflow: {outcome.tracker.uri}  ({outcome.tracker.seconds:.2f}s, {share:.1f}% of suite wall time)")
        lines.append(f"browse: {_ui_address(outcome.tracker.uri, outcome.results)}")
    click.echo("\n".join(lines))


def _ui_address(uri: str, results: Path) -> str:
    """Where the run can be browsed: the server's own address, or the local UI's once `harness ui` serves
    the store (its default port), on the runs table rather than MLflow's GenAI view."""
    from harness.tracking.mlflow_tracker import MODEL_TRAINING_VIEW

    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/#/experiments?{MODEL_TRAINING_VIEW}"
    return f"http://127.0.0.1:{UI_PORT}/#/experiments?{MODEL_TRAINING_VIEW} (serve it: harness ui --results {results})"


@click.command()
@suite_argument
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True)
@click.option("--resolved", is_flag=True, help="Print each arm's params as its trials get them, with where each "
              "value comes from (task default, suite params, profile params, arm, profile arm override, sweep).")
@max_trials_option
@max_nodes_option
@pilot_option
def validate(suite_file, profile, resolved, max_trials, max_nodes, pilot) -> None:
    """Validate SUITE.yaml fully (includes, profile, arms, params, contrasts, claims) without running."""
    # The suite layer's loader, which harness.api's load_suites wraps: the API would load the analysis
    # and plotting libraries, which nothing here needs.
    from harness.execution.trials import expand_trials, suite_warnings
    from harness.suite.loader import load_suites
    from harness.suite.resolved_suite import SuiteError
    from harness.suite.resolved import render_resolved

    try:
        suites = load_suites(suite_file, profile=profile, max_trials=max_trials, max_nodes=max_nodes)
    except SuiteError as exc:
        _fail(str(exc))
    for suite in suites:
        trials = expand_trials(suite)
        seeds = f"{len(suite.seeds)} seeds"
        if suite.sequential is not None:
            per_seed = len(trials) // len(suite.seeds)
            seeds += (f" first look, sequential up to {suite.sequential.max_seeds} "
                      f"({per_seed * suite.sequential.max_seeds} trials at most)")
        click.echo(
            f"ok: {suite.name} ({suite.profile}): task {suite.task_name} v{suite.task.version}, "
            f"{len(suite.arms)} arms, {seeds}, {len(trials)} trials; "
            f"profiles: {', '.join([DEFAULT_PROFILE, *suite.profiles])}"
            + (f"; tuned arms from {suite.tuned.lock}: {', '.join(suite.tuned.arms)}" if suite.tuned else "")
        )
        for premise in suite.premises:
            click.echo(f"  {premise.describe()}")
        for warning in suite_warnings(suite) + _pilot_lines(suite, pilot):
            click.echo(warning, err=True)
        if resolved:
            click.echo(render_resolved(suite))


def _pilot_lines(suite, pilot: Path | None) -> list[str]:
    """``--pilot``'s warnings for one suite (harness.analysis.pilot_warnings); nothing is read without one."""
    if pilot is None:
        return []
    from harness.analysis.pilot_warnings import PilotError, pilot_warnings

    try:
        return pilot_warnings(suite, pilot, warn=lambda line: click.echo(line, err=True))
    except PilotError as exc:
        _fail(str(exc))
    return []  # not reached: _fail exits


@click.command(name="list")
@click.argument("names", nargs=-1)
def list_tasks(names: tuple[str, ...]) -> None:
    """Registered tasks (or only NAMES) with their params (defaults) and metrics (direction, unit, kind)."""
    from harness.tasks import UnknownTaskError, load_task, registered_tasks
    from harness.tasks.base import param_bounds, param_choices
    from harness.tasks.param_paths import leaf_fields

    registered = sorted(registered_tasks())
    unknown = [name for name in names if name not in registered]
    if unknown:
        _fail(f"no registered task {', '.join(map(repr, unknown))}; registered: {', '.join(registered)}")
    for name in names or registered:
        try:
            task = load_task(name)
        except UnknownTaskError as exc:
            click.echo(f"{name}: unavailable ({exc})\n")
            continue
        click.echo(f"{name}  (v{task.version})  {task.description}")
        click.echo("  params:")
        bounds, choices = param_bounds(task.Params), param_choices(task.Params)
        for key, info in leaf_fields(task.Params).items():
            default = "required" if info.is_required() else repr(info.get_default(call_default_factory=True))
            bound = f"  [{bounds[key]}]" if bounds.get(key) else ""
            bound += f"  [one of {', '.join(map(repr, choices[key]))}]" if key in choices else ""
            click.echo(f"    {key} = {default}{bound}" + (f"  # {info.description}" if info.description else ""))
        click.echo("  metrics:")
        for metric in task.metrics:
            unit = f" [{metric.unit}]" if metric.unit else ""
            click.echo(f"    {metric.name}{unit}  {metric.direction} is better, {metric.kind}" if metric.direction != "none"
                       else f"    {metric.name}{unit}  informational, {metric.kind}")
        click.echo()


@click.command()
@results_option
@click.option("--port", default=UI_PORT, show_default=True, type=click.IntRange(1, 65535))
@click.option("--tracking-uri", help="Browse this store instead of RESULTS/mlflow.db.")
def ui(results_root: Path, port: int, tracking_uri: str | None) -> None:
    """Serve the MLflow UI on 127.0.0.1 over the results store, opening on the runs table."""
    refused = _cannot_listen(port)
    if refused:  # at once, before importing mlflow: its server would retry for about a minute, then exit 0
        _fail(f"cannot serve on 127.0.0.1:{port} ({refused}); pick another port with --port")
    from harness.core.processes import stop_process_group
    from harness.tracking.mlflow_tracker import ARMS_VIEW, MODEL_TRAINING_VIEW, MlflowTracker, default_tracking_uri

    uri = tracking_uri or default_tracking_uri(results_root)
    if uri.startswith("sqlite:") and not (results_root / "mlflow.db").exists():
        _fail(f"no MLflow store at {results_root / 'mlflow.db'}; run a suite first")
    experiments = MlflowTracker(uri).client.search_experiments()
    base = f"http://127.0.0.1:{port}"
    # MLflow 3 opens on its GenAI view (traces); benchmark runs live in the "Model training" view
    home = f"{base}/#/experiments?{MODEL_TRAINING_VIEW}"
    click.echo(f"Model training view: {home}")
    for experiment in experiments:
        if experiment.name != "Default":
            click.echo(f"{experiment.name}: {base}/#/experiments/{experiment.experiment_id}?{MODEL_TRAINING_VIEW}")
            click.echo(f"{experiment.name}, trials by arm: {base}/#/experiments/{experiment.experiment_id}/runs"
                       f"?viewStateShareKey={ARMS_VIEW}&{MODEL_TRAINING_VIEW}")
    # One worker: a local browser for one person; MLflow's default of 4 each import MLflow (seconds of CPU).
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1"]
    click.echo(f"serving {uri} on {base} (Ctrl-C stops)")
    # The server runs in its own process group (mlflow -> uvicorn -> workers) so that Ctrl-C or a
    # `kill` of this command stops all of it instead of leaving an orphaned server on the port. The
    # signals only set a flag: an exception raised while Popen is forking would skip the cleanup, and
    # a SIGINT ignored by whoever started us (a background job) would otherwise be ignored here too.
    requested: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: requested.append(signum))
    signal.signal(signal.SIGINT, lambda signum, _frame: requested.append(signum))
    server = subprocess.Popen(command, start_new_session=True)
    code, opened = None, not sys.stdout.isatty()  # a browser only for someone at a terminal
    try:
        while not requested and (code := server.poll()) is None:
            if not opened and _answers(base):
                webbrowser.open(home)
                opened = True
            time.sleep(0.2)
    finally:
        stop_process_group(server)
    if code:  # it stopped by itself (e.g. another server took the port first), not by Ctrl-C
        _fail(f"the MLflow server on 127.0.0.1:{port} exited with code {code} (its output is above)")


def _answers(base: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _cannot_listen(port: int) -> str | None:
    """Why a server could not listen on 127.0.0.1:port (in use, not permitted), or None."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not "in use"
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return "port in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
    return None


COMMANDS = (run, validate, list_tasks, ui)
