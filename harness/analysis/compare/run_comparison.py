"""Two runs of one suite side by side (two machines, commits or library versions): what moved.

Per arm, sweep point and metric, the shift is B's mean minus A's with an interval over seeds:
on the seeds both runs have (two at least), each seed's B - A difference is formed first (same seed,
same data and initialisation: only the change under test differs) and the interval is the
Student-t interval of their mean, the seeds only one run has left out and named; with fewer common
seeds the runs are independent samples and the interval is Welch's. Every verdict, validity status and primary claim result that changed comes
first; a changed primary claim is what a CI job asks about ("does our headline survive?"). A claim
is judged on its evidence as the gate judges it (``claim_moves``): a result that changed near its
boundary is listed as such and does not count as changed, an estimate that moved beyond its
tolerance counts even when the result held.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.analysis.compare.claim_moves import claim_evidence, judge, suite_tolerance
from harness.analysis.decide.claims import ClaimResult
from harness.analysis.decide.run_decisions import RunAnalysis, analyse
from harness.analysis.run_results import ResultsError, RunResults, load_results, metric_order
from harness.analysis.stats.paired_stats import Interval, paired_difference, welch_difference
from harness.store import SUITE_FILE, iter_runs, read_json
from harness.suite.stored import StoredSuite, StoredSuiteError

PAIRED = "paired"
UNPAIRED = "Welch"


class CompareError(ValueError):
    """Two result sets that cannot be compared: one line for the user (exit 2)."""


@dataclass(frozen=True)
class Shift:
    """B - A of one metric of one arm at one sweep point."""

    arm: str
    point: str
    key: str
    kind: str
    unit: str
    direction: str
    a_mean: float
    b_mean: float
    a_n: int
    b_n: int
    n: int  # pairs (paired) or the smaller sample (Welch)
    shift: float
    interval: Interval | None
    p_value: float | None
    method: str

    @property
    def relative(self) -> float | None:
        return self.shift / abs(self.a_mean) if self.a_mean else None

    @property
    def moved(self) -> bool | None:
        """The interval excludes zero; None when there are too few seeds for an interval."""
        if self.interval is None:
            return None
        return self.interval.low > 0 or self.interval.high < 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm, "point": self.point, "metric": self.key, "kind": self.kind, "unit": self.unit,
            "direction": self.direction, "a_mean": self.a_mean, "b_mean": self.b_mean, "a_n": self.a_n,
            "b_n": self.b_n, "n": self.n, "shift": self.shift, "relative": self.relative, "method": self.method,
            "ci_low": None if self.interval is None else self.interval.low,
            "ci_high": None if self.interval is None else self.interval.high,
            "p_value": self.p_value, "moved": self.moved,
        }


@dataclass(frozen=True)
class Change:
    """A decision that differs between A and B."""

    what: str  # "primary claim", "validity" or "verdict"
    name: str
    a: str
    b: str
    why: str = ""  # a claim's: how its evidence moved
    near_boundary: bool = False  # a claim's result changed within the tolerance of its boundary: a warning

    @property
    def primary(self) -> bool:
        """A primary claim that changed (exit 1); one that changed near its boundary is only reported."""
        return self.what == "primary claim" and not self.near_boundary


@dataclass(frozen=True)
class Comparison:
    a: RunResults
    b: RunResults
    method: str
    changes: tuple[Change, ...]
    shifts: tuple[Shift, ...]

    @property
    def common_seeds(self) -> list[int]:
        """The seeds a paired comparison reads: those both runs have."""
        return sorted(set(self.a.seeds) & set(self.b.seeds))

    @property
    def left_out(self) -> dict[str, list[int]]:
        """Seeds of one run only ('A', 'B'), left out of a paired comparison; empty for Welch (it reads all)."""
        if self.method != PAIRED:
            return {}
        common = set(self.common_seeds)
        return {side: sorted(set(run.seeds) - common) for side, run in (("A", self.a), ("B", self.b))
                if set(run.seeds) - common}

    @property
    def claim_changed(self) -> bool:
        return any(change.primary for change in self.changes)

    @property
    def confidence(self) -> float:
        return self.b.confidence

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "suite": self.b.suite,
            "a": {"results": str(self.a.run_dir), "profile": self.a.profile, "seeds": self.a.seeds},
            "b": {"results": str(self.b.run_dir), "profile": self.b.profile, "seeds": self.b.seeds},
            "shift": "B - A",
            "method": self.method,
            "left_out_seeds": self.left_out,
            "confidence": self.confidence,
            "claim_changed": self.claim_changed,
            "changes": [{"what": c.what, "name": c.name, "a": c.a, "b": c.b, "why": c.why,
                         "near_boundary": c.near_boundary} for c in self.changes],
            "shifts": [s.as_dict() for s in self.shifts],
        }


def pair_runs(a: Path, b: Path) -> list[tuple[Path, Path]]:
    """Run folders of A and B that hold the same suite: by suite and profile, else by suite."""
    runs_a, runs_b = _runs(a), _runs(b)
    if len(runs_a) == 1 and len(runs_b) == 1:
        (name_a, path_a), (name_b, path_b) = next(iter(runs_a.items())), next(iter(runs_b.items()))
        if name_a[0] != name_b[0]:
            raise CompareError(f"{a} holds suite {name_a[0]!r} and {b} holds suite {name_b[0]!r}: compare needs two runs "
                               "of the same suite")
        return [(path_a, path_b)]
    suites_a, suites_b = {s for s, _ in runs_a}, {s for s, _ in runs_b}
    if suites_a != suites_b:
        raise CompareError(f"{a} holds suites {', '.join(sorted(suites_a))} and {b} holds {', '.join(sorted(suites_b))}: "
                           "compare needs runs of the same suites")
    if runs_a.keys() == runs_b.keys():
        return [(runs_a[key], runs_b[key]) for key in sorted(runs_a)]
    pairs = []
    for suite in sorted(suites_a):
        one_a = [p for (s, _), p in runs_a.items() if s == suite]
        one_b = [p for (s, _), p in runs_b.items() if s == suite]
        if len(one_a) > 1 or len(one_b) > 1:
            raise CompareError(f"suite {suite!r} has runs at several profiles under {a if len(one_a) > 1 else b}; "
                               "give one <suite>/<profile> folder on each side")
        pairs.append((one_a[0], one_b[0]))
    return pairs


def compare_runs(a: RunResults, b: RunResults) -> Comparison:
    """Shifts of every metric both runs report, and every decision that changed."""
    if a.suite != b.suite or a.stored.task != b.stored.task:
        raise CompareError(f"{a.run_dir} ({a.suite}, task {a.stored.task}) and {b.run_dir} ({b.suite}, task "
                           f"{b.stored.task}) are not runs of the same suite")
    common = sorted(set(a.seeds) & set(b.seeds))
    method = PAIRED if len(common) >= 2 else UNPAIRED
    return Comparison(a, b, method, tuple(_changes(analyse(a), analyse(b))),
                      tuple(_shifts(a, b, common if method == PAIRED else None)))


def load_pair(a: Path, b: Path) -> list[Comparison]:
    """Every comparable pair under A and B; CompareError or ResultsError before anything is written."""
    return [compare_runs(load_results(path_a), load_results(path_b)) for path_a, path_b in pair_runs(a, b)]


def claim_result(status: str, validity: str, counts: bool) -> str:
    """A claim's result as a reader takes it: its status, and whether the suite's validity lets it count."""
    return status.upper() if counts else f"{status.upper()} ({validity.upper()}: does not count)"


def _changes(a: RunAnalysis, b: RunAnalysis) -> list[Change]:
    changes = []
    if a.validity.status != b.validity.status:
        changes.append(Change("validity", a.validity.metric or "controls", a.validity.status, b.validity.status))
    claims_a = {_claim_name(c): c for c in a.claims}
    claims_b = {_claim_name(c): c for c in b.claims}
    for name in list(claims_a) + [name for name in claims_b if name not in claims_a]:
        change = _claim_change(name, a, b, claims_a.get(name), claims_b.get(name))
        if change is not None:
            changes.append(change)
    rows_a = {_row_name(r): r.verdict for r in a.rows}
    rows_b = {_row_name(r): r.verdict for r in b.rows}
    changes.extend(_changed("verdict", rows_a, rows_b))
    return changes


def _claim_change(name: str, a: RunAnalysis, b: RunAnalysis, claim_a: ClaimResult | None,
                  claim_b: ClaimResult | None) -> Change | None:
    """A primary claim's change from A to B, judged on its evidence (None: nothing to report)."""
    label_a = _claim_label(a, claim_a)
    label_b = _claim_label(b, claim_b)
    if claim_a is None or claim_b is None:
        return Change("primary claim", name, label_a, label_b)
    spec = b.results.spec_for(claim_b.key)
    gate = b.results.stored.gate
    move = judge(claim_evidence(claim_a, spec.better_sign, label_a), claim_evidence(claim_b, spec.better_sign, label_b),
                 suite_tolerance(gate, claim_b.key, gate.default_tolerance))
    if label_a == label_b and not move.regression:
        return None
    return Change("primary claim", name, label_a, label_b, move.rule, move.near_boundary)


