"""The tune: block and its lock, in-process: every bad block is one line at its file:line, a lock made for
the block applies its chosen params (and changes the trial ids), a stale or hand-edited lock is refused,
and a grid's choice is the best mean over the tuning seeds."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from records import make_record

from harness.analysis.decide.tune_grid import score_grid
from harness.execution.trials import expand_trials
from harness.core.record import Status, TrialRecord
from harness.core.stored_fields import as_stored
from harness.store import write_json_atomic
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError
from harness.suite.stored import TunedArm
from harness.suite.tuning_plan import best_point, tune_hash, tuning_suite
from harness.suite.tuning_lock import LOCK_SUFFIX, TuningLock, lock_checksum, lock_path

TOY_TUNE = Path(__file__).resolve().parent / "suites" / "toy_tune.yaml"
SPACE = "space: {lr: [0.001, 0.1, 1.0]}"


def suite_file(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = TOY_TUNE.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "toy_tune.yaml"
    path.write_text(text)
    return path


def line_of(path: Path, fragment: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


@pytest.mark.parametrize("edits, fragment, expected", [
    ((("seeds: [100, 101]", "seeds: [100, 2]"),), "seeds: [100, 2]", "seed 2 is also a confirmatory seed"),
    ((("smoke: {seeds: [0, 1]}", "smoke: {seeds: [101]}"),), "seeds: [100, 101]", "seed 101 is also a confirmatory"),
    ((("claims:", "sequential: {max_seeds: 10}\nclaims:"), ("seeds: [100, 101]", "seeds: [9, 100]")),
     "seeds: [9, 100]", "seed 9 is also a confirmatory seed (of a profile or a sequential design's later looks)"),
    (((SPACE, "space: {lrr: [0.1]}"),), "lrr", "tune.space.lrr: unknown param 'lrr' for task"),
    (((SPACE, "space: {lr: []}"),), "space:", "tune.space.lr: expected a non-empty list of values"),
    (((SPACE, "space: {}"),), "space:", "tune.space: expected a mapping of param -> non-empty list of values"),
    (((SPACE, "space: {lr: [0.1, 1.0]}\n  arm_spaces: {momentum: {lr: [0.1, 0.3, 1.0]}}"),), "space:",
     "tuned arms get grids of different sizes (sgd 2, momentum 3 points"),
    (((SPACE, "space: {lr: [0.1, 0.10]}"),), "space:", "values 0.1 and 0.1 give arm 'sgd' the same params"),
    (((SPACE, "space: {features: [4, 8]}"), ("params: {steps: 60", "sweep: {features: [4, 16]}\nparams: {steps: 60")),
     "space:", "'features' is swept by the suite's sweep"),
    ((("  metric: accuracy\n", "  metric: speed\n"),), "metric: speed", "tune.metric: task 'toy_task:ToyTask' declares no metric"),
    ((("arms: [sgd, momentum]", "arms: [sgd, nope]"),), "arms: [sgd, nope]", "tune.arms[1]: unknown arm 'nope'"),
    ((("arms: [sgd, momentum]", "arms: [slow_lr]"),), "seeds: [100, 101]", "no arm is left to tune"),
])
def test_a_bad_tune_block_is_one_line_at_its_line(tmp_path, edits, fragment, expected):
    path = suite_file(tmp_path, *edits)
    with pytest.raises(SuiteError) as caught:
        load_suites(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line_of(path, fragment)}: ") and expected in message, message
    assert "\n" not in message


def test_unequal_grids_pass_when_the_suite_says_why(tmp_path):
    path = suite_file(tmp_path, (SPACE, "space: {lr: [0.1, 1.0]}\n  arm_spaces: {momentum: {lr: [0.1, 0.3, 1.0]}}\n"
                                        "  unequal_grids: momentum's optimum is known to be sharper"))
    (suite,) = load_suites(path)
    tuning = tuning_suite(suite, suite.tune)
    assert {name: arm.sweep for name, arm in tuning.arms.items()} == {"sgd": {"lr": [0.1, 1.0]},
                                                                       "momentum": {"lr": [0.1, 0.3, 1.0]}}


def test_the_tuning_suite_runs_each_tuned_arm_over_its_grid_on_the_tuning_seeds(tmp_path):
    path = suite_file(tmp_path, ("arms: [sgd, momentum]", "arms: [sgd, momentum, slow_lr]"))
    (suite,) = load_suites(path, profile="smoke")
    tuning = tuning_suite(suite, suite.tune)
    trials = expand_trials(tuning)
    assert tuning.profile == "tune-smoke" and tuning.claims == [] and tuning.contrasts == []
    # slow_lr sets lr itself: it keeps it and runs no grid; each tuned arm runs 3 points x 2 tuning seeds
    assert sorted({(t.arm_label, t.seed) for t in trials}) == sorted(
        (f"{arm}[lr={lr}]", seed) for arm in ("sgd", "momentum") for lr in (0.001, 0.1, 1.0) for seed in (100, 101))
    assert {t.params["lr"] for t in trials if t.arm == "sgd"} == {0.001, 0.1, 1.0}


def grid(chosen: dict, best: float = 0.9, others: float = 0.5) -> list[dict]:
    """The toy grid as a lock records it, with per-seed values that make ``chosen`` the best point."""
    if not chosen:
        return []
    return [{"params": {"lr": lr}, "failed": 0, "values": {seed: best if chosen == {"lr": lr} else others
                                                           for seed in ("100", "101")}}
            for lr in (0.001, 0.1, 1.0)]


def write_lock(suite_path: Path, chosen: dict[str, dict], kept: dict[str, dict] | None = None,
               grids: dict[str, list] | None = None, **changes) -> Path:
    """A lock as `harness tune` writes it for the suite's current tune block (its checksum recomputed, as a
    forger would); each arm's grid values make its ``chosen`` params the best unless ``grids`` says otherwise."""
    (suite,) = load_suites(suite_path, apply_locks=False)
    document = {"schema": TuningLock.stored_schema.version, "suite": suite.name, "tune_hash": tune_hash(suite.tune),
                "seeds": list(suite.tune.seeds), "task_version": suite.task.version,
                "arms": {arm: {"chosen": params, "kept": (kept or {}).get(arm, {}),
                               "grid": (grids or {}).get(arm, grid(params))}
                         for arm, params in chosen.items()}, **changes}
    document["checksum"] = lock_checksum(document)
    write_json_atomic(lock_path(suite_path), document)
    return lock_path(suite_path)


