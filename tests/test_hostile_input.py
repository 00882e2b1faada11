"""Hostile and mistaken input: each refused before anything runs, as one line and exit code 2.

Duplicates (seeds, sweep values that validate to the same param, arms, YAML keys), sizes (alias
bombs, sweeps that expand past the trial limit, deep nesting), names that become paths, params
outside their declared bounds and bytes that are not UTF-8. Each case goes through the real CLI
(in process) and must finish in well under a second.
"""
from __future__ import annotations

import os
import socket
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError

TOY = """\
suite: toy
task: toy_task:ToyTask
seeds: [0, 1]
params: {steps: 5}
sweep: {features: [4, 8]}
arms:
  sgd: {momentum: 0.0}
  momentum: {momentum: 0.9}
contrasts:
  - {treatment: momentum, control: sgd}
profiles:
  smoke: {seeds: [0], params: {steps: 2}}
"""

ER2 = """\
suite: er2x
task: er2
seeds: [0]
params: {steps: 120}
arms:
  raw: {residual_mode: raw}
"""

# 9 axes x 9 values, all one alias: 9^9 = 387,420,489 arm variants from ~500 bytes of YAML
SWEEP_BOMB = ER2.replace("  raw: {residual_mode: raw}\n", "  raw:\n    sweep:\n      steps: &v [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + "".join(
    f"      {axis}: *v\n"
    for axis in ("batch", "train_pool", "eval_batch", "eval_documents", "teacher.steps", "teacher.batch", "conv_kernel",
                 "feature_dim")
))
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)
CONTRAST_BOMB = TOY.replace("contrasts:\n  - {treatment: momentum, control: sgd}\n", (
    "x: &c0 {treatment: momentum, control: sgd}\n"
    "contrasts: &c1 [*c0, *c0, *c0, *c0, *c0, *c0, *c0, *c0, *c0, *c0]\n"
))
for level in range(2, 7):
    CONTRAST_BOMB += f"y{level}: &c{level} [{', '.join([f'*c{level - 1}'] * 10)}]\n"


