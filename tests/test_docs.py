"""The README is a manual a newcomer reads in one sitting, and every page it and docs/ point to exists:
a moved or renamed page must not leave a dead link behind. History (issue numbers, commit hashes,
dates) belongs in git and in the findings pages, not in the manual."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]
MAX_README_LINES = 250

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def relative_links(page: Path) -> list[str]:
    """Link targets outside code blocks that point into the repository (not a URL, not an anchor alone)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchor per heading: lower case, punctuation dropped, spaces as hyphens, -N for repeats."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", markdown), re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def anchors_of(page: Path) -> set[str]:
    return heading_anchors(page.read_text(encoding="utf-8"))


def test_readme_is_a_short_manual() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move reference text to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_file():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(REPO)}: " + ", ".join(broken)


@pytest.mark.parametrize("page", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_manual_carries_no_history(page: Path) -> None:
    """The README and the reference pages (findings pages keep their provenance); code examples aside."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = (
        re.findall(r"\bissues? +#?\d+", text, re.I)
        + re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
        + re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)
    )
    assert not found, f"{page.name} names issues, dates or commits: {found}"


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's tox command is the one `.ci/run` runs, step by step (CI's only quiet flag aside)."""
    readme = README.read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.rstrip().endswith(".venv/bin/tox"))
    ci_steps = [
        " ".join(line.split("#")[0].replace("--quiet", "").split())
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ]
    steps = [" ".join(step.split()) for step in command.split("&&")]
    positions = [ci_steps.index(step) for step in steps]
    assert positions == sorted(positions)


def test_heading_anchors_follow_github() -> None:
    """The anchor rule the link check relies on, on headings whose GitHub anchors are known."""
    markdown = (
        "# Use it\n## Tuning every arm the same way: `harness tune`\n"
        "### Task v6 (issue 28): a **recipe**\n## Use it\n"
    )
    assert heading_anchors(markdown) == {
        "use-it", "tuning-every-arm-the-same-way-harness-tune", "task-v6-issue-28-a-recipe", "use-it-1",
    }


def test_the_guides_give_the_baselines_the_thread_count_ci_runs_them_at():
    """A gated run must use its baseline's thread count (float results depend on it): the guides' ci
    commands and their word for the shipped baselines' count are the one `.ci/run` runs at."""
    ci = (REPO / ".ci" / "run").read_text()
    (threads,) = set(re.findall(r"--profile ci [^\n]*--threads (\d+)", ci))
    for page in (REPO / "docs" / "new-task.md", REPO / "docs" / "executors.md"):
        text = page.read_text()
        assert set(re.findall(r"--profile ci [^\n]*--threads (\d+)", text)) <= {threads}, page
        said = re.findall(r"baselines?'s? count\s+\((\d+)", text)
        assert said and set(said) == {threads}, (page, said)
        assert "--executor serial --threads 1" in text, page  # how to keep to one core
