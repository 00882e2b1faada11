"""Findings that cite a bundle: one Markdown list item per cited verdict, in a form a machine checks.

    - evidence `toy/1a2b3c4d` `claim/momentum-vs-sgd/accuracy/features_4` **PASS**
    - evidence `toy/1a2b3c4d` `validity` **undetermined**

The first code span names the bundle (``<suite>/<design hash>``: ``evidence/<suite>/<hash>.jsonl.gz``),
the second the verdict as ``harness audit`` and MLflow name it (``claim/<contrast>/<metric>[/<point>]``,
``validity``, ``premise/<name>/<subject>/<metric>[/<point>]``), the bold text its result as
``summary.json`` writes it. A line that starts ``- evidence`` and does not have this form is reported too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.core.files import UnsafeFile
from harness.store import read_regular

FINDINGS_DIR = Path("docs") / "findings"
_START = re.compile(r"^\s*[-*] evidence\b")
_CITATION = re.compile(r"^\s*[-*] evidence `(?P<bundle>[^`/\s]+/[0-9a-f]{8})` `(?P<verdict>[^`]+)` "
                       r"\*\*(?P<result>[^*]+)\*\*\s*$")
_MAX_DOC_BYTES = 4 * 2**20


@dataclass(frozen=True)
class Citation:
    where: str  # docs/findings/<doc>.md:<line>
    bundle: str  # <suite>/<design hash>; '' for a line that is not of the form
    verdict: str
    result: str


def citations(repo: Path) -> list[Citation]:
    """Every citation line in the repository's findings docs (a doc that is a link, not a regular file or
    too large to be one is skipped: it is no finding of this repository)."""
    found = []
    for doc in sorted((repo / FINDINGS_DIR).glob("*.md")):
        try:
            text = read_regular(doc, _MAX_DOC_BYTES).decode("utf-8", errors="replace")
        except (UnsafeFile, OSError):
            continue
        for n, line in enumerate(text.splitlines(), start=1):
            if not _START.match(line):
                continue
            where = f"{(FINDINGS_DIR / doc.name).as_posix()}:{n}"
            match = _CITATION.match(line)
            found.append(Citation(where, match["bundle"], match["verdict"], match["result"].strip()) if match
                         else Citation(where, "", line.strip()[:80], ""))
    return found
