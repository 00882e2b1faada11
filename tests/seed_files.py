"""Load a research seed from ../shared/seeds with only its import lines rewritten.

The seeds are specifications, not project code: tests read them where they lie (beside the
checkout, or HARNESS_SEEDS_DIR) and skip with the reason when they are not there.
"""
from __future__ import annotations

import os
import sys
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

import pytest


def seeds_dir() -> Path:
    root = os.environ.get("HARNESS_SEEDS_DIR")
    return Path(root) if root else Path(__file__).resolve().parents[2] / "shared" / "seeds"


@contextmanager
def seed_module(filename: str, rewrites: Mapping[str, str] | None = None) -> Iterator[types.ModuleType]:
    """Execute the seed as a module named after it; each rewrite must match exactly once."""
    path = seeds_dir() / filename
    if not path.is_file():
        pytest.skip(f"research seed not found at {path} (set HARNESS_SEEDS_DIR to the seeds folder)")
    source = path.read_text(encoding="utf-8")
    for old, new in (rewrites or {}).items():
        assert source.count(old) == 1, f"seed import line {old!r} not found exactly once in {path}"
        source = source.replace(old, new)
    module = types.ModuleType(f"seed_{path.stem}")
    sys.modules[module.__name__] = module  # dataclasses look their module up while a class is built
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]
