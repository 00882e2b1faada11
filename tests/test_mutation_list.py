"""The mutation list stays applicable: a refactor that moves the code a break edits must update the break.

``mutation_check.py`` refuses a stale break when it runs, but it runs by hand (minutes per break); this
keeps the list honest on every test run."""
from __future__ import annotations

import pytest

from mutation_check import BREAKS, ROOT


@pytest.mark.parametrize("one", BREAKS, ids=[b.name for b in BREAKS])
def test_every_break_edits_exactly_one_place_that_exists(one):
    text = (ROOT / one.path).read_text(encoding="utf-8")
    assert text.count(one.old) == 1, f"{one.name}: its text occurs {text.count(one.old)} times in {one.path}"
    assert one.new != one.old


def test_break_names_are_unique():
    names = [b.name for b in BREAKS]
    assert len(names) == len(set(names))
