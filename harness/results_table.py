"""The end-of-run table: arms x key metrics, mean ± sd over seeds, per sweep point."""
from __future__ import annotations

import statistics
from pathlib import Path

from harness.store import load_run
from harness.tasks.base import metric_family
from harness.terminal import format_table, format_value

MAX_COLUMNS = 6


def key_metric_columns(meta: dict, records: list[dict]) -> list[str]:
    """Metric keys to show: those of families marked key, else the first quality metrics."""
    declared = meta.get("metrics", {})
    seen: list[str] = []
    for record in records:
        for key in record.get("metrics", {}):
            if key not in seen:
                seen.append(key)
    keyed = [k for k in seen if declared.get(metric_family(k), {}).get("key")]
    if not keyed:
        keyed = [k for k in seen if declared.get(metric_family(k), {}).get("kind") == "quality"]
    return keyed[:MAX_COLUMNS]


def mean_sd(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return format_value(values[0])
    return f"{format_value(statistics.fmean(values))} ± {format_value(statistics.stdev(values))}"


def arm_table(run_dir: Path) -> str:
    meta, records = load_run(run_dir)
    finished = [r for r in records if r["status"] == "finished"]
    if not finished:
        return "(no finished trials)"
    columns = key_metric_columns(meta, finished)
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in finished:
        groups.setdefault((record["point_label"], record["arm_label"]), []).append(record)
    rows = []
    for (point, label), group in sorted(groups.items()):
        row = [label] + ([point] if point else [])
        row.append(str(len(group)))
        for column in columns:
            row.append(mean_sd([r["metrics"][column] for r in group if r["metrics"].get(column) is not None]))
        rows.append(row)
    has_points = any(point for point, _ in groups)
    header = ["arm"] + (["point"] if has_points else []) + ["seeds"] + columns
    return format_table(header, rows)
