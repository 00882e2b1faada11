"""A metric is declared by keyword and checked when made: a misspelt direction or kind is refused, and
a task module that declares one, or a stored suite edited to hold one, fails in one line naming it."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from records import make_record

from harness.cli import main
from harness.core.metrics import Metric
from harness.core.stored_fields import as_stored
from harness.store import RunFolder
from harness.tasks import UnknownTaskError, load_task

MISSPELT_TASK = '''
from harness.tasks import Metric, Task, TaskParams


class MisspeltTask(Task):
    name = "misspelt"
    version = "1"
    Params = TaskParams
    metrics = (Metric(name="score", direction="higher", unit="points", kind="qualty"),)

    def run(self, params, ctx):
        return {"score": 1.0}
'''


def test_a_metric_is_declared_by_keyword() -> None:
    with pytest.raises(TypeError):
        Metric("score", "higher", "points", "quality")  # type: ignore[misc]
    declared = Metric(name="score", direction="higher", unit="points", kind="quality")
    assert (declared.direction, declared.kind, declared.better_sign) == ("higher", "quality", 1)


@pytest.mark.parametrize("field, fields", [
    ("kind", {"direction": "higher", "kind": "qualty"}),
    ("direction", {"direction": "up", "kind": "quality"}),
])
def test_a_misspelt_direction_or_kind_is_refused_naming_it(field: str, fields: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=f"metric 'score': {field} '{fields[field]}' is not one of"):
        Metric(name="score", unit="points", **fields)  # type: ignore[arg-type]


def test_a_stored_declaration_reads_back_equal() -> None:
    declared = Metric(name="nmse", direction="lower", unit="", kind="quality", key=True, axis="context (tokens)")
    assert Metric.from_stored("nmse", as_stored(declared)) == declared


def test_a_task_declaring_a_misspelt_kind_fails_to_load_in_one_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "misspelt_task.py").write_text(MISSPELT_TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownTaskError, match="kind 'qualty' is not one of quality, speed, memory, info"):
        load_task("misspelt_task:MisspeltTask")
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: misspelt\ntask: misspelt_task:MisspeltTask\nseeds: [0]\narms:\n  control: {}\n")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "kind 'qualty'" in result.output


def test_a_stored_suite_whose_metric_kind_was_edited_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "edited", "default")
    folder.save_suite({"suite": "edited", "profile": "default", "seeds": [0],
                       "metrics": {"score": {"direction": "higher", "unit": "", "kind": "qualty"}}})
    folder.save_trial(make_record("t1", metrics={"score": 1.0}))
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "suite.json" in result.output and "kind 'qualty' is not one of" in result.output
