"""What a reader sees of the claims: the claims figure of every shipped suite lays out cleanly, a
sequential claim shows one interval in every place it is reported, the terminal summary of every
suite fits in 40 lines, MLflow's run name carries the answer, and FUTILE says why in the terminal."""
from __future__ import annotations

import io
import json
import re
import warnings

import pytest
from sealed_runs import sealed_analyses
from test_summary_forest import TOY, toy_run

from harness.analysis.decide.run_decisions import analyse
from harness.analysis.present.claim_interval import shown_interval
from harness.analysis.present.forest_plots import claim_rows, claims_figure, exploratory_figure
from harness.analysis.present.run_summary import SuiteSummary, render_summary, render_terminal_summary
from harness.analysis.present.summary_json import summary_document
from harness.analysis.present.verdict_tables import render_claims
from harness.analysis.run_results import load_results
from harness.analysis.stats.number_format import fmt
from harness.listeners import RunEnd
from harness.publish.runs import published_run
from harness.publish.site import write_site
from harness.tracking.claim_metrics import claim_tags, metric_path, parent_metrics, tracking_tags
from harness.tracking.mirror import RUN_NAME_TAG, MlflowMirror
from harness.tracking.mlflow_tracker import MlflowTracker


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    return sealed_analyses(tmp_path_factory.mktemp("sealed"))


def test_every_shipped_suites_claims_figure_fits_its_texts_and_gives_the_claims_half_its_width(sealed):
    drawn = 0
    for analysis in sealed:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            figure = claims_figure(analysis)
            if figure is None:
                assert not analysis.claims
                continue
            figure.savefig(io.BytesIO(), format="png")  # a layout problem warns while drawing
        suite = analysis.results.suite
        assert not [str(w.message) for w in caught], suite
        renderer = figure.canvas.get_renderer()
        bounds = figure.bbox
        texts = [t for t in figure.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent"))
                 if t.get_visible() and t.get_text().strip()]
        for text in texts:
            box = text.get_window_extent(renderer)
            assert box.x0 >= bounds.x0 - 1 and box.x1 <= bounds.x1 + 1, (suite, text.get_text())
            assert box.y0 >= bounds.y0 - 1 and box.y1 <= bounds.y1 + 1, (suite, text.get_text())
        strips = figure.axes
        assert len(strips) == len(claim_rows(analysis))
        assert all(axes.get_window_extent(renderer).width >= bounds.width / 2 for axes in strips), suite
        assert bounds.height <= 1000, suite  # vocab's five claims included
        exploratory = exploratory_figure(analysis)
        assert exploratory is None or exploratory.bbox.height <= 1200, suite  # capped, however many rows
        words = " ".join(t.get_text() for t in figure.texts)
        assert "right of the solid line: better for" in words  # the figure says which side is better
        for claim in analysis.claims:
            if claim.estimate is not None:
                assert claim.status.upper() in words, (suite, claim.contrast)
        drawn += 1
    assert drawn >= 7  # every suite with claims: routing, routing_needle, vocab, vocab_cldr, er2, er2_passkey, er2_mqar


def test_a_sequential_toy_claim_shows_the_same_interval_and_name_everywhere(tmp_path):
    suite = tmp_path / "toy.yaml"
    suite.write_text(TOY.read_text().replace("seeds: [0, 1, 2]\n", "seeds: [0, 1, 2]\nsequential: {max_seeds: 8}\n"))
    run_dir = toy_run(tmp_path / "results", suite_file=suite, spread={"momentum": (0.01, -0.012, 0.004)})
    analysis = analyse(load_results(run_dir))
    claim = next(c for c in analysis.claims if c.key == "accuracy" and c.point == "features=4")
    shown = shown_interval(claim, analysis.results.confidence)
    assert shown.name == "repeated 95%" and claim.interval is not None
    assert (shown.low, shown.high) != pytest.approx((claim.interval.low, claim.interval.high))  # not the plain t
    figures = f"[{fmt(shown.low, True)}, {fmt(shown.high, True)}]"

    terminal = render_claims(analysis.claims, analysis.validity, analysis.results.confidence)
    (row,) = [line for line in terminal.splitlines() if line.startswith("momentum-vs-sgd  features=4  accuracy")]
    assert figures in row and "repeated 95% CI" in terminal
    summary = render_terminal_summary([SuiteSummary(analysis, 1.0)])
    (row,) = [line for line in summary.splitlines() if "accuracy @ features=4" in line]
    assert figures in row and "estimate [repeated 95% CI]" in summary
    markdown = render_summary([SuiteSummary(analysis, 1.0)])
    (row,) = [line for line in markdown.splitlines() if line.startswith("| momentum-vs-sgd | accuracy    | features=4")]
    assert figures in row and "estimate [repeated 95% CI]" in markdown

    (document,) = [c for c in summary_document(analysis, ())["claims"] if c["key"] == "accuracy"
                   and c["point"] == "features=4"]
    assert document["interval_shown"] == {"name": "repeated 95%", "ci_low": shown.low, "ci_high": shown.high}
    assert (document["ci_low"], document["ci_high"]) == (claim.interval.low, claim.interval.high)  # kept as sealed

    figure = claims_figure(analysis)
    index = [row.label for row in claim_rows(analysis)].index("momentum-vs-sgd · accuracy @ features=4")
    (segment,) = figure.axes[index].containers[0].lines[2][0].get_segments()
    assert [x for x, _ in segment] == pytest.approx([shown.low, shown.high])
    assert "the repeated 95% interval each claim was decided on" in " ".join(t.get_text() for t in figure.texts)

    base = metric_path("claim", claim.contrast, claim.key, claim.point)
    metrics = parent_metrics(analysis)
    assert (metrics[f"{base}/interval_low"], metrics[f"{base}/interval_high"]) == pytest.approx((shown.low, shown.high))
    tag = claim_tags(analysis)[metric_path("harness.interval", claim.contrast, claim.key, claim.point)]
    assert tag == f"repeated 95% {figures}"
    series = metrics["claims/accuracy/ci_low"]
    assert shown.low in series  # the claimed metric's series draws the same interval

    site = tmp_path / "site"
    write_site([published_run(run_dir)], site)
    page = (site / "toy.html").read_text()
    assert f"{fmt(claim.estimate, True)} {figures} repeated 95%" in page
    assert "95% CI]" not in page.replace("repeated 95% CI]", "")  # no column calls it a plain 95% CI


