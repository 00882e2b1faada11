"""`harness publish`: stored runs as static HTML, checked without a browser (structure, links, escaping)
and, where Chromium is installed, rendered by it."""
from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
import test_summary_forest
from fault_injection import hang_guard, harness_here
from test_evidence import git
from test_summary_forest import ACCURACY, toy_run

from harness.publish.claim_graph import graph_points
from harness.publish.runs import collect_runs
from harness.publish.timeline import REGRESSED, timelines
from harness.store import iter_trial_files

HOSTILE = '<script>alert("x")</script> & "quoted"'
VOID = {"meta", "img", "br", "link", "hr", "input", "col"}


class _Page(HTMLParser):
    """Tags in order, checked to nest; the links, images, tables and text of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.problems: list[str] = []
        self.links: list[str] = []
        self.images: list[str] = []
        self.tags: list[str] = []
        self.captions: list[str] = []
        self.headers: list[list[str]] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []  # each body row's cells, as text
        self.alts: list[str] = []
        self._cell: list[str] | None = None
        self._caption = False
        self._header: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append(tag)
        if tag == "a":
            self.links.append(attributes.get("href", ""))
        if tag == "img":
            self.images.append(attributes.get("src", ""))
            self.alts.append(attributes.get("alt", ""))
        if tag == "tr" and "tbody" in self.open:
            self.rows.append([])
        if tag == "td":
            self._cell = []
        if tag == "caption":
            self._caption = True
        if tag == "thead":
            self._header = []
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
            return
        self.open.pop()
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(" ".join(" ".join(self._cell).split()))
            self._cell = None
        if tag == "caption":
            self._caption = False
        if tag == "thead" and self._header is not None:
            self.headers.append(self._header)
            self._header = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._caption:
            self.captions.append(data)
        if self._header is not None and self.open and self.open[-1] == "th":
            self._header.append(data)


def parsed(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert not page.problems and not page.open, (page.problems, page.open)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    return page


def scratch_repo(root: Path) -> tuple[str, str]:
    """A git checkout with two commits, the second the child of the first: what the runs' commits are."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    commits = []
    for n in (1, 2):
        (root / "code.py").write_text(f"version = {n}\n")
        git(root, "add", "code.py")
        git(root, "commit", "-qm", f"version {n}", when=1_700_000_000 + n)
        commits.append(git(root, "rev-parse", "HEAD"))
    return commits[0], commits[1]


def run_at(root: Path, commit: str, monkeypatch, description: str = "momentum vs plain SGD",
           started: str = "2026-01-01T12:00:00+00:00", accuracy: dict[str, float] = ACCURACY) -> Path:
    """The toy suite's constructed run, its trials recorded at ``commit`` on one machine at ``started``."""
    suite_file = root / "toy.yaml"
    root.mkdir(parents=True, exist_ok=True)
    text = test_summary_forest.TOY.read_text()
    suite_file.write_text(text.replace("description: momentum vs plain SGD on a fixed logistic regression",
                                       f"description: {json.dumps(description)}"))
    monkeypatch.setattr(test_summary_forest, "TOY", suite_file)
    folder = toy_run(root / "results", accuracy=accuracy)
    for path in iter_trial_files(folder):
        record = json.loads(path.read_text())
        record["environment"].update(git_commit=commit, device_name="Test CPU", task_code_sha256="c" * 64)
        record["started_at"] = started
        path.write_text(json.dumps(record))
    return root / "results"


def two_commits(tmp_path: Path, monkeypatch, description: str = "momentum vs plain SGD") -> tuple[Path, list[str]]:
    """The toy suite run at a commit and at its child, the child's run dated earlier (git order is not date
    order) and its momentum worse by 0.01 on every seed (still non-inferior, its estimate below the first
    run's interval): the site published from both, ordered by the scratch checkout's history."""
    first, second = scratch_repo(tmp_path / "repo")
    older = run_at(tmp_path / "a", first, monkeypatch, description, started="2026-02-01T12:00:00+00:00")
    newer = run_at(tmp_path / "b", second, monkeypatch, description, started="2026-01-01T12:00:00+00:00",
                   accuracy={**ACCURACY, "momentum": ACCURACY["momentum"] - 0.01})
    site = tmp_path / "site"
    outcome = harness_here("publish", str(newer), str(older), "--out", str(site), "--repo", str(tmp_path / "repo"))
    assert outcome.returncode == 0, outcome.stderr
    assert "1 suite page(s), 4 claim page(s) from 2 run(s)" in outcome.stdout
    assert "2 regression(s)" in outcome.stdout and "estimate left" in outcome.stdout
    return site, [first, second]


