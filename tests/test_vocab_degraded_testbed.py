"""Every premise and validity control of the vocab suites can fail: on a testbed degraded in the one way
it guards against, the decision code reads it failing, and on the healthy testbed it holds.

The trials run the suite's own arms (their tuned lr from the lock beside vocab.yaml) at its smoke profile,
on seeds outside every confirmatory, pilot and tuning seed of the vocab suites, but on the workload at
the task's default size (20,000 training pairs, 300 test pairs per language pair): the ceilings were
declared from the cues at that size (vocab.yaml's design notes), and at the smoke profile's 2,000 pairs
the counts are too sparse for either shortcut below to reach its bound even when planted. The decision
code reads them as `harness run --profile smoke --seeds ...` would (a fixed design at these seeds).

- ``alignment_ceiling``: a workload whose languages never write a synonym in place of a shared form
  (``synonym_rate`` 0), so a cognate is always translated by itself and the alignment count finds the
  false friends;
- ``frequency_ceiling``: concepts in a contested pair drawn 20x as often (``false_friend_boost`` 20; task
  v6 planted 2x, but partial false friends now put most concepts in some contested pair, so it takes more),
  so the frequency count finds them;
- ``language_count_ceiling``: no param degrades it. The workload draws how many languages use a shared
  form independently of its kind (the fix of task v7, tests/test_vocab_workloads.py), so no param ties
  contestedness to the language count; its failing side is shown on synthetic per-seed figures only;
- ``equal_budget_*``: the mechanism's arm trained one step where the index it is claimed against trained two
  (these premises read only the count, so their trials train a step or two);
- validity (``oracle_k`` over ``shared`` on contested acc@1): a budget of one private row
  (``index_size`` 1), too small for any index, the planted truth's included, to move contested accuracy:
  the testbed where every same-budget contrast measures nothing.

vocab_cldr.yaml and vocab_gettext.yaml declare no premises, only a validity row (their proxy oracle over
the shared table). At their smoke size the contested minimal-pair pools hold 1-17 queries a seed, too few
for the proxy oracle to beat the shared table (checked by hand on two seeds: cldr 0.0 and 0.0, gettext
-0.15 and +0.03 contested acc@1), and
their default size (6 locales, two folds, 300 steps) costs minutes a seed: their rows are read on
synthetic per-seed figures, with the same degradation (no lead over the control) as vocab's real one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pytest
from records import make_record

from harness.analysis.decide.claims import last_look_premises
from harness.analysis.decide.premises import FAILS, HOLDS, PremiseResult
from harness.analysis.decide.verdicts import VALID, Validity, evaluate_validity
from harness.analysis.run_results import RunResults, index_results
from harness.core.record import TrialRecord
from harness.execution.executor import run_single
from harness.execution.runner import with_declarations
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import Suite
from harness.tasks.param_paths import layered
from harness.tasks.vocab.task import SyntheticWorkload

SUITES = Path(__file__).resolve().parents[1] / "suites"
VOCAB = SUITES / "vocab.yaml"
SEEDS = (7301, 7302, 7303)  # outside every confirmatory, pilot and tuning seed of the vocab suites
SYNTHETIC_SEEDS = (*SEEDS, 7304)  # the seeds of the synthetic per-seed figures
CEILINGS = ("alignment_ceiling", "frequency_ceiling", "language_count_ceiling")
DEFAULT_SIZE = {f"workload.{name}": SyntheticWorkload.model_fields[name].default
                for name in ("train_pairs", "test_pairs")}
# What no premise or control here reads: the timings, and the interference scores, which feed only the
# mechanism's index (its arm trains for the budget premises alone), measured on 4 batches of the initial
# table without the warm-up.
UNREAD = {"throughput.measure": False, "interference_steps": 0, "interference_batches": 4}
CUES = ("frequency_auroc", "language_count_auroc", "alignment_auroc")


def _suite(path: Path, seeds: Iterable[int]) -> Suite:
    """The suite at its smoke profile on exactly ``seeds`` (a fixed design, as ``--seeds`` makes it)."""
    (suite,) = load_suites(path, profile="smoke", seeds=list(seeds))
    return suite


def _premise(suite: Suite, name: str) -> dict[str, Any]:
    (premise,) = [p for p in suite.premises if p.name == name]
    return premise.model_dump(exclude_none=True)


def _run(suite: Suite, arm: str, seed: int, root: Path, **change: Any) -> TrialRecord:
    """One trial of ``arm`` on the testbed with ``change``; trials under one ``root`` share a seed's data."""
    params = layered(suite.params, DEFAULT_SIZE, UNREAD, suite.arms[arm].params, change)
    record = run_single(suite.task, params, seed=seed, work_root=root, arm=arm)
    assert record.finished, record.error
    return record


