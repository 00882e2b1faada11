"""Small things a newcomer trips on: `harness list TASK`, the scaffold's `[test]` extra, the
one-claim-per-contrast-and-metric rule said as a design rule, and one number format per column."""
from __future__ import annotations

from click.testing import CliRunner

from harness.cli import main
from harness.core.terminal import format_value

CLAIMS = ("suite: twice\ntask: toy_task:ToyTask\nseeds: [0, 1]\narms:\n  sgd: {}\n  momentum: {momentum: 0.9}\n"
          "contrasts:\n  - {treatment: momentum, control: sgd}\nclaims:\n"
          "  - {contrast: momentum-vs-sgd, metric: accuracy, test: superior}\n"
          "  - {contrast: momentum-vs-sgd, metric: accuracy, test: superior, margin: 0.01}\n")


def test_list_takes_task_names_and_refuses_an_unknown_one_in_one_line():
    one = CliRunner().invoke(main, ["list", "routing"])
    assert one.exit_code == 0, one.output
    headings = [line.split("  (v")[0] for line in one.output.splitlines() if "  (v" in line]
    assert headings == ["routing"]
    both = CliRunner().invoke(main, ["list", "vocab", "routing"])
    assert [line.split("  (v")[0] for line in both.output.splitlines() if "  (v" in line] == ["vocab", "routing"]
    unknown = CliRunner().invoke(main, ["list", "routng"])
    assert unknown.exit_code == 2 and unknown.output.count("\n") == 1
    assert unknown.output.startswith("error: no registered task 'routng'; registered: ") and "routing" in unknown.output


def test_the_scaffold_readme_installs_the_test_extra(tmp_path):
    done = CliRunner().invoke(main, ["new-task", "extra_demo", "--out", str(tmp_path / "demo")])
    assert done.exit_code == 0, done.output
    assert "pip install -e '.[test]'" in (tmp_path / "demo" / "README.md").read_text()
    assert 'test = ["pytest' in (tmp_path / "demo" / "pyproject.toml").read_text()


def test_a_second_claim_on_a_contrast_and_metric_is_refused_as_a_design_rule(tmp_path):
    suite = tmp_path / "twice.yaml"
    suite.write_text(CLAIMS)
    refused = CliRunner().invoke(main, ["validate", str(suite)])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1
    assert "a design makes one claim per contrast and metric" in refused.output and "MLflow" not in refused.output


def test_large_values_keep_one_format_in_a_column():
    assert [format_value(v) for v in (94_472.0, 497_012.0, 12_345_678.4)] == ["94,472", "497,012", "12,345,678"]
    assert format_value(0.5) == "0.5" and format_value(2e-5) == "2e-05" and format_value(3.2e16) == "3.2e+16"