def test_a_lock_gives_tuned_arms_its_params_and_new_trial_ids(tmp_path):
    path = suite_file(tmp_path)
    (hand_set,) = load_suites(path)
    write_lock(path, {"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}})
    (locked,) = load_suites(path)
    params = {t.arm: t.params["lr"] for t in expand_trials(locked)}
    assert params == {"sgd": 1.0, "momentum": 0.1, "slow_lr": 0.001}  # slow_lr is not tuned: its own value
    assert {t.arm: t.params["lr"] for t in expand_trials(hand_set)} == {"sgd": 0.001, "momentum": 0.001, "slow_lr": 0.001}
    def ids(suite, arm: str) -> set[str]:
        return {t.trial_id for t in expand_trials(suite) if t.arm == arm}

    assert ids(locked, "sgd").isdisjoint(ids(hand_set, "sgd")) and ids(locked, "slow_lr") == ids(hand_set, "slow_lr")
    assert as_stored(locked.stored().tuned) == {"lock": "toy_tune.tuned.json", "tune_hash": tune_hash(locked.tune),
                                                "arms": {"sgd": {"params": {"lr": 1.0}, "kept": {}},
                                                         "momentum": {"params": {"lr": 0.1}, "kept": {}}}}
    assert "tuned" not in as_stored(hand_set.stored())  # suites without a lock store what they stored before
    (filtered,) = load_suites(path, arms=["sgd", "slow_lr"])
    assert list(filtered.tuned.arms) == ["sgd"]


def test_an_arm_that_sets_a_tuned_key_keeps_it_and_the_lock_must_say_so(tmp_path):
    path = suite_file(tmp_path, ("arms: [sgd, momentum]", "arms: [sgd, momentum, slow_lr]"))
    write_lock(path, {"sgd": {"lr": 0.1}, "momentum": {"lr": 0.1}, "slow_lr": {}}, kept={"slow_lr": {"lr": 0.001}})
    (suite,) = load_suites(path)
    assert suite.arms["slow_lr"].params["lr"] == 0.001
    assert suite.tuned.arms["slow_lr"] == TunedArm(params={}, kept={"lr": 0.001})
    path.write_text(path.read_text().replace("sgd: {momentum: 0.0}", "sgd: {momentum: 0.0, lr: 0.5}"))
    with pytest.raises(SuiteError, match=r"toy_tune.yaml:7: arms.sgd: the arm now sets lr itself, but "
                                         r"toy_tune.tuned.json was tuned with none kept"):
        load_suites(path)


@pytest.mark.parametrize("change, expected", [
    (lambda path, lock: path.write_text(path.read_text().replace("1.0]}", "2.0]}")),
     r"toy_tune.yaml:16: tune: the lock toy_tune.tuned.json was made for another tune block"),
    (lambda path, lock: lock.write_text(lock.read_text().replace('"lr": 1.0', '"lr": 0.1')),
     r"toy_tune.tuned.json: the lock does not match its checksum \(edited by hand\?\)"),
    (lambda path, lock: lock.write_text("{"), r"toy_tune.tuned.json: not a readable tuning lock"),
    (lambda path, lock: path.write_text(path.read_text().split("tune:")[0] + "profiles:\n  smoke: {seeds: [0, 1]}\n"),
     r"toy_tune.tuned.json: a tuning lock lies beside the suite but .* has no tune: block"),
])
def test_a_stale_or_hand_edited_lock_is_refused(tmp_path, change, expected):
    path = suite_file(tmp_path)
    lock = write_lock(path, {"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}})
    change(path, lock)
    with pytest.raises(SuiteError, match=expected) as caught:
        load_suites(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("chosen, grids, expected", [
    # the control set to its worst grid point, the per-seed values left as they were: the verdict would flip
    ({"sgd": {"lr": 0.001}, "momentum": {"lr": 0.1}}, {"sgd": grid({"lr": 1.0})},
     r"arms.sgd: the lock chose \{\"lr\": 0.001\}, but its own per-seed values give \{\"lr\": 1.0\} by the tune "
     r"block's rule \(the best mean accuracy over tuning seeds 100, 101\); a lock cannot choose for an arm"),
    ({"sgd": {"lr": 1.0, "steps": 400}, "momentum": {"lr": 0.1}}, {"sgd": grid({"lr": 1.0})},
     r"arms.sgd: the chosen params \{\"lr\": 1.0, \"steps\": 400\} are not a point of the arm's grid"),
    ({"sgd": {"lr": 0.5}, "momentum": {"lr": 0.1}}, {"sgd": grid({"lr": 1.0})},
     r"arms.sgd: the chosen params \{\"lr\": 0.5\} are not a point of the arm's grid"),
    ({"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}}, {"sgd": grid({"lr": 1.0})[1:]},
     r"arms.sgd: the lock's grid is not the arm's tuning grid"),
    ({"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}},
     {"sgd": [{**point, "values": {"100": "0.99", "101": 0.5}} for point in grid({"lr": 1.0})]},
     r"arms.sgd.grid\[0\].values.100: expected a finite number or null, got '0.99'; rerun `harness tune "),
    ({"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}},
     {"sgd": [{**point, "failed": 1} if point["params"] == {"lr": 1.0} else point for point in grid({"lr": 1.0})]},
     r"arms.sgd: the lock chose \{\"lr\": 1.0\}, but its own per-seed values give \{\"lr\": 0.001\}"),
    ({"sgd": {"lr": 1.0}}, {}, r"arms.momentum: the chosen params None are not a point of the arm's grid"),
])
def test_a_lock_whose_choice_its_own_values_do_not_give_is_refused(tmp_path, chosen, grids, expected):
    """The checksum is recomputed (as whoever edits a lock would): the choice is checked against the lock's
    own per-seed grid values by the tune block's rule, and against the arm's grid."""
    path = suite_file(tmp_path)
    write_lock(path, chosen, grids=grids)
    with pytest.raises(SuiteError, match=expected) as caught:
        load_suites(path)
    assert "\n" not in str(caught.value)


BEST = {"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}}


@pytest.mark.parametrize("changes, expected", [
    ({"seeds": [100, "101"]}, r"toy_tune.tuned.json: seeds\[1\]: expected an integer, got '101'; rerun `harness tune "),
    ({"seeds": None}, r"toy_tune.tuned.json: seeds: expected a list of integers, got None"),
    ({"arms": ["sgd"]}, r"toy_tune.tuned.json: arms: expected a mapping of arm entries, got \['sgd'\]"),
    ({"arms": {"sgd": {"chosen": {"lr": 1.0}, "kept": [], "grid": []}}}, r"arms.sgd.kept: expected a mapping, got \[\]"),
    ({"arms": {"sgd": {"chosen": {"lr": 1.0}, "grid": [{"params": {"lr": 1.0}, "failed": -1}]}}},
     r"arms.sgd.grid\[0\].failed: expected a count \(an integer >= 0\), got -1"),
    ({"arms": {"sgd": {"chosen": {"lr": 1.0}, "grid": [{"params": {"lr": 1.0}, "values": {"one": 0.5}}]}}},
     r"arms.sgd.grid\[0\].values: expected a mapping of seed -> finite number or null, got \{'one': 0.5\}"),
    ({"arms": {"sgd": {"chosen": {"lr": 1.0}, "grid": "all of it"}}},
     r"arms.sgd.grid: expected a list of grid points or null, got 'all of it'"),
])
def test_a_malformed_lock_is_refused_naming_its_key(tmp_path, changes, expected):
    """Every field of a lock is read through its declared shape: a lock of the wrong shape (its checksum
    recomputed) is refused in one line naming the key and what it must hold."""
    path = suite_file(tmp_path)
    write_lock(path, BEST, **changes)
    with pytest.raises(SuiteError, match=expected) as caught:
        load_suites(path)
    assert "\n" not in str(caught.value)


def test_a_lock_reads_back_as_it_was_written(tmp_path):
    """from_stored and as_stored are inverses: every committed lock (each written by `harness tune`) read and
    written again is the same document, its checksum included; a lock read back from what it writes is itself."""
    locks = sorted((TOY_TUNE.parents[2] / "suites").glob(f"*{LOCK_SUFFIX}"))
    assert locks
    for lock in locks:
        read = TuningLock.read(lock, lock)
        assert read.as_stored() == json.loads(lock.read_text()), lock
        again = tmp_path / lock.name
        write_json_atomic(again, read.as_stored())
        assert TuningLock.read(again, again) == read

def test_a_lock_that_tune_wrote_passes_its_own_check():
    """The committed locks, made by `harness tune`, agree with their recorded values."""
    for name in ("er2", "er2_mqar_rank", "vocab"):
        (suite,) = load_suites(TOY_TUNE.parents[2] / "suites" / f"{name}.yaml")
        assert suite.tuned is not None and suite.tuned.arms


def test_a_lock_tuned_on_another_task_version_is_refused(tmp_path):
    path = suite_file(tmp_path)
    (suite,) = load_suites(path, apply_locks=False)
    write_lock(path, {"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}}, task_version="an older one")
    with pytest.raises(SuiteError, match=rf"toy_tune.tuned.json: stale lock: tuned on task '.*' version "
                                         rf"an older one, the task is now version {suite.task.version}"):
        load_suites(path)


def test_a_run_on_the_tuning_seeds_is_refused(tmp_path):
    path = suite_file(tmp_path)
    write_lock(path, {"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}})
    (suite,) = load_suites(path, apply_locks=False, seeds=[101, 5])  # tuning itself reads no lock
    assert suite.tuned is None
    with pytest.raises(SuiteError, match=r"^--seeds: seed\(s\) 101 tuned the arms in toy_tune.tuned.json"):
        load_suites(path, seeds=[101, 5])


def record(arm: str, lr: float, seed: int, accuracy: float | None, status: Status = Status.FINISHED) -> TrialRecord:
    return make_record(f"{arm}-{lr}-{seed}", arm, seed, params={"lr": lr, "steps": 60}, status=status,
                       metrics={"accuracy": accuracy})


def test_the_choice_is_the_best_mean_over_the_tuning_seeds():
    points = [{"lr": 0.001}, {"lr": 0.1}, {"lr": 1.0}]
    records = [record("sgd", 0.001, 1, 0.9), record("sgd", 0.001, 2, 0.1),  # mean 0.5 despite the best single value
               record("sgd", 0.1, 1, 0.7), record("sgd", 0.1, 2, 0.6),  # mean 0.65: the best
               record("sgd", 1.0, 1, 0.8), record("sgd", 1.0, 2, 0.4),  # mean 0.6
               record("momentum", 0.1, 1, 1.0), record("momentum", 0.1, 2, 1.0)]  # another arm: not counted
    grid = score_grid("sgd", points, records, "accuracy", "higher", [1, 2])
    assert [p.mean for p in grid.points] == pytest.approx([0.5, 0.65, 0.6])
    assert grid.chosen.params == {"lr": 0.1} and grid.chosen.values == {1: 0.7, 2: 0.6}
    assert score_grid("sgd", points, records, "accuracy", "lower", [1, 2]).chosen.params == {"lr": 0.001}


def test_a_grid_point_with_a_failed_or_missing_trial_is_not_chosen():
    points = [{"lr": 0.1}, {"lr": 1.0}]
    records = [record("sgd", 0.1, 1, 0.6), record("sgd", 0.1, 2, 0.6),
               record("sgd", 1.0, 1, 0.99), record("sgd", 1.0, 2, None, Status.FAILED)]
    grid = score_grid("sgd", points, records, "accuracy", "higher", [1, 2])
    assert grid.points[1].mean is None and grid.points[1].failed == 1 and grid.chosen.params == {"lr": 0.1}
    missing = score_grid("sgd", points, records[:3], "accuracy", "higher", [1, 2])  # lr=1.0 lacks seed 2
    assert missing.points[1].mean is None and missing.chosen.params == {"lr": 0.1}
    assert score_grid("sgd", points, [], "accuracy", "higher", [1, 2]).chosen is None


def test_equal_means_keep_the_first_grid_point():
    points = [{"lr": 0.1}, {"lr": 1.0}]
    records = [record("sgd", lr, seed, 0.5) for lr in (0.1, 1.0) for seed in (1, 2)]
    assert score_grid("sgd", points, records, "accuracy", "higher", [1, 2]).chosen.params == {"lr": 0.1}


def test_the_shipped_toy_tune_suite_validates_without_a_lock():
    (suite,) = load_suites(TOY_TUNE)
    assert suite.tuned is None and not lock_path(TOY_TUNE).exists()
    assert suite.tune.seeds == [100, 101] and suite.tune.arms == ["sgd", "momentum"]


@pytest.mark.parametrize("points, chosen, expected", [
    ([{"lr": 0.001}, {"lr": 0.1}, {"lr": 1.0}], {"lr": 1.0}, ["lr=1 is the largest of 0.001, 0.1, 1"]),
    ([{"lr": 0.001}, {"lr": 0.1}, {"lr": 1.0}], {"lr": 0.001}, ["lr=0.001 is the smallest of 0.001, 0.1, 1"]),
    ([{"lr": 0.001}, {"lr": 0.1}, {"lr": 1.0}], {"lr": 0.1}, []),
    ([{"lr": 0.001}, {"lr": 1.0}], {"lr": 1.0}, []),  # two values have no inside: a choice of two settings
    ([{"lr": 0.1, "init": "zero"}, {"lr": 0.2, "init": "one"}, {"lr": 0.3, "init": "two"}],
     {"lr": 0.2, "init": "two"}, []),  # a named setting has no order
    ([{"lr": 0.1, "w": 1}, {"lr": 0.2, "w": 2}, {"lr": 0.3, "w": 3}], {"lr": 0.3, "w": 1},
     ["lr=0.3 is the largest of 0.1, 0.2, 0.3", "w=1 is the smallest of 1, 2, 3"]),
    ([{"flag": True}, {"flag": False}, {"flag": True}], {"flag": True}, []),
])
def test_a_choice_on_the_edge_of_its_grid_is_named_by_axis(points, chosen, expected):
    from harness.analysis.decide.tune_grid import edge_axes
    assert edge_axes(points, chosen) == expected


def test_registering_a_lock_whose_choice_is_on_its_grid_edge_is_refused(tmp_path):
    from harness.evidence.ledger import Ledger, LedgerError
    from harness.evidence.registration import register, tuned_on_edge

    path = suite_file(tmp_path)
    write_lock(path, {"sgd": {"lr": 0.1}, "momentum": {"lr": 0.1}})
    (inside,) = load_suites(path)
    assert tuned_on_edge(inside) == []
    write_lock(path, {"sgd": {"lr": 1.0}, "momentum": {"lr": 0.1}})
    (edge,) = load_suites(path)
    assert tuned_on_edge(edge) == ["sgd: lr=1 is the largest of 0.001, 0.1, 1"]
    ledger = tmp_path / "ledger.jsonl"
    with pytest.raises(LedgerError, match=r"toy_tune.yaml: tune: the lock toy_tune.tuned.json chose points on the edge "
                                          r"of their grids \(sgd: lr=1 is the largest"):
        register(edge, Ledger.read(ledger))
    assert not ledger.exists()  # nothing registered, no seeds drawn


def test_points_tied_at_the_best_give_the_middle_one_so_a_flat_arm_sits_inside_its_grid():
    flat = [0.002, 0.002, 0.002, 0.002]  # a control at chance on every learning rate
    assert best_point(flat, "higher") == 1 and best_point(flat + [0.002], "higher") == 2
    assert best_point([0.5, 0.9, 0.9], "higher") == 1  # the first of two
    assert best_point([0.3, 0.9, 0.1, 0.9, 0.9], "higher") == 3  # only the tied best count, in grid order
    assert best_point([0.3, 0.1, 0.2, 0.1], "lower") == 1 and best_point([0.3, None, 0.2], "lower") == 2
    assert best_point([None, None], "higher") is None and best_point([0.4, 0.7, 0.6], "higher") == 1


@pytest.mark.parametrize("chosen", [{"lr": 0.001}, {"lr": 0.1}, {"lr": 1.0}])
def test_a_lock_may_choose_any_point_tied_at_the_best_but_not_a_worse_one(tmp_path, chosen):
    """Locks written before ties gave the middle point chose the first of equals (sealed studies keep them);
    every point tied at the best is as good a choice, and a point below the tie is still refused."""
    path = suite_file(tmp_path)
    flat = [{**point, "values": {"100": 0.5, "101": 0.5}} for point in grid({"lr": 1.0})]
    write_lock(path, {"sgd": chosen, "momentum": {"lr": 0.1}}, grids={"sgd": flat})
    (suite,) = load_suites(path)
    assert suite.arms["sgd"].params["lr"] == chosen["lr"]
    two_tied = [{**point, "values": {"100": 0.4 if point["params"]["lr"] == 0.001 else 0.5, "101": 0.5}}
                for point in flat]
    write_lock(path, {"sgd": {"lr": 0.001}, "momentum": {"lr": 0.1}}, grids={"sgd": two_tied})
    with pytest.raises(SuiteError, match=r"arms.sgd: the lock chose \{\"lr\": 0.001\}, but its own per-seed values "
                                         r"give \{\"lr\": 0.1\}"):
        load_suites(path)
