"""The mutation ratchet (tests/mutation_ratchet.py) fails a folder whose score fell, only when mutmut checked
all of it, and raises a committed score but never lowers it."""
from __future__ import annotations

import json

import mutation_ratchet
import pytest


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A mutants/ folder with one module's results and a score file naming it."""
    mutants, score_file = tmp_path / "mutants", tmp_path / "mutation_score.json"
    monkeypatch.setattr(mutation_ratchet, "MUTANTS", mutants)
    monkeypatch.setattr(mutation_ratchet, "SCORE_FILE", score_file)

    def write(results: dict[str, int | None], committed: float) -> None:
        meta = mutants / "harness" / "gating" / "gate.py.meta"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"exit_code_by_key": results}))
        score_file.write_text(json.dumps({"folders": {"harness/gating": {
            "modules": ["harness/gating/gate.py"], "score": committed, "mutants": 4, "killed": 0, "survived": 0}}}))
    return write, score_file


def test_a_score_below_the_committed_one_fails(layout, capsys):
    write, _ = layout
    write({"a": 1, "b": 0, "c": 0, "d": 36}, committed=0.75)  # 2 of 4 killed (a failed test, a timeout)
    assert mutation_ratchet.main([]) == 1
    assert "0.5000 (2 of 4 killed" in capsys.readouterr().out


def test_a_score_at_the_committed_one_passes_and_update_raises_it(layout):
    write, score_file = layout
    write({"a": 1, "b": 1, "c": 3, "d": 0}, committed=0.5)
    assert mutation_ratchet.main(["--update"]) == 0
    assert json.loads(score_file.read_text())["folders"]["harness/gating"]["score"] == 0.75
    write({"a": 1, "b": 0, "c": 0, "d": 0}, committed=0.75)
    assert mutation_ratchet.main(["--update"]) == 1  # a fall is never written down
    assert json.loads(score_file.read_text())["folders"]["harness/gating"]["score"] == 0.75


def test_a_folder_mutmut_has_not_wholly_checked_is_left_alone(layout, capsys):
    write, _ = layout
    write({"a": 0, "b": None, "c": 0, "d": 0}, committed=0.9)
    assert mutation_ratchet.main([]) == 0
    assert "1 of 4 unchecked" in capsys.readouterr().out


def test_no_tests_and_suspicious_mutants_count_as_survivors(layout, capsys):
    write, _ = layout
    write({"a": 1, "b": 33, "c": 35, "d": 1}, committed=0.5)
    assert mutation_ratchet.main(["--survivors"]) == 0
    out = capsys.readouterr().out
    assert "b (exit 33)" in out and "c (exit 35)" in out and "a (exit" not in out
