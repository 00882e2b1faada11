"""The published report: ``index.html`` listing the suites, and one page per suite holding, per profile,
the runs it was built from (commit, machine, date, task code, design), each primary claim across those
runs, and the latest run's forest plots and verdict tables. Static files only: open ``index.html``."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from harness.analysis.decide.claims import ClaimResult
from harness.analysis.present.claim_interval import interval_names, shown_interval
from harness.analysis.present.forest_plots import write_forest_plots
from harness.analysis.present.run_summary import estimate_text, validity_text
from harness.analysis.present.verdict_tables import render_report
from harness.publish.html_page import image, link, page, result_cell, table, text
from harness.publish.runs import PublishedRun
from harness.store import write_text_atomic

INDEX = "index.html"
RUN_HEADER = ("run", "commit", "machine", "last trial started", "validity", "task code (sha256)", "design", "folder")
CLAIM_HEADER = ("contrast", "metric", "point", "test")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def slug(name: str) -> str:
    """A file name for a suite or profile: its letters, digits, ``_ . -``; anything else becomes ``_``."""
    return _UNSAFE.sub("_", name) or "_"


def write_site(runs: Sequence[PublishedRun], out: Path) -> list[Path]:
    """Write the report under ``out`` (created); returns the pages, index first."""
    out.mkdir(parents=True, exist_ok=True)
    by_suite: dict[str, list[PublishedRun]] = defaultdict(list)
    for run in runs:
        by_suite[run.suite].append(run)
    pages = [out / INDEX]
    rows = []
    for suite, suite_runs in sorted(by_suite.items()):
        path = out / f"{slug(suite)}.html"
        write_text_atomic(path, _suite_page(suite, suite_runs, out))
        pages.append(path)
        latest = _latest_by_profile(suite_runs)
        rows.append([link(path.name, suite), text(", ".join(sorted(latest))), text(len(suite_runs)),
                     "<br>".join(text(f"{profile}: {validity_text(run.analysis.validity)}")
                                 for profile, run in sorted(latest.items())),
                     text(", ".join(sorted({run.commit for run in suite_runs})))])
    body = ("<h1>harness report</h1>\n<p>Did each mechanism beat its control? One page per suite: each primary "
            "claim across the runs published here, the latest forest plots and verdict tables.</p>\n"
            + table(("suite", "profiles", "runs", "latest validity", "commits"), rows))
    write_text_atomic(out / INDEX, page("harness report", body))
    return pages


def _latest_by_profile(runs: Sequence[PublishedRun]) -> dict[str, PublishedRun]:
    latest: dict[str, PublishedRun] = {}
    for run in runs:  # oldest first: the last one seen is the latest
        latest[run.profile] = run
    return latest


def _suite_page(suite: str, runs: Sequence[PublishedRun], out: Path) -> str:
    stored = runs[-1].analysis.results.stored
    parts = [f"<p>{link(INDEX, 'all suites')}</p>", f"<h1>{text(suite)}</h1>",
             f"<p>{text(stored.description or '')}</p>", f"<p>task <code>{text(stored.task or '')}</code></p>"]
    profiles: dict[str, list[PublishedRun]] = defaultdict(list)
    for run in runs:
        profiles[run.profile].append(run)
    for profile, profile_runs in sorted(profiles.items()):
        parts.append(_profile_section(suite, profile, profile_runs, out))
    return page(f"{suite}: harness report", "\n".join(parts))


def _profile_section(suite: str, profile: str, runs: Sequence[PublishedRun], out: Path) -> str:
    run_rows = [[text(i), text(run.commit), text(run.machine), text(run.finished_at or "-"),
                 text(validity_text(run.analysis.validity)), f"<code>{text(run.task_code)}</code>", text(run.design),
                 f"<code>{text(run.folder)}</code>"] for i, run in enumerate(runs, 1)]
    latest = runs[-1]
    assets = Path(slug(suite)) / slug(profile)
    plots = write_forest_plots(latest.analysis, out / assets)
    figures = "\n".join(f"<p>{image((assets / plot.name).as_posix(), f'forest plot {plot.stem}')}</p>"
                        for plot in plots)
    names = interval_names(latest.analysis.claims, latest.analysis.results.confidence) or "95%"
    return "\n".join([
        f'<section id="{text(slug(profile))}">', f"<h2>profile {text(profile)}</h2>",
        "<h3>Runs</h3>", table(RUN_HEADER, run_rows),
        "<h3>Claims across runs</h3>",
        "<p>Estimate: treatment - control, the mean paired difference over seeds, with the interval the claim "
        "was decided on and its name (repeated for a sequential design), then the claim's result; one column per "
        "run, oldest first.</p>",
        table((*CLAIM_HEADER, *(f"run {i}: {run.label}" for i, run in enumerate(runs, 1))), _history_rows(runs),
              caption=f"{suite} ({profile}): primary claims"),
        f"<h3>Latest run (run {len(runs)})</h3>",
        f"<p>validity {text(validity_text(latest.analysis.validity))}</p>",
        figures or "<p>no claims to plot</p>",
        table(("contrast", "metric", "point", "test", f"estimate [{names} CI]", "result", "seeds"),
              [_claim_row(latest, claim) for claim in latest.analysis.claims], caption="verdicts of the primary claims"),
        f"<pre>{text(render_report(latest.analysis))}</pre>",
        "</section>",
    ])


def _claim_key(claim: ClaimResult) -> tuple[str, str, str, str]:
    return claim.contrast, claim.key, claim.point or "-", claim.claim.test


def _history_rows(runs: Sequence[PublishedRun]) -> list[list[str]]:
    """One row per claim any run made, one cell per run ('-' where that run did not make it)."""
    cells: dict[tuple[str, str, str, str], dict[int, ClaimResult]] = {}
    for index, run in enumerate(runs):
        for claim in run.analysis.claims:
            cells.setdefault(_claim_key(claim), {})[index] = claim
    rows = []
    for key, by_run in cells.items():
        history = [f"{_estimate(runs[i], by_run[i])}<br>{_result(runs[i], by_run[i])}" if i in by_run else "-"
                   for i in range(len(runs))]
        rows.append([text(part) for part in key] + history)
    return rows


def _estimate(run: PublishedRun, claim: ClaimResult) -> str:
    """'+0.03 [+0.01, +0.05] repeated 95%': the estimate with the interval that decided the claim, named."""
    shown = shown_interval(claim, run.analysis.results.confidence)
    return text(estimate_text(claim) + ("" if shown is None else f" {shown.name}"))


def _result(run: PublishedRun, claim: ClaimResult) -> str:
    """The claim's result, saying so when the run's validity does not let it count."""
    validity = run.analysis.validity
    return result_cell(claim.result_text + ("" if validity.claims_count else f" (not counted: {validity.status})"))


def _claim_row(run: PublishedRun, claim: ClaimResult) -> list[str]:
    seeds = str(claim.n) + (f" (look {claim.look})" if claim.sequential else "")
    return [text(claim.contrast), text(claim.key), text(claim.point or "-"), text(claim.statement),
            text(estimate_text(claim)), _result(run, claim), text(seeds)]
