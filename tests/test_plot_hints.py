"""Plots take every task-specific hint from the metric declarations stored in suite.json:
the qualifier axis, the pairs_with partner and the detail scatters; older suite.json files
without them still load and plot with generic labels."""
from __future__ import annotations

from pathlib import Path

from records import make_record

from harness.analysis.present.run_plots import build_figures
from harness.analysis.run_results import index_results
from harness.suite.stored import StoredSuite

ARMS = {"control": {"labels": ["control"]}, "treat": {"labels": ["treat"]}}


def _results(metrics: dict, **meta_extra):
    meta = {"suite": "hints", "profile": "smoke", "sweep": {}, "arms": ARMS, "metrics": metrics, **meta_extra}
    records = []
    for seed in range(3):
        for arm, lift in (("control", 0.0), ("treat", 0.1)):
            values = {f"recall@{t}": 0.5 + lift - t / 1000 for t in (32, 64, 128)}
            values |= {f"kv_cache_bytes@{t}": 64.0 * t for t in (32, 64, 128)} | {"state_bytes": 900.0 + seed}
            records.append(make_record(f"{arm}-{seed}", arm, seed, metrics=values,
                                       details={"pairs": {"a": [1.0, 2.0, 3.0], "b": [0.5, 0.1, lift]}}))
    return index_results(Path("unused"), StoredSuite.from_stored(meta), records)


def _by_name(results) -> dict:
    return {figure.name: figure for figure in build_figures(results)}


def test_declared_axis_pairing_and_scatter_drive_the_figures() -> None:
    results = _results(
        {"recall": {"direction": "higher", "unit": "accuracy", "kind": "quality", "key": True, "axis": "context (tokens)"},
         "kv_cache_bytes": {"direction": "none", "unit": "bytes", "kind": "memory", "axis": "context (tokens)"},
         "state_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory", "pairs_with": "kv_cache_bytes"}},
        detail_scatters=[{"detail": "pairs", "x_key": "a", "y_key": "b", "title": "b vs a", "xlabel": "a",
                          "ylabel": "b"}],
    )
    assert results.spec_for("recall@64").axis == "context (tokens)"
    figures = _by_name(results)
    assert figures["recall_by_qualifier"].xlabel == "context (tokens)"
    paired = figures["state_bytes_vs_kv_cache_bytes"]
    assert paired.xlabel == "context (tokens)" and len(paired.series) == 3  # two arms and the partner
    assert "kv_cache_bytes_by_qualifier" not in figures  # drawn in the paired figure instead
    assert [len(s.x) for s in figures["pairs"].series] == [9, 9]  # 3 items x 3 seeds per arm


def test_suite_json_without_hints_loads_and_plots_generically() -> None:
    results = _results(
        {"recall": {"direction": "higher", "unit": "accuracy", "kind": "quality", "key": True},
         "kv_cache_bytes": {"direction": "none", "unit": "bytes", "kind": "memory"},
         "state_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"}},
    )
    spec = results.spec_for("state_bytes")
    assert spec.axis == "" and spec.pairs_with is None
    figures = _by_name(results)
    assert figures["recall_by_qualifier"].xlabel == "N in 'recall@N'"
    assert not any("_vs_" in name for name in figures) and "pairs" not in figures


def test_declared_pareto_view_draws_one_point_per_arm() -> None:
    results = _results(
        {"recall": {"direction": "higher", "unit": "accuracy", "kind": "quality", "key": True},
         "state_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"}},
        pareto_views=[{"x": "state_bytes", "y": "recall@64", "title": "recall vs bytes"}],
    )
    figure = _by_name(results)["pareto_recall@64_vs_state_bytes"]
    assert figure.style == "points" and [s.label for s in figure.series] == ["control", "treat"]
    control, treat = figure.series
    assert control.x == (901.0,) and abs(treat.y[0] - control.y[0] - 0.1) < 1e-12  # means over 3 seeds
    assert figure.xlabel.startswith("state_bytes (bytes)")


def test_a_pareto_view_on_a_qualified_family_draws_every_qualifier_in_one_figure() -> None:
    results = _results(
        {"recall": {"direction": "higher", "unit": "accuracy", "kind": "quality", "key": True, "axis": "bindings"},
         "state_bytes": {"direction": "lower", "unit": "bytes", "kind": "memory"}},
        pareto_views=[{"x": "state_bytes", "y": "recall", "title": "recall per load vs bytes"}],
    )
    figures = [figure for figure in build_figures(results) if figure.name.startswith("pareto_")]
    assert [figure.name for figure in figures] == ["pareto_recall_vs_state_bytes"]  # one figure, not one per load
    series = figures[0].series
    assert [s.label for s in series] == ["bindings 32", "bindings 64", "bindings 128"]
    assert all(s.x == (901.0, 901.0) for s in series)  # each arm at its mean bytes
    assert abs(series[2].y[1] - series[2].y[0] - 0.1) < 1e-12 and abs(series[2].y[0] - (0.5 - 0.128)) < 1e-12