def self_contained(site: Path, page: _Page) -> None:
    """No script, and every link and image a file inside the site: nothing outside it is fetched."""
    assert "script" not in page.tags  # no script of ours, and none smuggled in by a stored value
    for href in page.links:
        assert not href.startswith(("http:", "https:", "//")) and (site / unquote(href).split("#")[0]).is_file(), href
    for src in page.images:
        assert not src.startswith(("http:", "https:", "//"))
        assert (site / unquote(src)).read_bytes().startswith(b"\x89PNG"), src


def test_two_runs_at_two_commits_give_each_claim_a_history_page_and_flag_the_regression(tmp_path, monkeypatch):
    site, (first, second) = two_commits(tmp_path, monkeypatch, description=HOSTILE)
    claim_page = "toy.default.momentum-vs-sgd.accuracy.features_4.html"
    assert sorted(path.name for path in site.glob("*.html")) == [
        "index.html", claim_page, "toy.default.momentum-vs-sgd.accuracy.features_8.html",
        "toy.default.momentum-vs-sgd.param_bytes.features_4.html",
        "toy.default.momentum-vs-sgd.param_bytes.features_8.html", "toy.html"]
    index, suite, claim = (parsed(site / name) for name in ("index.html", "toy.html", claim_page))
    for found in (index, suite, claim):
        self_contained(site, found)
    raw = (site / "toy.html").read_text()
    assert "<script>" not in raw and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#34;quoted&#34;" in raw
    # the index: a fixed set of columns whatever the number of runs, the regressions flagged
    assert index.headers[0] == ["suite (profile)", "claim", "latest result", "estimate [interval]", "trend", "runs"]
    assert [(row[1], row[4]) for row in index.rows[:4]] == [
        ("momentum-vs-sgd · accuracy @ features=4 non_inferior", "regressed"),
        ("momentum-vs-sgd · accuracy @ features=8 non_inferior", "regressed"),
        ("momentum-vs-sgd · param_bytes @ features=4 equal", "steady"),
        ("momentum-vs-sgd · param_bytes @ features=8 equal", "steady")]
    assert all(len(row) == 6 and row[5] == "2" for row in index.rows[:4])
    assert index.rows[0][3] == "+0.01 [+0.01, +0.01] 95%"  # the latest run's estimate and its decided interval
    assert claim_page in index.links and "Regressions" in index.text
    # the claim page: one row and one graph point per run, the parent commit first though its run is dated later
    assert [row[:2] for row in claim.rows] == [["1", first[:12]], ["2", second[:12]]]
    assert [row[3] for row in claim.rows] == ["+0.02 [+0.02, +0.02] 95%", "+0.01 [+0.01, +0.01] 95%"]
    assert claim.rows[0][5].startswith("first run") and claim.rows[1][5].startswith("regressed estimate left")
    assert len(claim.images) == 1 and "across 2 run(s)" in claim.alts[0]
    runs = collect_runs([tmp_path / "b" / "results", tmp_path / "a" / "results"], tmp_path / "repo")
    accuracy = next(t for t in timelines(runs) if t.metric == "accuracy")
    assert [point[:2] for point in graph_points(accuracy)] == [(1, pytest.approx(0.02)), (2, pytest.approx(0.01))]
    assert len(suite.images) == 2  # the latest run's claims figure and its exploratory contrasts
    assert "momentum-vs-sgd" in " ".join(suite.text) and "c" * 64 in " ".join(suite.text)


