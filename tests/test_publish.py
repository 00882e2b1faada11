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
from test_summary_forest import toy_run

from harness.store import iter_trial_files

HOSTILE = '<script>alert("x")</script> & "quoted"'
VOID = {"meta", "img", "br", "link", "hr", "input"}
COMMITS = ("1" * 40, "2" * 40)


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
        self._caption = False
        self._header: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append(tag)
        if tag == "a":
            self.links.append(attributes.get("href", ""))
        if tag == "img":
            self.images.append(attributes.get("src", ""))
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
        if tag == "caption":
            self._caption = False
        if tag == "thead" and self._header is not None:
            self.headers.append(self._header)
            self._header = None

    def handle_data(self, data):
        self.text.append(data)
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


def run_at(root: Path, commit: str, monkeypatch, description: str = "momentum vs plain SGD") -> Path:
    """The toy suite's constructed run, its trials recorded at ``commit`` on one machine."""
    suite_file = root / "toy.yaml"
    root.mkdir(parents=True, exist_ok=True)
    text = test_summary_forest.TOY.read_text()
    suite_file.write_text(text.replace("description: momentum vs plain SGD on a fixed logistic regression",
                                       f"description: {json.dumps(description)}"))
    monkeypatch.setattr(test_summary_forest, "TOY", suite_file)
    folder = toy_run(root / "results")
    for path in iter_trial_files(folder):
        record = json.loads(path.read_text())
        record["environment"].update(git_commit=commit, device_name="Test CPU", task_code_sha256="c" * 64)
        record["started_at"] = f"2026-0{COMMITS.index(commit) + 1}-01T12:00:00+00:00"
        path.write_text(json.dumps(record))
    return root / "results"


def test_two_runs_at_two_commits_show_each_claim_across_them_on_one_valid_escaped_page(tmp_path, monkeypatch):
    first = run_at(tmp_path / "a", COMMITS[0], monkeypatch, description=HOSTILE)
    second = run_at(tmp_path / "b", COMMITS[1], monkeypatch, description=HOSTILE)
    site = tmp_path / "site"
    outcome = harness_here("publish", str(first), str(second), "--out", str(site))
    assert outcome.returncode == 0, outcome.stderr
    assert "1 suite page(s) from 2 run(s)" in outcome.stdout
    index, page = parsed(site / "index.html"), parsed(site / "toy.html")
    assert "toy.html" in index.links
    for found in (index, page):
        assert "script" not in found.tags  # no script of ours, and none smuggled in by a stored value
        for href in found.links:
            assert (site / unquote(href)).is_file(), href
        for src in found.images:
            assert (site / unquote(src)).read_bytes().startswith(b"\x89PNG"), src
    raw = (site / "toy.html").read_text()
    assert "<script>" not in raw and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quoted&quot;" in raw
    history = next(h for h in page.headers if len(h) > 4 and h[4].startswith("run "))
    assert history[:4] == ["contrast", "metric", "point", "test"]
    assert [h.split(":")[0] for h in history[4:]] == ["run 1", "run 2"]  # one column per run, oldest first
    assert COMMITS[0][:12] in history[4] and COMMITS[1][:12] in history[5]
    text = " ".join(page.text)
    assert "momentum-vs-sgd" in text and "PASS" in text and "c" * 64 in text and "design " in text
    assert len(page.images) == 2  # the latest run's claims figure and its exploratory contrasts
    assert "toy (default): primary claims" in page.captions


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
def test_the_published_page_renders_its_claims_table_and_plots_in_a_real_browser(tmp_path, monkeypatch):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium): the page is checked without a browser only")
    site = tmp_path / "site"
    results = run_at(tmp_path / "a", COMMITS[0], monkeypatch)
    assert harness_here("publish", str(results), "--out", str(site)).returncode == 0
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([browser, *flags, "--dump-dom", (site / "toy.html").as_uri()], capture_output=True,
                         text=True, timeout=hang_guard(120)).stdout
    assert "<caption>toy (default): primary claims</caption>" in dom and "momentum-vs-sgd" in dom
    shot = tmp_path / "page.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1400,3000", (site / "toy.html").as_uri()],
                   capture_output=True, timeout=hang_guard(120))
    from PIL import Image

    with Image.open(shot) as picture:
        colours = picture.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 200  # the forest plots drew (text and tables alone use a few dozen shades)


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
