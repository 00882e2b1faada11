"""Everything a task imports is in its trial id, inside its package or not: a lone helper module beside it,
what that helper imports, another package of the user's and its native sources. Left out: the standard
library, installed distributions (their versions are recorded) and the harness's spine."""
from __future__ import annotations

import importlib
import json
import sys
import uuid
from pathlib import Path

import pytest

from harness import api
from harness.tasks.source import task_code

TASK = '''import json
import torch

import helper_{tag}
from shared_{tag} import scale

from toy_task import ToyTask


class Task(ToyTask):
    def run(self, params, ctx):
        metrics = super().run(params, ctx)
        return {{**metrics, "accuracy": metrics["accuracy"] * scale() + helper_{tag}.OFFSET}}
'''


def write_tree(root: Path, tag: str) -> dict[str, Path]:
    """A task package importing a lone helper file (which imports another) and a package with a C source."""
    files = {
        "task": root / f"task_{tag}" / "__init__.py",
        "helper": root / f"helper_{tag}.py",
        "deeper": root / f"deeper_{tag}.py",
        "shared": root / f"shared_{tag}" / "__init__.py",
        "kernel": root / f"shared_{tag}" / "kernel.c",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    files["task"].write_text(TASK.format(tag=tag))
    files["helper"].write_text(f"from deeper_{tag} import OFFSET\n")
    files["deeper"].write_text("OFFSET = 0.0\n")
    files["shared"].write_text("def scale():\n    return 1.0\n")
    files["kernel"].write_text("int twice(int x) { return 2 * x; }\n")
    return files


@pytest.fixture
def tree(tmp_path, monkeypatch):
    tag = uuid.uuid4().hex[:8]  # module names no other test has imported
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    files = write_tree(tmp_path, tag)
    yield tag, files
    for name in [m for m in sys.modules if m.endswith(tag)]:
        sys.modules.pop(name)
    task_code.cache_clear()


def test_the_hash_covers_helpers_outside_the_package_and_their_native_sources(tree):
    tag, files = tree
    code = task_code(f"task_{tag}")
    hashed = {path.resolve() for path in code.files.values()}
    assert {path.resolve() for path in files.values()} <= hashed
    assert not any("site-packages" in path.parts or path.name == "json" for path in hashed)  # installed, stdlib
    assert not any(path.is_relative_to(Path(importlib.import_module("harness").__file__).parent) for path in hashed)
    for name in ("helper", "deeper", "shared", "kernel"):
        task_code.cache_clear()
        before = task_code(f"task_{tag}").sha256
        files[name].write_text(files[name].read_text() + "\n")
        task_code.cache_clear()
        assert task_code(f"task_{tag}").sha256 != before, f"an edit to the {name} file left the hash unchanged"


def test_a_rerun_after_an_edit_to_a_helper_outside_the_package_reruns_its_trials(tree, tmp_path):
    """The case that reused every trial: the helper changes the metric, so a reused trial reports a stale value."""
    tag, files = tree
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: s\ntask: task_{tag}:Task\nseeds: [0, 1]\nparams: {{steps: 5}}\narms:\n  a: {{}}\n")
    options = api.RunOptions(results=tmp_path / "r", mlflow=False, threads=1, executor="serial")
    assert api.run(suite, options).exit_code == 0
    # another size than the original: an edit within the same second and of the same size would let Python
    # reuse the old file's cached bytecode (it checks only the source's mtime in seconds and its size)
    files["deeper"].write_text("OFFSET = 1.0  # edited\n")
    sys.modules.pop(f"deeper_{tag}", None)
    sys.modules.pop(f"helper_{tag}", None)
    sys.modules.pop(f"task_{tag}", None)
    task_code.cache_clear()
    rerun = api.run(suite, options)
    assert rerun.exit_code == 0 and rerun.suites[0].outcome.ran == 2  # nothing reused
    trials = tmp_path / "r" / "s" / "default" / "trials"
    assert len(list((trials / "superseded").glob("*.json"))) == 2
    accuracy = [json.loads(p.read_text())["metrics"]["accuracy"] for p in trials.glob("*.json")]
    assert all(value >= 1.0 for value in accuracy)  # the edited helper's values, not the stored ones
