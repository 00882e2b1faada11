"""The README's toy example runs as written from a checkout and ends with the summary the README shows.

The command is taken from the README itself (the bash block of "Read the output") and run by a shell in
a folder laid out like the repository's root, with the environment's PYTHONPATH emptied: what someone who
copies it gets, not what the test tier's own path would hide.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fault_injection import hang_guard

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration  # a whole run of the toy suite in a subprocess


def _blocks(text: str, heading: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block under the heading, up to the next heading outside a block."""
    lines = text.splitlines()
    blocks, body, language = [], None, ""
    for line in lines[lines.index(f"## {heading}") + 1:]:
        if line.startswith("```"):
            if body is None:
                body, language = [], line[3:]
            else:
                blocks.append((language, "\n".join(body)))
                body = None
        elif body is not None:
            body.append(line)
        elif line.startswith("## "):
            break
    return blocks


def test_the_readmes_toy_example_runs_as_written_and_ends_as_shown(tmp_path):
    blocks = _blocks((REPO / "README.md").read_text(), "Read the output")
    (command,) = [body for language, body in blocks if language == "bash"]
    (shown,) = [body for _, body in blocks if body.startswith("## harness summary")]
    (tmp_path / "tests").symlink_to(REPO / "tests")  # the repository's root, as the README is read from it
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=hang_guard(600))
    assert done.returncode == 0, done.stderr[-3000:]
    ended = done.stdout[done.stdout.index("## harness summary"):].rstrip("\n").splitlines()
    expected = shown.splitlines()
    assert len(ended) == len(expected)
    wall = re.compile(r"\d+(\.\d+)? s\b")  # the only figure that differs between runs
    rule = re.compile(r"─+")  # the table's rule, as wide as its columns (the wall time's digits among them)
    for line, readme in zip(ended, expected):
        assert rule.sub("─", wall.sub("T", line)).split() == rule.sub("─", wall.sub("T", readme)).split()
