"""The terminal text of a comparison: what changed first, then how far each metric moved."""
from __future__ import annotations

from harness.analysis.compare.environment_diff import environment_differences, package_differences
from harness.analysis.compare.run_comparison import PAIRED, Change, Comparison, Shift
from harness.analysis.run_results import RunResults
from harness.analysis.stats.number_format import fmt
from harness.core.terminal import format_table


def render_comparison(comparison: Comparison, all_metrics: bool) -> str:
    a, b = comparison.a, comparison.b
    parts = [
        f"== {b.suite}: A = {a.run_dir} ({a.profile}, seeds {_seeds(a)})\n"
        f"{' ' * (len(b.suite) + 4)}B = {b.run_dir} ({b.profile}, seeds {_seeds(b)})",
        _environment(a, b),
        _changes(comparison),
        _shifts(comparison, all_metrics),
    ]
    return "\n\n".join(part for part in parts if part)


def _changes(comparison: Comparison) -> str:
    if not comparison.changes:
        return "no verdict, validity status or primary claim changed from A to B"
    ordered = sorted(comparison.changes, key=lambda c: (not c.primary, {"primary claim": 0, "validity": 1}.get(c.what, 2)))
    rows = [[_what(c), c.name, c.a, c.b, c.why] for c in ordered]
    claims = sum(c.primary for c in comparison.changes)
    near = sum(c.near_boundary for c in comparison.changes)
    head = f"{len(comparison.changes)} change(s) from A to B" + (f", {claims} of them PRIMARY CLAIM result(s)" if claims else "")
    head += f", {near} near the boundary (a warning)" if near else ""
    return head + ":\n" + format_table(["what", "name", "A", "B", "why"], rows)


def _what(change: Change) -> str:
    if change.near_boundary:
        return f"{change.what}, near the boundary"
    return change.what.upper() if change.primary else change.what


def _shifts(comparison: Comparison, all_metrics: bool) -> str:
    shifts = [s for s in comparison.shifts
              if all_metrics or comparison.a.is_key_metric(s.key) or comparison.b.is_key_metric(s.key)]
    if not shifts:
        return "no metric reported by both runs"
    with_points = any(s.point for s in shifts)
    ci = f"{100 * comparison.confidence:g}% CI"
    header = ["arm", *(["point"] if with_points else []), "metric", "A", "B", "shift B-A", "rel", ci, "n", "moved"]
    rows = [_row(s, with_points) for s in shifts]
    if comparison.method == PAIRED:
        how = (f"paired by seed on the {len(comparison.common_seeds)} seeds both runs have: Student-t interval of "
               "the mean per-seed shift; n = seeds both finished")
        how += "".join(f"; left out, seeds of {side} only: {', '.join(map(str, seeds))}"
                       for side, seeds in comparison.left_out.items())
    else:
        how = ("fewer than two seeds in common: unpaired Welch t interval of the difference of means; "
               "n = the smaller sample")
    hidden = len(comparison.shifts) - len(shifts)
    note = f"\n({hidden} more non-key metric row(s): --all shows them; all are in the JSON)" if hidden else ""
    return f"shifts, B - A ({how}):\n" + format_table(header, rows) + note


def _row(shift: Shift, with_points: bool) -> list[str]:
    interval = "-" if shift.interval is None else f"[{fmt(shift.interval.low, True)}, {fmt(shift.interval.high, True)}]"
    moved = {True: "YES", False: "no", None: "-"}[shift.moved]
    relative = "-" if shift.relative is None else f"{100 * shift.relative:+.1f}%"
    unit = f" [{shift.unit}]" if shift.unit else ""
    return [shift.arm, *([shift.point or "-"] if with_points else []), f"{shift.key}{unit}", fmt(shift.a_mean),
            fmt(shift.b_mean), fmt(shift.shift, signed=True), relative, interval, str(shift.n), moved]


def _environment(a: RunResults, b: RunResults) -> str:
    """What differs between the runs' recorded environments (commit, packages, device)."""
    records_a = a.finished
    first_b = next(iter(b.finished), None)
    if not records_a or first_b is None:
        return ""
    packages = package_differences(records_a, first_b.packages)
    summarised = {"packages_sha256", "packages_count"} if packages else set()  # each package is listed instead
    env = [d for d in environment_differences(records_a, first_b.environment, {})
           if d.key not in summarised]
    versions = sorted({r.task_version for r in records_a}), sorted({r.task_version for r in b.finished})
    rows = [[d.key, d.recorded, d.here] for d in env]
    if versions[0] != versions[1]:
        rows.append(["task version", " | ".join(versions[0]), " | ".join(versions[1])])
    rows += [[f"package {d.key}", d.recorded, d.here] for d in packages]
    if not rows:
        return "environment: the same commit, packages and device"
    return "environment differences:\n" + format_table(["", "A", "B"], rows)


def run_label(name: str, results: RunResults) -> str:
    """'A: smoke, seeds 0,1' (plot legends)."""
    return f"{name}: {results.profile}, seeds {_seeds(results)}"


def _seeds(results: RunResults) -> str:
    seeds = results.seeds
    return ",".join(map(str, seeds)) if len(seeds) <= 8 else f"{len(seeds)} seeds"