def _claim_label(run: RunAnalysis, claim: ClaimResult | None) -> str:
    if claim is None:
        return "absent"
    return claim_result(claim.status, run.validity.status, run.validity.claims_count)


def _changed(what: str, a: Mapping[str, str], b: Mapping[str, str]) -> list[Change]:
    names = list(a) + [name for name in b if name not in a]
    return [Change(what, name, a.get(name, "absent"), b.get(name, "absent"))
            for name in names if a.get(name) != b.get(name)]


def _claim_name(claim) -> str:
    where = f" @ {claim.point}" if claim.point else ""
    return f"{claim.contrast}{where} {claim.key} {claim.statement}"


def _row_name(row) -> str:
    where = f" @ {row.point}" if row.point else ""
    return f"{row.variant.name}{where} {row.key}"


def _shifts(a: RunResults, b: RunResults, common: list[int] | None) -> list[Shift]:
    """Every metric's shift; paired on ``common`` seeds when given, else Welch over all of each run's."""
    shifts = []
    points = [p for p in a.point_labels() if p in b.point_labels()]
    labels = [label for label in a.arm_labels() if label in b.arm_labels()]
    for point in points:
        for label in labels:
            keys = set(a.metric_keys(label, point)) & set(b.metric_keys(label, point))
            for key in sorted(keys, key=metric_order):
                shift = _shift(a, b, label, point, key, common)
                if shift is not None:
                    shifts.append(shift)
    return shifts