def test_the_terminal_summary_of_every_shipped_suite_fits_in_40_lines_and_answers_in_two(sealed, tmp_path):
    summaries = [SuiteSummary(analysis, 60.0) for analysis in sealed]
    text = render_terminal_summary(summaries)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= 39  # with the blank line printed before it
    assert sum("repeated CI:" in line for line in lines) == 1  # the interval note once
    assert max(len(line) for line in lines) <= 190  # the first column names how the run counts (exploratory, or its registration)
    mechanism, totals = lines[-2:]
    counts = re.fullmatch(r"\*\*The mechanism against its controls:\*\* for (\d+) · against (\d+) · not shown (\d+)",
                          mechanism)
    assert counts
    checks = re.fullmatch(r"\*\*Totals:\*\* checks \(bookkeeping, regimes\) (.*); suites valid (\d+) of (\d+); "
                          r"failed trials 0", totals)
    assert checks and int(checks.group(3)) == len(sealed)
    counted = sum(int(n) for n in re.findall(r"(\d+) [A-Z]", checks.group(1)))
    questions = sum(int(n) for n in counts.groups())
    assert questions + counted == sum(len(a.claims) for a in sealed)  # each claim in one of the two lines
    for analysis in sealed:
        assert f"{analysis.results.suite} ({analysis.results.profile})" in text
    markdown = render_summary(summaries)
    assert markdown.count("repeated CI:") == 1 and markdown.splitlines()[-2] == mechanism


def test_summary_md_links_each_suites_claims_figure(tmp_path):
    from harness.analysis.present.run_report import build_report

    run_dir = toy_run(tmp_path / "results")
    built = build_report(run_dir)
    markdown = render_summary([SuiteSummary(built.analysis, 1.0)])
    assert "claims figure: [0-forest.png](toy/default/report/0-forest.png)" in markdown
    assert (tmp_path / "results" / "toy" / "default" / "report" / "0-forest.png").is_file()


def test_the_suite_runs_name_and_a_tag_give_its_answer(sealed, tmp_path):
    routing = next(a for a in sealed if a.results.suite == "routing")
    tags = tracking_tags(routing)
    assert re.fullmatch(r"for \d+ · against \d+ · not shown \d+", tags["harness.verdict"])

    class Tracker:
        seconds = 0.0
        closed: dict = {}

        def finish_parent(self, run_id, status, metrics, artifacts, tags):
            self.closed = {"status": status, "tags": tags}

    tracker = Tracker()
    mirror = MlflowMirror(tracker)
    mirror.run_id, mirror.name = "parent", "routing/default 2026-01-01 00:00:00"
    mirror.finished(RunEnd(status="FINISHED", analysis=routing, wall_seconds=1.0, failed=0, artifacts=()))
    named = f"routing/default 2026-01-01 00:00:00 · {tags['harness.verdict']}"
    assert tracker.closed["tags"][RUN_NAME_TAG] == named
    store = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", artifact_root=tmp_path / "mlartifacts")
    run_id = store.start_parent(routing.results.stored, {"git_commit": "0" * 40}, mirror.name)
    store.finish_parent(run_id, "FINISHED", {}, (), tracker.closed["tags"])
    assert store.client.get_run(run_id).info.run_name == named  # the runs table shows the renamed run


def test_a_futile_claims_reason_gives_its_conditional_power_and_its_margin(sealed):
    vocab = next(a for a in sealed if a.results.suite == "vocab")
    text = render_claims(vocab.claims, vocab.validity, vocab.results.confidence, "split")
    futile = [line for line in text.splitlines() if "FUTILE" in line]
    assert futile
    for line in futile:
        assert re.search(r"conditional power to pass \d\.\d\d and to fail \d\.\d\d by \d+ seeds", line)
        assert line.rstrip().endswith("margin 0.01")
    document = json.dumps(summary_document(vocab, ()))
    assert "interval_shown" in document
