"""The published site, asv-like: ``index.html`` flags the claims whose latest run regressed and lists every
claim in one fixed-width table; each suite has a page (its runs, claims, latest forest plots and verdict
tables) and each claim a page with its history across commits, as a graph and a table, in git order.

Pages come from the Jinja2 templates in ``templates/`` with autoescape on, so no stored value (a suite's
description, an arm label, an error message) can become markup. Static files only: no script, nothing
linked outside the folder, so it opens from disk, as a CI artifact or served as is.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from jinja2 import Environment, PackageLoader, StrictUndefined

from harness.analysis.present.claim_interval import interval_names
from harness.analysis.present.forest_plots import write_forest_plots
from harness.analysis.present.run_summary import validity_text
from harness.analysis.present.verdict_tables import render_report
from harness.publish.claim_graph import graph_points, write_claim_graph
from harness.publish.runs import PublishedRun
from harness.publish.timeline import REGRESSED, ClaimTimeline, slug, timelines
from harness.store import write_text_atomic

INDEX = "index.html"
ASSETS = "assets"  # the figures, one folder per suite and profile


@dataclass(frozen=True)
class SuitePage:
    """One suite's page: its runs per profile in git order, and the claims they made."""

    suite: str
    page: str
    profiles: dict[str, list[PublishedRun]]
    claims: list[ClaimTimeline]

    @property
    def runs(self) -> list[PublishedRun]:
        return [run for runs in self.profiles.values() for run in runs]

    @property
    def latest(self) -> dict[str, PublishedRun]:
        return {profile: runs[-1] for profile, runs in self.profiles.items()}


def _environment() -> Environment:
    environment = Environment(loader=PackageLoader("harness.publish", "templates"), autoescape=True,
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    environment.filters["validity"] = validity_text
    environment.globals.update(INDEX=INDEX, REGRESSED=REGRESSED)
    return environment


def write_site(runs: Sequence[PublishedRun], out: Path) -> list[Path]:
    """Write the site under ``out`` (created) from ``runs`` in git order; returns the pages, index first."""
    out.mkdir(parents=True, exist_ok=True)
    templates = _environment()
    claims = timelines(runs)
    suites = _suite_pages(runs, claims)
    pages = [out / INDEX]
    for suite in suites:
        pages.append(out / suite.page)
        write_text_atomic(out / suite.page, templates.get_template("suite.html.j2").render(
            suite=suite, profiles=[_profile(suite, profile, profile_runs, out)
                                   for profile, profile_runs in sorted(suite.profiles.items())]))
    for timeline in claims:
        graph = Path(ASSETS) / slug(timeline.suite) / slug(timeline.profile) / timeline.page.replace(".html", ".png")
        write_claim_graph(timeline, out / graph)
        pages.append(out / timeline.page)
        write_text_atomic(out / timeline.page, templates.get_template("claim.html.j2").render(
            claim=timeline, graph=graph.as_posix(), points=len(graph_points(timeline)),
            suite_page=next(s.page for s in suites if s.suite == timeline.suite),
            trends=[timeline.trend_at(n) for n in range(len(timeline.steps))]))
    write_text_atomic(out / INDEX, templates.get_template("index.html.j2").render(
        suites=suites, claims=claims, regressions=[c for c in claims if c.trend[0] == REGRESSED]))
    return pages


def _suite_pages(runs: Sequence[PublishedRun], claims: Sequence[ClaimTimeline]) -> list[SuitePage]:
    profiles: dict[str, dict[str, list[PublishedRun]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:  # in git order: the last of a profile is its latest
        profiles[run.suite][run.profile].append(run)
    pages = []
    for suite, by_profile in sorted(profiles.items()):
        page = f"{slug(suite)}.html" if slug(suite) != "index" else "index_.html"
        pages.append(SuitePage(suite, page, dict(by_profile), [c for c in claims if c.suite == suite]))
    return pages


def _profile(suite: SuitePage, profile: str, runs: Sequence[PublishedRun], out: Path) -> dict[str, object]:
    """What the suite page shows of one profile: its runs, its claims, the latest run's figures and tables."""
    latest = runs[-1]
    assets = Path(ASSETS) / slug(suite.suite) / slug(profile)
    plots = write_forest_plots(latest.analysis, out / assets)
    return {
        "name": profile, "anchor": slug(profile), "runs": runs, "latest": latest,
        "claims": [c for c in suite.claims if c.profile == profile],
        "plots": [(assets / plot.name).as_posix() for plot in plots],
        "interval": interval_names(latest.analysis.claims, latest.analysis.results.confidence) or "95%",
        "report": render_report(latest.analysis),
    }
