"""Each primary claim across the published runs, in git order, and whether its latest run regressed.

A regression is what a reader of the index must not miss: the claim's latest run did worse than the
run before it at an earlier commit, either in its result (PASS to INCONCLUSIVE or FAIL) or in its
estimate, which left that run's interval on the side that is worse for the mechanism. Runs at the same
commit are reruns of one code, so the comparison skips back past them to the code that came before.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from harness.analysis.claim_status import FAIL, FUTILE, PASS, SHORT
from harness.analysis.decide.claims import ClaimResult
from harness.analysis.present.claim_interval import shown_interval
from harness.analysis.present.forest_plots import better_side_flipped
from harness.analysis.present.run_summary import estimate_text
from harness.publish.runs import PublishedRun

REGRESSED = "regressed"
IMPROVED = "improved"
STEADY = "steady"
FIRST = "first run"
# How good a result is for the claim: a decided pass, then undecided, then futile, then a decided fail.
_RANK = {PASS: 3, FUTILE: 1, FAIL: 0, SHORT: 0}
_UNDECIDED_RANK = 2
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ClaimStep:
    """The claim in one run: what its graph plots as one point and its table shows as one row."""

    number: int  # the run's 1-based place in git order among all runs of its suite and profile
    run: PublishedRun
    claim: ClaimResult

    @property
    def estimate(self) -> float | None:
        value = self.claim.estimate
        return value if value is not None and math.isfinite(value) else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The interval the claim was decided on (repeated for a sequential design)."""
        shown = shown_interval(self.claim, self.run.analysis.results.confidence)
        return None if shown is None else (shown.low, shown.high)

    @property
    def interval_name(self) -> str:
        shown = shown_interval(self.claim, self.run.analysis.results.confidence)
        return "" if shown is None else shown.name

    @property
    def estimate_text(self) -> str:
        return estimate_text(self.claim)

    @property
    def counted(self) -> bool:
        """Whether the run's validity lets its claims count."""
        return self.run.analysis.validity.claims_count

    @property
    def result(self) -> str:
        return self.claim.result_text + ("" if self.counted else f" (not counted: {self.run.analysis.validity.status})")

    @property
    def word(self) -> str:
        """The result's first word, lower case: the class that colours it."""
        return self.claim.status.split(" ", 1)[0]


@dataclass(frozen=True)
class ClaimTimeline:
    """One claim of one suite and profile across the runs that made it, in git order."""

    suite: str
    profile: str
    contrast: str
    metric: str
    point: str
    test: str
    steps: tuple[ClaimStep, ...]
    page: str  # its page's file name under the site

    @property
    def label(self) -> str:
        return f"{self.contrast} · {self.metric}" + (f" @ {self.point}" if self.point else "")

    @property
    def latest(self) -> ClaimStep:
        return self.steps[-1]

    @property
    def trend(self) -> tuple[str, str]:
        """The latest run's ``trend_at``: what the index flags."""
        return self.trend_at(len(self.steps) - 1)

    def trend_at(self, index: int) -> tuple[str, str]:
        """(REGRESSED, IMPROVED, STEADY or FIRST, why) for ``steps[index]`` against the last run before it
        at another commit."""
        step = self.steps[index]
        earlier = [before for before in self.steps[:index] if before.run.commit != step.run.commit]
        if not earlier:
            return FIRST, "no run at an earlier commit"
        return compare(earlier[-1], step)


def compare(before: ClaimStep, after: ClaimStep) -> tuple[str, str]:
    """Whether ``after`` did worse than ``before`` (its result, or its estimate beyond ``before``'s interval
    on the mechanism's worse side), better, or neither, and in words why."""
    was, now = _rank(before), _rank(after)
    if now < was:
        return REGRESSED, f"{before.word.upper()} at {before.run.commit} -> {after.word.upper()}"
    moved = _moved(before, after)
    if moved < 0:
        return REGRESSED, f"estimate left {before.run.commit}'s interval against the mechanism"
    if now > was:
        return IMPROVED, f"{before.word.upper()} at {before.run.commit} -> {after.word.upper()}"
    if moved > 0:
        return IMPROVED, f"estimate left {before.run.commit}'s interval for the mechanism"
    return STEADY, f"as at {before.run.commit}"


def _rank(step: ClaimStep) -> int:
    """The result's rank, read for the mechanism: a claim with the mechanism as its control passes
    against it, so its ranks run the other way."""
    rank = _RANK.get(step.claim.status, _UNDECIDED_RANK)
    return 3 - rank if _mechanism_is_control(step) else rank


def _mechanism_is_control(step: ClaimStep) -> bool:
    mechanism = step.run.analysis.results.stored.mechanism
    return bool(mechanism) and step.claim.control_arm == mechanism != step.claim.treatment_arm


def _moved(before: ClaimStep, after: ClaimStep) -> int:
    """+1 when ``after``'s estimate lies beyond ``before``'s interval on the mechanism's better side, -1 on
    its worse side, 0 inside it or where the metric has no better direction."""
    interval, estimate = before.interval, after.estimate
    sign = after.run.analysis.results.spec_for(after.claim.key).better_sign
    if interval is None or estimate is None or not sign:
        return 0
    flipped = better_side_flipped(sign, after.claim.treatment_arm, after.claim.control_arm,
                                  after.run.analysis.results.stored.mechanism)
    up = 1 if estimate > interval[1] else -1 if estimate < interval[0] else 0
    return -up if flipped else up


def timelines(runs: Sequence[PublishedRun]) -> list[ClaimTimeline]:
    """Every claim any run made, per suite and profile, each with its runs in the order given (git order)."""
    grouped: dict[tuple[str, ...], list[ClaimStep]] = {}
    numbers: dict[tuple[str, str], int] = {}
    for run in runs:
        number = numbers[run.suite, run.profile] = numbers.get((run.suite, run.profile), 0) + 1
        for claim in run.analysis.claims:
            key = (run.suite, run.profile, claim.contrast, claim.key, claim.point or "", claim.claim.test)
            grouped.setdefault(key, []).append(ClaimStep(number, run, claim))
    found, pages = [], set()
    for key, steps in grouped.items():
        suite, profile, contrast, metric, point, test = key
        page = ".".join(slug(part) for part in (suite, profile, contrast, metric, point) if part)
        while f"{page}.html" in pages:  # two tests of one contrast, metric and point, or names slug() merged
            page += "_"
        pages.add(f"{page}.html")
        found.append(ClaimTimeline(suite, profile, contrast, metric, point, test, tuple(steps), f"{page}.html"))
    return found


def slug(name: str) -> str:
    """A file name part: its letters, digits, ``_ -``; anything else (``.`` included) becomes ``_``."""
    return _UNSAFE.sub("_", name) or "_"