def write(tmp_path: Path, text: str | bytes, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result, *fragments: str) -> str:
    """The error line after checking the contract: exit 2, one line on stderr, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        pytest.param(TOY + "seeds: [3]\n", [":13:", "seeds: duplicate key 'seeds' (first at line 3)"], id="duplicate-top-key"),
        pytest.param(TOY.replace("  momentum: {momentum: 0.9}\n", "  momentum: {momentum: 0.9}\n  sgd: {lr: 0.5}\n"),
                     [":9:", "arms.sgd: duplicate key 'sgd' (first at line 7)"], id="duplicate-arm"),
        pytest.param(TOY.replace("{momentum: 0.9}", "{momentum: 0.9, momentum: 0.5}"),
                     [":8:", "duplicate key 'momentum'"], id="duplicate-param-key"),
        pytest.param(TOY.replace("seeds: [0, 1]", "seeds: [0, 1, 0]"), [":3:", "seed 0 is given twice"], id="duplicate-seed"),
        pytest.param(TOY.replace("seeds: [0, 1]", "seeds: [0, '0']"), ["seed 0 is given twice"], id="duplicate-seed-as-text"),
        pytest.param(TOY.replace("seeds: [0, 1]", "seeds: [99999999999999999999]"), ["seed 99999999999999999999 is out of range"],
                     id="seed-too-large"),
        pytest.param(TOY.replace("seeds: [0, 1]", "seeds: [-1]"), ["seed -1 is out of range"], id="negative-seed"),
        pytest.param(TOY.replace("smoke: {seeds: [0]", "smoke: {seeds: [2, 2]"), ["profiles.smoke.seeds", "seed 2 is given twice"],
                     id="duplicate-profile-seed"),
        pytest.param(TOY.replace("[4, 8]", "[4, '4', 4.0]"),
                     [":5:", "sweep.features: values 4 and '4' give arm 'sgd' the same params", "run twice"],
                     id="sweep-values-colliding"),
        pytest.param(TOY.replace("{momentum: 0.9}", "{sweep: {momentum: [0.5, 0.50]}}"),
                     [":8:", "arms.momentum.sweep.momentum: values 0.5 and 0.5"], id="arm-sweep-duplicate"),
        pytest.param(TOY.replace("{momentum: 0.9}", "{sweep: {momentum: 0.9}}"),
                     [":8:", "arms.momentum.sweep.momentum: expected a non-empty list of values, got 0.9"], id="arm-sweep-not-a-list"),
        pytest.param(TOY.replace("{momentum: 0.9}", "{sweep: {momentum: []}}"), ["expected a non-empty list"],
                     id="arm-sweep-empty"),
        pytest.param(TOY.replace("suite: toy", "suite: ../../../escape"), [":1:", "suite name '../../../escape' is not a plain word"],
                     id="suite-name-path"),
        pytest.param(TOY.replace("suite: toy", "suite: mlflow.db"), [":1:", "suite name 'mlflow.db' is reserved"],
                     id="suite-named-like-the-store"),
        pytest.param(TOY.replace("suite: toy", "suite: cache"), [":1:", "suite name 'cache' is reserved"],
                     id="suite-named-like-the-cache"),
        pytest.param(TOY.replace("  smoke:", "  ../../../escape:"),
                     [":12:", "profile name '../../../escape' is not a plain word"], id="profile-name-path"),
        pytest.param(TOY.replace("  sgd: {momentum: 0.0}", "  a/b: {momentum: 0.0}").replace("control: sgd", "control: a/b"),
                     [":7:", "arm name 'a/b' is not a plain word"], id="arm-name-path"),
        pytest.param(TOY.replace("{treatment: momentum, control: sgd}", "{treatment: momentum, control: sgd, name: ../x}"),
                     [":10:", "contrast name '../x'"], id="contrast-name-path"),
        pytest.param(TOY.replace("  - {treatment: momentum, control: sgd}\n", "  - {treatment: momentum, control: sgd}\n" * 2),
                     [":11:", "contrast 'momentum-vs-sgd' is declared twice"], id="duplicate-contrast"),
        pytest.param(ER2.replace("steps: 120", "steps: -5"),
                     [":4:", "arm 'raw': param 'steps': Input should be greater than or equal to 1 (got -5)"], id="er2-negative-steps"),
        pytest.param(ER2.replace("steps: 120", "steps: 120, teacher.num_heads: 4, teacher.num_kv_heads: 3"),
                     [":4:", "teacher.num_heads (4) must be a multiple of teacher.num_kv_heads (3)"], id="er2-inconsistent-heads"),
        pytest.param(ER2.replace("  raw: {residual_mode: raw}", "  raw: {teacher: {probe_layer: 2}}"),
                     [":6:", "teacher.probe_layer (2) must be below teacher.num_layers (2)"], id="er2-probe-layer"),
        pytest.param(ER2.replace("  raw: {residual_mode: raw}", "  raw: {qk_positions: roped}"),
                     [":6:", "param 'qk_positions'", "'rotated' or 'unrotated'"], id="er2-qk-positions-unknown"),
        pytest.param(ER2.replace("params: {steps: 120}", "params: {workload.kind: recall, workload.keys: 16, train_context: 600}\n"
                                 "sweep: {workload.pairs: [8, 256]}"),
                     [":5:", "workload.pairs (256) exceeds workload.keys (16)"], id="er2-recall-bindings-over-keys"),
        pytest.param(ER2.replace("params: {steps: 120}", "params: {workload.kind: recall, workload.keys: 1024, train_context: 256}\n"
                                 "sweep: {workload.pairs: [64, 256]}"),
                     [":7:", "256 recall pairs need contexts of at least 514 tokens"], id="er2-recall-bindings-over-context"),
        pytest.param(ER2.replace("params: {steps: 120}", "params: {workload: {kind: recall, keys: 64}, train_context: 300, "
                                 "eval_multiples: [1], workload.teacher_pairs: [8, 128]}"),
                     [":4:", "workload.teacher_pairs reaches 128 bindings, above workload.keys (64)"],
                     id="er2-teacher-mixture-over-keys"),
        pytest.param(ER2.replace("params: {steps: 120}", "params: {workload.kind: recall, workload.keys: 1024, train_context: 128, "
                                 "eval_multiples: [1], workload.teacher_pairs: [8, 128]}"),
                     [":6:", "workload.teacher_pairs reaches 128 bindings, which need a teacher context of at least 258"],
                     id="er2-teacher-mixture-over-context"),
        pytest.param(ER2.replace("steps: 120", "steps: 50, schedule: converged, decay_steps: 50"),
                     [":6:", "steps (50), the budget of the converged schedule, must exceed decay_steps (50)"],
                     id="er2-converged-cap-below-decay"),
        pytest.param(ER2.replace("steps: 120", "lr: .nan"), ["param 'lr'", "finite number"], id="nan-param"),
        pytest.param(TOY.replace("params: {steps: 5}", "params: {steps: 5, lr: .inf}"), ["param 'lr'", "finite number"],
                     id="inf-param"),
        pytest.param(TOY + "gate: {default_tolerance: .nan}\n", [":13:", "gate.default_tolerance: Input should be a finite number"],
                     id="nan-gate-tolerance"),
        pytest.param(TOY + "gate: {tolerances: {accuracy: .inf}}\n", ["gate.tolerances.accuracy", "finite number"],
                     id="inf-gate-tolerance"),
        pytest.param(TOY + "claims:\n  - {contrast: momentum-vs-sgd, metric: accuracy, test: ratio, min: .nan}\n",
                     [":14:", "claims.0.min: Input should be a finite number"], id="nan-ratio-bound"),
        pytest.param(TOY + "claims:\n  - {contrast: momentum-vs-sgd, metric: accuracy, test: ratio, max: -.inf}\n",
                     ["claims.0.max", "finite number"], id="inf-ratio-bound"),
        pytest.param(TOY.replace("{treatment: momentum, control: sgd}", "{treatment: momentum, control: sgd, margins: {loss: .nan}}"),
                     ["contrasts.0.margins.loss", "finite number"], id="nan-contrast-margin"),
        pytest.param(TOY.replace("[4, 8]", "[4, 8, -1]"), [":5:", "param 'features': Input should be greater than or equal to 1"],
                     id="swept-param-out-of-bounds"),
        pytest.param(SWEEP_BOMB, ["expands to 387,420,489 trials", "above the limit of 10,000", "--max-trials"],
                     id="sweep-alias-bomb"),
        pytest.param(CONTRAST_BOMB, ["YAML nodes (aliases included)", "--max-suite-nodes"], id="contrast-alias-bomb"),
        pytest.param(LAUGHS, [":5:", "e: expands to more than 100,000 YAML nodes"], id="billion-laughs"),
        pytest.param(TOY + "loop: &l [1, *l]\n", [":13:", "an alias refers to itself"], id="recursive-alias"),
        pytest.param(TOY + "sequential: {max_seeds: 8, batch: 99999999999999999999}\n",
                     [":13:", "sequential.batch: Input should be less than or equal to 1000"], id="batch-too-large"),
        pytest.param("a: " + "[" * 500 + "]" * 500 + "\n", [":1:", "malformed YAML: nesting deeper than 50 levels"], id="nesting-500"),
        pytest.param("a: " + "{b: " * 500 + "1" + "}" * 500 + "\n", ["nesting deeper than 50 levels"], id="nesting-500-maps"),
        pytest.param(TOY.encode() + b"description: caf\xe9\n", [":13:", "not UTF-8 text (byte 0xe9"], id="not-utf8"),
        pytest.param(b"\x00\x01garbage", ["malformed YAML"], id="binary"),
        pytest.param(TOY + "---\nsuite: again\n", ["malformed YAML: but found another document"], id="two-documents"),
    ],
)
def test_hostile_suite_files_are_refused_in_one_line(tmp_path, text, fragments):
    path = write(tmp_path, text)
    tracemalloc.start()
    try:
        result = invoke("validate", path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    refused(result, *fragments)
    # the bombs are refused, not expanded: expanding any of them takes gigabytes (a size, not a time,
    # so the check holds on every machine)
    assert peak < 64 * 2**20, f"validation allocated {peak / 2**20:.0f} MiB"


def test_errors_name_the_file(tmp_path):
    path = write(tmp_path, TOY + "seeds: [3]\n")
    assert refused(invoke("validate", path)).startswith(f"error: {path}:13: ")


def test_merge_keys_are_not_duplicates(tmp_path):
    text = TOY.replace("arms:\n  sgd: {momentum: 0.0}", "base: &b {momentum: 0.0, lr: 0.1}\narms:\n  sgd: {<<: *b, momentum: 0.5}")
    with pytest.raises(SuiteError, match="unknown key 'base'"):  # the merge itself loads; only the stray key is refused
        load_suites(write(tmp_path, text))


def test_the_trial_limit_is_overridable(tmp_path):
    path = write(tmp_path, TOY)  # 2 seeds x 2 points x 2 arms = 8 trials
    refused(invoke("validate", path, "--max-trials", 7), "expands to 8 trials (2 seed(s) x 2 sweep point(s) x 2 arm variant(s))",
            "above the limit of 7", "--max-trials")
    ok = invoke("validate", path, "--max-trials", 8)
    assert ok.exit_code == 0 and "8 trials" in ok.output
    refused(invoke("validate", path, "--max-trials", 0), "Invalid value for '--max-trials'")


def test_the_node_limit_is_overridable(tmp_path):
    path = write(tmp_path, TOY)
    refused(invoke("validate", path, "--max-suite-nodes", 20), "expands to more than 20 YAML nodes")
    assert invoke("validate", path, "--max-suite-nodes", 1000).exit_code == 0


def test_a_suite_file_over_a_megabyte_is_refused_before_it_is_parsed(tmp_path):
    path = write(tmp_path, TOY + "description: " + "a" * (1 << 20) + "\n")
    refused(invoke("validate", path), f"{path}: larger than 1,048,576 bytes", "--max-suite-nodes")


def test_a_long_list_is_refused_where_it_crosses_the_node_limit_not_after_it_is_built(tmp_path):
    path = write(tmp_path, "x:\n" + "- 1\n" * 5000)  # the root, x and the list are nodes 1-3: item 998 is node 1,001
    refused(invoke("validate", path, "--max-suite-nodes", 1000), f"{path}:999: expands to more than 1,000 YAML nodes")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_suite_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "suite.yaml"
        os.mkfifo(path)  # reading it would wait for a writer forever
    else:
        path = Path("/dev/zero") if kind == "device" else tmp_path  # /dev/zero would fill the memory
    refused(invoke("validate", path), f"{path}: not a regular file")


def test_a_file_included_twice_is_refused_at_once(tmp_path):
    write(tmp_path, TOY, "a.yaml")
    write(tmp_path, "include: [a.yaml]\n", "b.yaml")
    path = write(tmp_path, "include: [b.yaml, " + ", ".join(["b.yaml"] * 50) + "]\n", "all.yaml")
    refused(invoke("validate", path), "b.yaml: included more than once")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--seeds", "0,0"], ["Invalid value for '--seeds': seed 0 is given twice"]),
        (["--seeds", "99999999999999999999"], ["seed 99999999999999999999 is out of range", "2**63"]),
        (["--seeds", "-1"], ["seed -1 is out of range"]),
        (["--seeds", "one"], ["expected comma-separated integers"]),
        (["--seeds", ","], ["no seeds given"]),
        (["--arms", ""], ["Invalid value for '--arms': no arm names given"]),
        (["--arms", " , "], ["no arm names given"]),
        (["--arms", "sgd,sgd"], ["arm(s) given twice: sgd"]),
        (["--arms", "adam"], ["--arms: unknown arm(s) adam"]),
        (["--profile", "../../../escape"], ["unknown profile '../../../escape'"]),
        (["--max-trials", "3"], ["above the limit of 3"]),
        (["--trial-timeout", "0"], ["Invalid value for '--trial-timeout'"]),
        (["--trial-timeout", "nan"], ["Invalid value for '--trial-timeout'"]),
    ],
)
def test_bad_run_options_are_refused_before_anything_runs(tmp_path, args, fragments):
    results = tmp_path / "results"
    result = invoke("run", write(tmp_path, TOY), "--results", results, "--no-mlflow", *args)
    refused(result, *fragments)
    assert not results.exists()


@pytest.mark.parametrize(
    ("profile", "fragments"),
    [
        ("keys", [":9:", "workload.pairs (256) exceeds workload.keys (64)"]),
        ("feeding", [":11:", "param 'qk_positions'", "'rotated' or 'unrotated'"]),
    ],
)
def test_an_mqar_size_or_feeding_the_layer_cannot_take_is_refused_by_run(tmp_path, profile, fragments):
    """``harness run`` refuses what ``validate`` does, for the profile asked for, before any trial."""
    text = ER2.replace("params: {steps: 120}", "params: {workload.kind: recall, workload.keys: 64, train_context: 600}") + (
        "profiles:\n"
        "  keys:\n"
        "    sweep: {workload.pairs: [8, 256]}\n"
        "  feeding:\n"
        "    params: {qk_positions: sideways}\n"
    )
    results = tmp_path / "results"
    refused(invoke("run", write(tmp_path, text), "--profile", profile, "--results", results, "--no-mlflow"), *fragments)
    assert not results.exists()


def test_click_usage_errors_are_one_line_too(tmp_path):
    refused(invoke("run"), "Missing argument 'SUITE.yaml'", "--help")
    refused(invoke("nosuch"), "No such command 'nosuch'")
    refused(invoke("ui", "--port", "70000"), "Invalid value for '--port': 70000 is not in the range 1<=x<=65535")
    refused(invoke("ui", "--port", "0"), "Invalid value for '--port'")


@pytest.mark.timeout(120)  # a hang guard: the loser of a port must not wait for it
def test_ui_on_a_busy_port_fails_at_once(tmp_path):
    import socket

    results = tmp_path / "results"
    results.mkdir()
    (results / "mlflow.db").touch()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = invoke("ui", "--results", results, "--port", port)  # hang guard: the test's timeout marker
    refused(result, f"cannot serve on 127.0.0.1:{port} (port in use); pick another port with --port")


def test_list_shows_each_params_bounds():
    result = invoke("list")
    assert result.exit_code == 0
    assert "    steps = 120  [>= 1]" in result.output and "chunk_size = 32  [>= 1, <= 32]" in result.output


def test_an_arm_sweep_shadowed_by_the_suite_sweep_is_refused(tmp_path):
    path = write(tmp_path, TOY.replace("{momentum: 0.9}", "{sweep: {features: [2, 3]}}"))
    refused(invoke("validate", path), ":8:", "arms.momentum.sweep.features: 'features' is also swept by the suite's sweep")


def test_credentials_in_the_tracking_uri_are_never_printed(tmp_path):
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke("run", write(tmp_path, TOY), "--results", tmp_path / "results",
                    "--tracking-uri", f"http://alice:hunter2@127.0.0.1:{port}")
    refused(result, f"http://***@127.0.0.1:{port} is unreachable")
    assert "hunter2" not in result.output


def test_list_shows_each_choice_params_choices():
    result = invoke("list", "er2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "    residual_mode = 'compressed'  [one of 'none', 'raw', 'compressed']" in lines
    assert any(line.startswith("    residual_gate = ") and line.endswith("[one of 'learned', 'one', None]")
               for line in lines), result.output
    assert not any(line.startswith("    workload.kind = ") and "one of" in line for line in lines)  # a tag