def _shift(a: RunResults, b: RunResults, label: str, point: str, key: str, common: list[int] | None) -> Shift | None:
    values_a, values_b = a.values(label, point, key), b.values(label, point, key)
    if common is not None:
        values_a = {seed: v for seed, v in values_a.items() if seed in common}
        values_b = {seed: v for seed, v in values_b.items() if seed in common}
    if not values_a or not values_b:
        return None
    spec = b.spec_for(key)
    a_mean = sum(values_a.values()) / len(values_a)
    b_mean = sum(values_b.values()) / len(values_b)
    if common is not None:
        difference = paired_difference(values_b, values_a, b.confidence, expected=common)
        if difference is None:
            return None
        interval, p_value, n, shift = difference.interval, difference.estimate.p_value, difference.n, difference.mean_difference
    else:
        welch = welch_difference(list(values_b.values()), list(values_a.values()), b.confidence)
        if welch is None:
            return None
        interval, p_value, n, shift = welch.interval, welch.p_value, min(len(values_a), len(values_b)), welch.mean_difference
    return Shift(label, point, key, spec.kind, spec.unit, spec.direction, a_mean, b_mean, len(values_a), len(values_b),
                 n, shift, interval, p_value, PAIRED if common is not None else UNPAIRED)


def _runs(path: Path) -> dict[tuple[str, str], Path]:
    if not path.exists():
        raise CompareError(f"{path} does not exist")
    found = {}
    for run_dir in iter_runs(path):
        try:
            stored = StoredSuite.read(run_dir / SUITE_FILE, read_json(run_dir / SUITE_FILE))
        except StoredSuiteError as exc:
            raise ResultsError(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{run_dir / SUITE_FILE}: cannot be read ({exc})") from None
        found[(stored.suite or run_dir.parent.name, stored.profile or run_dir.name)] = run_dir
    if not found:
        raise CompareError(f"no stored results under {path} (expected <suite>/<profile>/{SUITE_FILE})")
    return found