def test_a_result_worse_than_at_the_parent_commit_is_a_regression(tmp_path, monkeypatch):
    first, second = scratch_repo(tmp_path / "repo")
    runs = [run_at(tmp_path / "a", first, monkeypatch),
            run_at(tmp_path / "b", second, monkeypatch, accuracy={**ACCURACY, "momentum": ACCURACY["momentum"] - 0.12})]
    accuracy = next(t for t in timelines(collect_runs(runs, tmp_path / "repo")) if t.metric == "accuracy")
    assert accuracy.trend == (REGRESSED, f"PASS at {first[:12]} -> FAIL")
    assert accuracy.latest.result.endswith("(not counted: invalid)")  # momentum, the positive control, lost too


def test_runs_whose_commit_the_checkout_does_not_know_keep_their_date_order(tmp_path, monkeypatch):
    first, second = scratch_repo(tmp_path / "repo")
    named = (("a", "f" * 40), ("b", second), ("c", "--output=written"), ("d", first))
    runs = [run_at(tmp_path / name, commit, monkeypatch, started=f"2026-0{n}-01T12:00:00+00:00")
            for n, (name, commit) in enumerate(named, 1)]
    ordered = collect_runs(runs, tmp_path / "repo")
    assert [run.git_commit for run in ordered] == ["f" * 40, first, "", second]  # a stored option never reaches git
    assert not list(tmp_path.rglob("written"))


def test_publish_refuses_what_it_cannot_read_or_write_in_one_line(tmp_path):
    missing = harness_here("publish", str(tmp_path / "nowhere"), "--out", str(tmp_path / "site"))
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert missing.stderr.startswith("error: ") and "does not exist" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = harness_here("publish", str(tmp_path / "empty"), "--out", str(tmp_path / "site"))
    assert empty.returncode == 2 and "no stored results" in empty.stderr
    (tmp_path / "file").write_text("")
    onto_file = harness_here("publish", str(tmp_path / "empty"), "--out", str(tmp_path / "file"))
    assert onto_file.returncode == 2 and "is not a folder" in onto_file.stderr
    assert not (tmp_path / "site").exists()


def _chromium() -> str | None:
    return next((path for name in ("chromium", "chromium-browser", "google-chrome", "headless_shell")
                 if (path := shutil.which(name))), None)


@pytest.mark.integration  # a browser process
def test_chromium_renders_the_index_and_a_claim_page_with_one_graph_point_per_run(tmp_path, monkeypatch):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium): the pages are checked without a browser only")
    site, _ = two_commits(tmp_path, monkeypatch)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files", "--hide-scrollbars"]
    for name in ("index.html", "toy.default.momentum-vs-sgd.accuracy.features_4.html"):
        dom = subprocess.run([browser, *flags, "--dump-dom", (site / name).as_uri()], capture_output=True,
                             text=True, timeout=hang_guard(120)).stdout
        rendered = _Page()
        rendered.feed(dom)
        assert "script" not in rendered.tags, name  # as the browser built it: nothing added a script
        assert not [url for url in rendered.links + rendered.images if url.startswith(("http:", "https:", "//"))]
        if name == "index.html":
            assert [row[4] for row in rendered.rows[:4]] == ["regressed", "regressed", "steady", "steady"]
        else:
            assert len(rendered.rows) == 2 and "across 2 run(s)" in rendered.alts[0]  # a point per run
        shot = tmp_path / f"{name}.png"
        subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1200,900", (site / name).as_uri()],
                       capture_output=True, timeout=hang_guard(120))
        from PIL import Image

        with Image.open(shot) as picture:
            colours = picture.convert("RGB").getcolors(maxcolors=1 << 20) or []
        assert len(colours) > 100, name  # it drew: text, tables and (on the claim page) the graph


def test_a_received_suite_json_naming_dot_dot_writes_nothing_outside_out(tmp_path):
    """Its suite and profile names become paths under --out: they must be plain words, as seal requires."""
    run = toy_run(tmp_path / "results")
    meta = json.loads((run / "suite.json").read_text())
    (run / "suite.json").write_text(json.dumps({**meta, "suite": "..", "profile": ".."}))
    out = tmp_path / "deep" / "er" / "site"
    before = sorted(tmp_path.rglob("*"))
    done = harness_here("publish", str(tmp_path / "results"), "--out", str(out))
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert done.stderr.startswith(f"error: {run}: suite name '..' is not a plain word"), done.stderr
    assert sorted(tmp_path.rglob("*")) == before