def _results(suite: Suite, records: Iterable[TrialRecord]) -> RunResults:
    """``records`` read as a run of ``suite`` stores them (its premises and validity, the task's metrics)."""
    return index_results(Path("."), with_declarations(suite.stored(), suite.task), list(records))


def _reading(suite: Suite, records: Iterable[TrialRecord], name: str) -> PremiseResult:
    (result,) = [p for p in last_look_premises(_results(suite, records)) if p.name == name]
    return result


def _synthetic(arms: dict[str, dict[str, list[float]]]) -> list[TrialRecord]:
    """Finished trials of these per-seed figures, one a seed of SYNTHETIC_SEEDS."""
    return [make_record(f"{arm}-{seed}", arm, seed, metrics={metric: values[i] for metric, values in by_metric.items()})
            for arm, by_metric in arms.items() for i, seed in enumerate(SYNTHETIC_SEEDS)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vocab-testbed")


@pytest.fixture(scope="module")
def suite() -> Suite:
    return _suite(VOCAB, SEEDS)


@pytest.fixture(scope="module")
def healthy(suite: Suite, root: Path) -> list[TrialRecord]:
    """The control and the positive control on the suite's testbed."""
    return [_run(suite, arm, seed, root) for seed in SEEDS for arm in ("shared", "oracle_k")]


@pytest.mark.integration  # trains embedders
def test_the_figures_the_ceilings_bound_are_the_datas_not_an_arms(suite: Suite, healthy: list[TrialRecord]) -> None:
    assert all(_premise(suite, name)["arm"] != suite.mechanism for name in CEILINGS)
    cues = {(record.arm, record.seed): [record.metrics[cue] for cue in CUES] for record in healthy}
    for seed in SEEDS:
        assert cues["shared", seed] == cues["oracle_k", seed]


@pytest.mark.integration  # trains embedders
@pytest.mark.parametrize("name", CEILINGS)
def test_each_ceiling_holds_on_the_suites_workload(suite: Suite, healthy: list[TrialRecord], name: str) -> None:
    assert _reading(suite, healthy, name).status == HOLDS


@pytest.mark.integration  # trains embedders
@pytest.mark.parametrize(("name", "change"), [
    ("alignment_ceiling", {"workload.synonym_rate": 0.0}),
    ("frequency_ceiling", {"workload.false_friend_boost": 20.0}),
])
def test_a_ceiling_fails_where_its_shortcut_finds_the_contested_pairs(
        suite: Suite, root: Path, name: str, change: dict[str, float]) -> None:
    premise = _premise(suite, name)
    degraded = [_run(suite, premise["arm"], seed, root, **change) for seed in SEEDS]
    reading = _reading(suite, degraded, name)
    assert reading.status == FAILS
    assert reading.low > premise["at_most"]


@pytest.mark.integration  # trains embedders, a step or two: the budget premises read how many
def test_equal_budgets_hold_and_fail_where_the_mechanism_trains_fewer_steps(root: Path) -> None:
    one_seed = _suite(VOCAB, SEEDS[:1])
    names = [p.name for p in one_seed.premises if p.metric.startswith("budget/")]
    controls = {_premise(one_seed, name)["contrast"].split("-vs-")[1] for name in names}
    trained = [_run(one_seed, arm, SEEDS[0], root, steps=2) for arm in sorted(controls)]
    equal = _run(one_seed, one_seed.mechanism, SEEDS[0], root, steps=2)
    fewer = _run(one_seed, one_seed.mechanism, SEEDS[0], root, steps=1)
    assert len(names) == 4
    for name in names:
        assert _reading(one_seed, [*trained, equal], name).status == HOLDS, name
        assert _reading(one_seed, [*trained, fewer], name).status == FAILS, name


def _validity(suite: Suite, records: Iterable[TrialRecord]) -> Validity:
    return evaluate_validity(_results(suite, records))


def _not_shown(validity: Validity) -> bool:
    """Not VALID, and no positive control shown to beat the control."""
    positive = [check for check in validity.checks if check.role == "positive"]
    return validity.status != VALID and bool(positive) and all(check.ok is not True for check in positive)


@pytest.mark.integration  # trains embedders
def test_the_oracle_beats_the_shared_table_on_the_suites_testbed(suite: Suite, healthy: list[TrialRecord]) -> None:
    assert _validity(suite, healthy).status == VALID


@pytest.mark.integration  # trains embedders
def test_the_oracle_shows_nothing_where_the_budget_is_one_row(
        suite: Suite, root: Path, healthy: list[TrialRecord]) -> None:
    # the control holds no private rows at any budget: its trials are the healthy testbed's
    control = [record for record in healthy if record.arm == suite.validity.control]
    starved = [_run(suite, suite.validity.positive, seed, root, index_size=1) for seed in SEEDS]
    assert _not_shown(_validity(suite, [*control, *starved]))


def _status(name: str, values: list[float]) -> str:
    suite = _suite(VOCAB, SYNTHETIC_SEEDS)
    premise = _premise(suite, name)
    if "contrast" in premise:
        treatment, control = premise["contrast"].split("-vs-")
        arms = {treatment: {premise["metric"]: values}, control: {premise["metric"]: [0.0] * len(values)}}
    else:
        arms = {premise["arm"]: {premise["metric"]: values}}
    return _reading(suite, _synthetic(arms), name).status


@pytest.mark.parametrize(("name", "healthy_figures", "degraded_figures"), [
    ("alignment_ceiling", [0.84, 0.89, 0.86, 0.87], [0.95, 0.96, 0.96, 0.95]),
    ("frequency_ceiling", [0.58, 0.61, 0.61, 0.60], [0.82, 0.82, 0.81, 0.83]),
    # a workload whose false friends all use more languages than its cognates (none of the task's params)
    ("language_count_ceiling", [0.43, 0.51, 0.48, 0.46], [0.93, 0.95, 0.91, 0.94]),
    ("equal_budget_frequency", [0.0, 0.0, 0.0, 0.0], [-20.0, -20.0, -20.0, -20.0]),
    ("equal_budget_language_count", [0.0, 0.0, 0.0, 0.0], [20.0, 0.0, 0.0, 0.0]),
    ("equal_budget_random", [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0]),
    ("equal_budget_alignment", [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 300.0]),
])
def test_each_premise_holds_on_the_healthy_side_and_fails_on_the_degraded_one(
        name: str, healthy_figures: list[float], degraded_figures: list[float]) -> None:
    assert _status(name, healthy_figures) == HOLDS
    assert _status(name, degraded_figures) == FAILS


@pytest.mark.parametrize("suite_file", ["vocab.yaml", "vocab_cldr.yaml", "vocab_gettext.yaml"])
def test_each_vocab_validity_is_valid_with_a_lead_and_not_without_one(suite_file: str) -> None:
    suite = _suite(SUITES / suite_file, SYNTHETIC_SEEDS)
    declared = suite.validity
    control = [0.62, 0.68, 0.68, 0.66]

    def validity(lead: list[float]) -> Validity:
        positive = [c + d for c, d in zip(control, lead)]
        return _validity(suite, _synthetic({declared.control: {declared.metric: control},
                                            declared.positive: {declared.metric: positive}}))

    assert validity([0.04, 0.02, 0.04, 0.04]).status == VALID
    assert _not_shown(validity([-0.001, -0.001, 0.001, 0.0]))
