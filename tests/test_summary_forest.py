"""The end-of-run summary, the forest plot and the claim metrics, on results of the toy suite.

The results are written in-process in the toy suite's own format (its resolved suite.json, one
trial JSON per arm x seed x sweep point) with constructed accuracies, so every estimate, interval
and result the summary and the plot must show follows from the construction.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from harness.analysis.decide.run_decisions import analyse
from harness.analysis.present.forest_plots import (
    CLAIMS_FILE,
    COLOURS,
    EXPLORATORY_FILE,
    claim_rows,
    claims_figure,
    exploratory_panels,
    write_forest_plots,
)
from harness.analysis.present.run_plots import build_figures
from harness.analysis.present.run_report import build_report
from harness.analysis.present.run_summary import SuiteSummary, render_summary, render_terminal_summary
from harness.analysis.present.verdict_tables import render_report
from harness.analysis.run_results import load_results
from harness.cli import main
from harness.execution.runner import stored_suite
from harness.execution.trials import expand_trials
from harness.core.record import from_json
from harness.core.stored_fields import as_stored
from harness.store import RunFolder
from harness.suite.loader import load_suites
from harness.tracking.claim_metrics import claim_tags, metric_path, parent_metrics
from harness.tracking.mlflow_tracker import MlflowTracker

TOY = Path(__file__).resolve().parent / "suites" / "toy.yaml"
NOISE = (0.0, 0.004, -0.004)  # per seed, the same in every arm: paired differences are exact
ACCURACY = {"sgd": 0.80, "momentum": 0.82, "slow_lr": 0.60}


def toy_run(root: Path, accuracy: dict[str, float] = ACCURACY, suite_file: Path | None = None,
            spread: dict[str, tuple[float, ...]] | None = None) -> Path:
    """The toy suite's default profile (3 seeds x 2 sweep points x 3 arms) with constructed metrics;
    ``spread``: per arm, a further accuracy per seed (so that paired differences vary)."""
    suite = load_suites(suite_file or TOY)[0]  # TOY read when called: a test may point it elsewhere
    folder = RunFolder(root, suite.name, suite.profile)
    folder.save_suite(as_stored(stored_suite(suite, torch.device("cpu"))))
    for trial in expand_trials(suite):
        features = trial.point["features"]
        metrics = {
            "accuracy": accuracy[trial.arm] + NOISE[trial.seed] + (spread or {}).get(trial.arm, (0.0,) * 3)[trial.seed],
            "loss": 1.0 - accuracy[trial.arm] + NOISE[trial.seed],
            "samples_per_s": 1000.0 + trial.seed,
            "param_bytes": 4.0 * features,
        }
        folder.save_trial(from_json({
            "schema": 1, "trial_id": trial.trial_id, "suite": trial.suite, "profile": trial.profile,
            "task": trial.task, "task_version": trial.task_version, "arm": trial.arm, "arm_label": trial.arm_label,
            "seed": trial.seed, "point": trial.point, "point_label": trial.point_label, "params": trial.params,
            "status": "finished", "error": None, "metrics": metrics, "curves": {}, "details": {},
            "environment": {"device": "cpu"}, "wall_seconds": 2.0,
        }))
    return folder.path


@pytest.fixture
def toy_analysis(tmp_path):
    return analyse(load_results(toy_run(tmp_path)))


def test_summary_gives_validity_and_every_claim_with_its_numbers(toy_analysis):
    text = render_summary([SuiteSummary(toy_analysis, wall_seconds=75.0)])
    lines = text.splitlines()
    assert lines[0] == "## harness summary"
    heading = next(line for line in lines if line.startswith("### toy"))
    assert heading == "### toy (default): validity OK; 3 seeds, wall 1 min 15 s; exploratory"
    rows = [line for line in lines if line.startswith("| momentum-vs-sgd")]
    assert len(rows) == 4  # two claims at two sweep points
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    accuracy = [c for c in cells if c[1] == "accuracy"]
    assert [c[2] for c in accuracy] == ["features=4", "features=8"]
    for contrast, metric, point, test, estimate, result, seeds in accuracy:
        assert test == "non_inferior (margin 0.05)"
        assert estimate.startswith("+0.02 [+0.02, +0.02]")  # 0.82 - 0.80 on every seed: no spread
        assert result == "PASS (superior too)" and seeds == "3"  # +0.02 on every seed: above 0 as well
    assert all(c[3] == "equal" and c[5] == "PASS" for c in cells if c[1] == "param_bytes")
    assert "| contrast" in text and "estimate [95% CI]" in text
    assert lines[-2] == "**The mechanism against its controls:** no suite names its mechanism"
    assert lines[-1] == ("**Totals:** checks (bookkeeping, regimes) 4 PASS, 0 FAIL, 0 INCONCLUSIVE, 0 VACUOUS; "
                         "suites valid 1 of 1; failed trials 0")


def test_an_invalid_suite_names_its_failing_control_and_its_claims_do_not_count(tmp_path):
    analysis = analyse(load_results(toy_run(tmp_path, {"sgd": 0.80, "momentum": 0.82, "slow_lr": 0.90})))
    text = render_summary([SuiteSummary(analysis)])
    heading = next(line for line in text.splitlines() if line.startswith("### toy"))
    assert "validity INVALID: negative control slow_lr beats sgd on accuracy at features=4, features=8" in heading
    assert "trial time 36.0 s" in heading  # rebuilt from stored results: 18 trials of 2 s
    assert "(not counted: invalid)" in text
    assert "checks (bookkeeping, regimes) 0 PASS, 0 FAIL, 0 INCONCLUSIVE, 0 VACUOUS (+4 not counted: suite not " \
        "valid); suites valid 0 of 1" in text


def test_the_terminal_shows_key_rows_and_verdicts_txt_keeps_every_row(tmp_path):
    run_dir = toy_run(tmp_path)
    built = build_report(run_dir)
    assert "samples_per_s" not in built.text and "--verbose prints them" in built.text
    assert "samples_per_s" in render_report(built.analysis, full=True)
    assert "samples_per_s" in (run_dir / "report" / "verdicts.txt").read_text()


def test_claims_figure_draws_each_claim_with_its_interval_margin_and_result(toy_analysis):
    rows = claim_rows(toy_analysis)
    assert [row.label for row in rows] == ["momentum-vs-sgd · accuracy @ features=4",
                                           "momentum-vs-sgd · accuracy @ features=8",
                                           "momentum-vs-sgd · param_bytes @ features=4",
                                           "momentum-vs-sgd · param_bytes @ features=8"]
    accuracy = rows[0]
    assert accuracy.estimate == pytest.approx(0.02) and accuracy.bounds == (-0.05,)  # the margin, worse side
    assert accuracy.result_text == "PASS" and accuracy.colour == COLOURS["pass"] and not accuracy.flipped
    assert "margin 0.05" in accuracy.detail
    figure = claims_figure(toy_analysis)
    strips = figure.axes
    assert len(strips) == 4  # one strip per claim, every sweep point in the one figure
    claim_bar = strips[0].containers[0]
    assert claim_bar.lines[0].get_xdata()[0] == pytest.approx(0.02)
    margins = [list(line.get_xdata()) for line in strips[0].lines if line.get_linestyle() == "--"]
    assert margins == [pytest.approx([-0.05, -0.05])]
    words = [t.get_text() for t in figure.texts]
    assert "PASS" in words and any("better for the treatment" in w for w in words)
    assert "toy (default): primary claims" in words[0]
    panels = {family: rows for family, rows, _ in exploratory_panels(toy_analysis)}
    loss = {row.label: row for row in panels["loss"]}
    assert set(loss) == {f"{c} features={f}" for c in ("momentum-vs-sgd", "sgd-vs-slow_lr") for f in (4, 8)}
    assert loss["momentum-vs-sgd features=4"].estimate == pytest.approx(0.02)  # lower loss is better: signed so
    assert loss["sgd-vs-slow_lr features=8"].estimate == pytest.approx(0.20)
    assert {row.colour for row in loss.values()} == {COLOURS["better"]}
    assert "samples_per_s" not in panels  # not a key metric


def test_a_failing_claim_is_red_and_an_invalid_suite_says_its_claims_do_not_count(tmp_path):
    analysis = analyse(load_results(toy_run(tmp_path, {"sgd": 0.80, "momentum": 0.70, "slow_lr": 0.60})))
    claim = claim_rows(analysis)[0]
    assert claim.result == "fail" and claim.estimate == pytest.approx(-0.10) and claim.bounds == (-0.05,)
    figure = claims_figure(analysis)
    assert figure.axes[0].containers[0].lines[0].get_color() == COLOURS["fail"]
    assert "validity INVALID: the claims do not count" in figure.texts[0].get_text()


def test_forest_plots_are_the_claims_figure_then_the_exploratory_one_first_in_the_report(tmp_path):
    run_dir = toy_run(tmp_path)
    built = build_report(run_dir)
    assert [p.name for p in built.forest_paths] == [CLAIMS_FILE, EXPLORATORY_FILE]
    assert built.artifact_paths[:2] == built.forest_paths
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in built.forest_paths)
    stale = run_dir / "report" / "0-forest_features_16.png"
    stale.write_bytes(b"old")
    assert write_forest_plots(built.analysis, run_dir / "report") == list(built.forest_paths)
    assert not stale.exists()


def test_metric_names_are_stable_and_valid_mlflow_keys():
    assert metric_path("claim", "a-vs-b", "nmse@512", "bank_size=256,chunk=2") == \
        "claim/a-vs-b/nmse_at_512/bank_size_256_chunk_2"
    assert metric_path("contrast", "a-vs-b", "train/loss", "") == "contrast/a-vs-b/train_loss"


def test_claims_and_key_contrasts_are_read_back_from_a_real_store(tmp_path, toy_analysis):
    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=tmp_path / "mlartifacts")
    run_id = tracker.start_parent(toy_analysis.results.stored, {"git_commit": "0" * 40}, "toy/default test")
    forest = write_forest_plots(toy_analysis, tmp_path / "report")
    tracker.finish_parent(run_id, "FINISHED", parent_metrics(toy_analysis), forest, claim_tags(toy_analysis))

    run = tracker.client.get_run(run_id)
    metrics, tags = run.data.metrics, run.data.tags
    claim = "claim/momentum-vs-sgd/accuracy/features_8"
    assert metrics[f"{claim}/estimate"] == pytest.approx(0.02)
    assert metrics[f"{claim}/ci_low"] == pytest.approx(0.02) and metrics[f"{claim}/ci_high"] == pytest.approx(0.02)
    assert 0 <= metrics[f"{claim}/p_value"] <= 0.025
    assert f"{claim}/p_holm" not in metrics  # its differences do not vary: outside the Holm family, no adjusted p
    assert metrics["contrast/sgd-vs-slow_lr/loss/features_4/estimate"] == pytest.approx(-0.20)
    assert not any("samples_per_s" in name for name in metrics)  # a non-key metric
    assert tags["harness.claim/momentum-vs-sgd/accuracy/features_4"] == "PASS (superior too)"
    assert tags["harness.claim/momentum-vs-sgd/param_bytes/features_8"] == "PASS"
    assert tracker.client.list_artifacts(run_id)[0].path == CLAIMS_FILE  # the first artifact


def test_report_markdown_writes_the_printed_summary(tmp_path):
    toy_run(tmp_path / "results")
    out = tmp_path / "summary.md"
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step\n")
    result = CliRunner().invoke(main, ["report", str(tmp_path / "results"), "--markdown", str(out)],
                                env={"GITHUB_STEP_SUMMARY": str(step)})
    assert result.exit_code == 0, result.output
    written = out.read_text()
    assert written.startswith("## harness summary") and "### toy (default): validity OK" in written
    assert result.output.rstrip().endswith(written.rstrip())  # printed last, the same text
    assert step.read_text() == "earlier step\n" + written + "\n"  # appended, the earlier step's kept


@pytest.mark.parametrize("target", ["missing/summary.md", "folder"])
def test_report_markdown_to_an_unwritable_path_is_one_line_and_touches_nothing(tmp_path, target):
    run_dir = toy_run(tmp_path / "results")
    (tmp_path / "folder").mkdir()
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    result = CliRunner().invoke(main, ["report", str(tmp_path / "results"), "--markdown", str(tmp_path / target)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --markdown") and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # no report was even built


def test_summary_of_several_suites_counts_across_them(tmp_path):
    valid = analyse(load_results(toy_run(tmp_path / "a")))
    invalid = analyse(load_results(toy_run(tmp_path / "b", {"sgd": 0.80, "momentum": 0.70, "slow_lr": 0.60})))
    text = render_summary([SuiteSummary(valid, 1.0), SuiteSummary(invalid, 1.0)])
    assert text.count("### toy (default)") == 2
    assert text.splitlines()[-1].startswith("**Totals:** checks (bookkeeping, regimes) 4 PASS, 0 FAIL, 0 INCONCLUSIVE, "
                                            "0 VACUOUS (+4 not counted: suite not valid); suites valid 1 of 2")


def test_figures_comparing_arms_get_a_paired_difference_view(tmp_path):
    run_dir = toy_run(tmp_path)
    figures = {spec.name: spec for spec in build_figures(load_results(run_dir))}
    assert "accuracy_vs_features" in figures  # the per-arm view stays
    paired = figures["accuracy_paired_differences_vs_features"]
    assert paired.zero_line and paired.xlabel == "features"
    lines = {series.label: series for series in paired.series}
    assert set(lines) == {"momentum-vs-sgd", "sgd-vs-slow_lr"}
    assert lines["momentum-vs-sgd"].x == (4.0, 8.0) and lines["momentum-vs-sgd"].y == pytest.approx((0.02, 0.02))
    assert lines["sgd-vs-slow_lr"].y == pytest.approx((0.20, 0.20))
    assert "samples_per_s_paired_differences_vs_features" not in figures  # not a key metric
    assert "accuracy_paired_differences_vs_features.png" in {p.name for p in build_report(run_dir).plot_paths}


def test_five_suites_with_twenty_claims_fit_in_the_last_40_lines(toy_analysis):
    """suites/all.yaml's default profile: 5 suites, 20 claim rows (routing 10, vocab 3, vocab_cldr 3,
    er2 3, er2_mqar 1); the toy suite has 4, so five of it make the same shape."""
    text = render_terminal_summary([SuiteSummary(toy_analysis, 60.0)] * 5)
    lines = text.rstrip("\n").splitlines()
    assert sum("momentum-vs-sgd · " in line for line in lines) == 20
    assert len(lines) <= 39  # and the blank line before it


def test_failed_trials_show_on_the_suite_heading_and_in_the_totals(tmp_path):
    run_dir = toy_run(tmp_path)
    trial = next((run_dir / "trials").glob("*.json"))
    record = json.loads(trial.read_text())
    trial.write_text(json.dumps({**record, "status": "failed", "error": "RuntimeError: boom", "metrics": {}}))
    text = render_summary([SuiteSummary(analyse(load_results(run_dir)), 5.0)])
    assert "; 3 seeds, wall 5.0 s, 1 FAILED trial(s)" in text
    assert text.rstrip().endswith("failed trials 1")
