"""The er2 distillation recipe: the fixed budget and the converged stop rule, the gain's learning rate and
its clamp, the gate (learned or fixed at one) and how well it finds the hard positions, the q/k positions fed,
and the settings a suite may not give it."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

import pydantic
import pytest
import torch
import yaml

from harness.tasks.er2.mechanism.er2 import ER2Layer, hard_error_mask
from harness.core.metrics import metric_key_problem
from harness.services.training_loop import fit
from harness.suite.loader import load_suites
from harness.suite.resolved_suite import SuiteError
from harness.tasks.er2.distill import budget_metrics, distil_step, gate_auroc, mean_abs_gain, parameter_groups
from harness.tasks.er2.positions import fed_capture, fed_qk
from harness.tasks.er2.recipe import WARMUP, Convergence, late_fall
from harness.tasks.er2.task import ER2Task
from harness.tasks.er2.teacher import rotate


class Logger:
    def __init__(self) -> None:
        self.curves: dict[str, list[tuple[int, float]]] = {}

    def log_metric(self, key: str, value: float, step: int) -> None:
        self.curves.setdefault(key, []).append((step, value))

    def record(self, key, value) -> None:
        pass

    def add_training_flops(self, flops: float) -> None:
        pass

    def progress(self, total, description="", share=1.0):
        class Bar:
            def advance(self, n=1):
                pass

            def close(self):
                pass

        return Bar()


def run(rule: Convergence, series) -> tuple[dict[str, float], Logger]:
    logger = Logger()
    return fit(logger, rule.cap, lambda i: series(i), "distil", log_every=1000, until=rule), logger


def test_flat_values_stop_after_two_windows_and_the_decay():
    rule = Convergence(cap=1000, window=10, tolerance=0.01, decay=5)
    final, logger = run(rule, lambda i: {"loss": 1.0, "gain": 0.3})
    assert rule.converged_at == 20 and final["steps_run"] == 25.0
    assert logger.curves["distil/loss"][-1][0] == 24  # the last step run is logged


def test_values_still_moving_run_to_the_cap_and_decay_before_it():
    rule = Convergence(cap=100, window=10, tolerance=0.01, decay=5)
    final, _ = run(rule, lambda i: {"loss": 1.0, "gain": 0.1 + 0.01 * i})  # the gain grows 0.1 per window
    assert rule.converged_at is None and rule.decay_start == 95 and final["steps_run"] == 100.0
    assert rule.last_change["gain"] > 0.01 and rule.last_change["loss"] == 0.0


def test_a_falling_loss_holds_the_stop_until_its_change_is_below_tolerance():
    rule = Convergence(cap=10_000, window=10, tolerance=0.01, decay=5, watch=("loss",))
    final, _ = run(rule, lambda i: {"loss": 1.0 + 0.995 ** i})  # relative change per window shrinks below 1% near 430
    steps = int(final["steps_run"]) - 5
    mean = [sum(1.0 + 0.995 ** i for i in range(a, a + 10)) / 10 for a in (steps - 20, steps - 10)]
    assert abs(mean[1] - mean[0]) / mean[0] < 0.01 and 200 < steps < 1000
    before = [sum(1.0 + 0.995 ** i for i in range(a, a + 10)) / 10 for a in (steps - 30, steps - 20)]
    assert abs(before[1] - before[0]) / before[0] >= 0.01  # the window before it did not pass


def test_rate_warms_up_holds_then_decays_to_one_over_decay():
    rule = Convergence(cap=200, window=10, tolerance=0.01, decay=4)
    assert rule.rate(0) == pytest.approx(1 / WARMUP) and rule.rate(WARMUP) == 1.0
    assert [rule.rate(s) for s in (195, 196, 197, 198, 199)] == [1.0, 1.0, 0.75, 0.5, 0.25]  # the last at 1/decay
    rule.decay_start = 60
    assert [rule.rate(s) for s in (59, 60, 63)] == [1.0, 1.0, 0.25]
    with pytest.raises(ValueError, match="cap"):
        Convergence(cap=4, window=10, tolerance=0.01, decay=4)


def test_the_gain_gets_its_own_learning_rate_only_when_there_is_one():
    raw = ER2Layer(2, 1, 8, feature_dim=8, residual_dim=4, residual_mode="raw")
    groups = parameter_groups(raw, 2e-3, 10.0)
    assert [g["lr"] for g in groups] == [2e-3, pytest.approx(2e-2)] and groups[1]["params"] == [raw.residual_gain]
    assert sum(len(g["params"]) for g in groups) == len(list(raw.parameters()))
    none = ER2Layer(2, 1, 8, feature_dim=8, residual_mode="none")
    assert len(parameter_groups(none, 2e-3, 10.0)) == 1 and mean_abs_gain(none) == 0.0
    with torch.no_grad():
        raw.residual_gain.copy_(torch.tensor([3.0, -0.5]))
    assert mean_abs_gain(raw) == pytest.approx((1.5 + 0.5) / 2)  # as applied: clamped to the seed's 1.5


def test_unrotated_feeding_recovers_the_projections_and_rotated_is_the_identity():
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 40, 16, dtype=torch.float64), torch.randn(2, 2, 40, 16, dtype=torch.float64)
    rq, rk = rotate(q, 10000.0), rotate(k, 10000.0)
    assert not torch.allclose(rq, q)
    uq, uk = fed_qk(rq, rk, "unrotated", 10000.0)
    assert torch.allclose(uq, q, atol=1e-12) and torch.allclose(uk, k, atol=1e-12)
    assert fed_qk(rq, rk, "rotated", 10000.0) == (rq, rk)
    captured = {"q": rq, "k": rk, "v": k, "out": q}
    fed = fed_capture(captured, "unrotated", 10000.0)
    assert fed["v"] is k and fed["out"] is q and torch.allclose(fed["q"], q, atol=1e-12)
    with pytest.raises(ValueError, match="known: rotated, unrotated"):
        fed_qk(rq, rk, "roped", 10000.0)


def test_late_fall_reads_the_last_tenth_against_the_tenth_before():
    flat = [1.0] * 100
    assert late_fall(flat) == 0.0
    falling = [2.0] * 80 + [1.0] * 10 + [0.9] * 10  # 1.0 -> 0.9 over the last 10 of 100 steps
    assert late_fall(falling) == pytest.approx(0.1)
    assert late_fall([1.0] * 90 + [1.2] * 10) == pytest.approx(-0.2)  # a rise reads negative
    assert late_fall([3.0, 2.0, 1.0]) == pytest.approx(0.5)  # one step against the one before
    assert late_fall([5.0]) == 0.0
    with pytest.raises(ValueError, match="span"):
        late_fall(flat, span=0.6)


def test_the_learned_gate_starts_at_gate_init():
    q = torch.randn(1, 2, 8, 8)
    kv = torch.randn(1, 1, 8, 8)
    for start in (0.2, 0.5):
        layer = ER2Layer(2, 1, 8, feature_dim=4, residual_dim=2, code_rank=2, gate_init=start)
        _, _, parts = layer.components(q, kv, kv)
        assert float(parts["gate"].detach().mean()) == pytest.approx(start)
        assert type(layer)(**layer.config).gate_init == start
    with pytest.raises(ValueError, match="gate_init"):
        ER2Layer(2, 1, 8, feature_dim=4, residual_dim=2, code_rank=2, gate_init=1.0)


def test_the_fixed_budget_runs_exactly_its_steps_whatever_the_values_do():
    rule = Convergence(cap=60, window=5, tolerance=0.01, decay=5, watch=())
    final, _ = run(rule, lambda i: {"loss": 1.0, "gain": 0.3})  # flat: the converged rule would stop at 15
    assert rule.converged_at is None and rule.decay_start == 55 and final["steps_run"] == 60.0
    with pytest.raises(ValueError, match="cannot watch 'accuracy'; valid: loss, nmse, gain"):
        Convergence(cap=60, window=5, tolerance=0.01, decay=5, watch=("loss", "accuracy"))


def test_the_gain_is_kept_inside_its_clamp_where_it_still_gets_a_gradient():
    """Past the clamp the applied gain is constant (no gradient: the old recipe's stuck heads); on it the
    loss still moves it back in."""
    torch.manual_seed(0)
    layer = ER2Layer(2, 1, 8, feature_dim=8, residual_dim=4, residual_mode="raw", state_dtype="fp32")
    q, k, v = torch.randn(1, 2, 12, 8), torch.randn(1, 1, 12, 8), torch.randn(1, 1, 12, 8)
    with torch.no_grad():
        layer.residual_gain.copy_(torch.tensor([3.0, -0.5]))
    layer(q, k, v).square().sum().backward()  # the loss wants less correction in both heads
    assert layer.residual_gain.grad[0] == 0 and layer.residual_gain.grad[1] != 0
    assert layer.gain_at_bound().tolist() == [True, False]
    assert budget_metrics(layer, 7, 8) == {"budget/steps": 7.0, "budget/examples": 56.0, "at_bound/gain": 0.5}
    layer.project_gain()
    assert layer.residual_gain.tolist() == [1.5, -0.5] and layer.gain_at_bound().tolist() == [True, False]
    layer.zero_grad()
    layer(q, k, v).square().sum().backward()
    assert layer.residual_gain.grad[0] > 0  # on the bound: a gradient that takes it back inside

    capture = {"q": q, "k": k, "v": v, "out": torch.zeros(1, 2, 12, 8)}
    with torch.no_grad():
        layer.residual_gain.fill_(1.5)
    step = distil_step(layer, lambda i: capture, lr=0.05, rate=lambda i: 1.0, gain_lr_scale=10.0)
    for index in range(5):
        step(index)
        assert layer.residual_gain.abs().max() <= 1.5  # never left past the clamp
    assert layer.residual_gain.abs().max() < 1.5  # a zero target pulls both heads off the bound


def test_the_gate_modes_cross_projection_and_gate():
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 2, 10, 8), torch.randn(1, 1, 10, 8), torch.randn(1, 1, 10, 8)
    kinds = {}
    for name, mode, gate in [("raw", "raw", None), ("raw_gated", "raw", "learned"), ("compressed", "compressed", None),
                             ("compressed_gate1", "compressed", "one")]:
        torch.manual_seed(2)
        layer = ER2Layer(2, 1, 8, feature_dim=8, residual_dim=4, code_rank=2, residual_mode=mode,
                                                gate_mode=gate, state_dtype="fp32")
        with torch.no_grad():
            layer.residual_gain.fill_(0.8)
        kinds[name] = layer
    assert [kinds[n].gated for n in kinds] == [False, True, True, False]
    assert kinds["compressed_gate1"].error_gate_w is None and kinds["raw_gated"].residual_basis is None
    assert ER2Layer(**kinds["raw_gated"].config).gated  # the config rebuilds the gate
    with torch.no_grad():
        _, _, raw = kinds["raw"].components(q, k, v)
        _, _, gated = kinds["raw_gated"].components(q, k, v)
        _, _, one = kinds["compressed_gate1"].components(q, k, v)
    assert torch.allclose(gated["gate"], torch.tensor(0.2))  # the seed's prior at the start
    assert torch.allclose(gated["output"], raw["base"] + 0.8 * 0.2 * raw["residual_raw"], atol=1e-6)
    assert torch.equal(one["gate"], torch.ones_like(one["gate"]))
    assert torch.allclose(one["output"], one["base"] + 0.8 * kinds["compressed_gate1"].project_vector(one["residual_raw"]),
                          atol=1e-6)
    teacher = torch.randn(1, 2, 10, 8)
    assert kinds["raw_gated"].error_directed_losses(gated, teacher)["gate_bce"] > 0
    assert kinds["compressed_gate1"].error_directed_losses(one, teacher)["gate_bce"] == 0
    with pytest.raises(ValueError, match="no residual correction to gate"):
        ER2Layer(2, 1, 8, residual_mode="none", gate_mode="learned")
    with pytest.raises(ValueError, match="unknown gate_mode 'half'"):
        ER2Layer(2, 1, 8, residual_mode="raw", gate_mode="half")
    for limit in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="gain_limit must be a finite positive"):
            ER2Layer(2, 1, 8, residual_mode="raw", gain_limit=limit)


def test_gate_auroc_is_one_for_a_gate_on_the_hard_positions_and_a_half_for_a_constant():
    torch.manual_seed(3)
    base, teacher = torch.randn(2, 3, 40, 8), torch.randn(2, 3, 40, 8)
    mask, error = hard_error_mask(base, teacher, 0.25)
    assert gate_auroc(mask.float(), base, teacher) == 1.0
    assert gate_auroc(-mask.float(), base, teacher) == 0.0  # ranks them backwards
    assert gate_auroc(torch.full_like(error, 0.3), base, teacher) == 0.5
    noisy = error + 3 * error.std() * torch.randn(error.shape, generator=torch.Generator().manual_seed(4))
    assert 0.5 < gate_auroc(noisy, base, teacher) < 1.0


@pytest.mark.parametrize(("params", "message"), [
    ({"steps": 0}, "greater than or equal to 1"),
    ({"schedule": "converged", "stop_on": ["loss", "accuracy"]}, "'loss', 'nmse' or 'gain'"),
    ({"residual_mode": "none", "residual_gate": "learned"}, "needs a residual memory"),
    ({"residual_gate": "half"}, "'learned' or 'one'"),
    ({"gain_limit": 0}, "greater than 0"),
    ({"gain_limit": "inf"}, "finite number"),
    ({"gate_init": 1.0}, "less than 1"),
    ({"gate_init": 0}, "greater than 0"),
    ({"schedule": "fixed", "steps": 50, "decay_steps": 50}, "budget of the fixed schedule, must exceed decay_steps"),
])
def test_settings_the_recipe_or_layer_does_not_support_are_refused(params, message):
    with pytest.raises(pydantic.ValidationError, match=message):
        ER2Task.validate_params(params)


SUITE = """suite: er2bad
task: er2
seeds: [0]
params: {schedule: fixed, decay_steps: 2, steps: 8}
arms:
  raw: {residual_mode: raw}
  ablation: {residual_mode: raw, residual_gate: learned}
"""


@pytest.mark.parametrize(("old", "new", "line", "key"), [
    ("steps: 8}", "steps: 0}", 4, "steps"),
    ("residual_gate: learned", "residual_gate: sometimes", 7, "residual_gate"),
    ("residual_mode: raw, residual", "residual_mode: none, residual", 7, "residual_gate"),
    ("{schedule: fixed,", "{schedule: converged, stop_on: [accuracy],", 4, "stop_on"),
])
def test_a_suite_with_an_unsupported_setting_is_refused_at_its_line(tmp_path: Path, old, new, line, key):
    path = tmp_path / "bad.yaml"
    path.write_text(SUITE.replace(old, new))
    with pytest.raises(SuiteError) as error:
        load_suites(path)
    text = str(error.value)
    assert text.startswith(f"{path}:{line}") and key in text and "\n" not in text


def test_premises_may_name_the_fair_arm_facts_and_nothing_that_leaves_a_word():
    assert metric_key_problem("budget/steps") is None and metric_key_problem("at_bound/gain") is None
    for bad in ("../steps", "budget/../x", "a/b/c", "/steps", "budget/", "budget./steps"):
        assert metric_key_problem(bad), bad


@pytest.mark.parametrize(("name", "ablations"), [("er2", "er2"), ("er2_passkey", "er2_passkey_ablation")])
def test_the_shipped_er2_suites_give_every_distilled_arm_the_same_budget_and_premises(name: str, ablations: str):
    """Every distilled arm on one fixed budget; the ablations in the suite or, where the default must stay
    inside its time budget, in a suite of their own on the same workload and recipe."""
    suites = Path(__file__).parents[1] / "suites"
    (suite,) = load_suites(suites / f"{name}.yaml", apply_locks=False)
    (ablation,) = load_suites(suites / f"{ablations}.yaml", apply_locks=False)
    distilled = {n: arm for s in (suite, ablation) for n, arm in s.arms.items() if arm.params.get("layer", "er2") == "er2"}
    assert set(distilled) == {"none", "raw", "compressed", "compressed_gate1", "raw_gated"}
    budgets = {(s.params | arm.params)["steps"] for s in (suite, ablation) for arm in s.arms.values()}
    assert len(budgets) == 1 and suite.params["schedule"] == ablation.params["schedule"] == "fixed"
    assert ablation.params == suite.params
    assert distilled["compressed_gate1"].params["residual_gate"] == "one"
    assert distilled["raw_gated"].params["residual_gate"] == "learned"
    premises = {p.name: p for p in suite.premises}
    assert premises["equal_budget"].metric == "budget/steps" and premises["equal_budget"].at_most == 0
    assert premises["compressed_gain_off_clamp"].metric == "at_bound/gain"
    (pilot,) = load_suites(suites / f"{name}.yaml", profile="pilot", apply_locks=False)
    assert not set(pilot.seeds) & set(range(min(suite.seeds), min(suite.seeds) + 6))  # fresh confirmatory seeds


def test_the_passkey_ablations_run_at_the_claim_suites_points():
    """raw and compressed of the ablation suite are er2_passkey's; compressed_gate1 is compressed without its
    gate, raw_gated raw under compressed's gate start; and er2_passkey's default runs no ablation."""
    suites = Path(__file__).parents[1] / "suites"
    (claims,) = load_suites(suites / "er2_passkey.yaml", apply_locks=False)
    (ablation,) = load_suites(suites / "er2_passkey_ablation.yaml", apply_locks=False)
    assert not {"compressed_gate1", "raw_gated"} & set(claims.arms)
    for name in ("raw", "compressed"):
        assert ablation.arms[name].params == claims.arms[name].params, name
    compressed, raw = claims.arms["compressed"].params, claims.arms["raw"].params
    assert ablation.arms["compressed_gate1"].params == {**compressed, "residual_gate": "one"}
    gate_start = {"gate_init": compressed["gate_init"]} if "gate_init" in compressed else {}
    assert ablation.arms["raw_gated"].params == {**raw, "residual_gate": "learned", **gate_start}
    assert not set(ablation.seeds) & set(claims.seeds)


@pytest.mark.parametrize(("name", "head_dim", "identical_grids", "ranks", "points"),
                         [("er2_mqar_rank", 32, False, {1, 2, 4, 8, 16}, 36),
                          ("er2_passkey_rank", 16, True, {1, 2, 4, 8}, 15)])
def test_the_rank_suites_tune_raw_and_every_rank_on_grids_of_one_size(name: str, head_dim: int, identical_grids: bool,
                                                                       ranks: set[int], points: int):
    """Ranks below the head dimension at one state size (the rank costs no bytes; a full-rank code compresses
    nothing), each tuned like raw, on seeds no other er2 suite runs, and each arm's convergence a premise.
    er2_mqar's ranks also tune the gate's start (raw spends those points on the learning rate); er2_passkey's
    design gives raw and every rank one identical lr x gain_lr_scale grid, the gate starting at the seed's value."""
    suites = Path(__file__).parents[1] / "suites"
    (suite,) = load_suites(suites / f"{name}.yaml", apply_locks=False)
    found = {arm.params["code_rank"] for n, arm in suite.arms.items() if n.startswith("compressed_r")}
    assert found == ranks and max(found) <= head_dim
    tune = yaml.safe_load((suites / f"{name}.yaml").read_text())["tune"]
    assert set(tune["arms"]) == {"raw"} | {f"compressed_r{r}" for r in ranks}
    sizes = {arm: math.prod(len(values) for values in tune.get("arm_spaces", {}).get(arm, tune["space"]).values())
             for arm in tune["arms"]}
    assert min(sizes.values()) == points, sizes  # the shared grid; an arm's own grid only extends it
    assert {"lr", "gain_lr_scale"} <= set(tune["space"])
    if identical_grids:  # one grid for every arm; an arm whose best sat on an edge extends it
        assert "gate_init" not in tune["space"]
        for own in tune.get("arm_spaces", {}).values():
            assert all(set(values) <= set(own[axis]) for axis, values in tune["space"].items()), own
    else:
        assert "gate_init" in tune["space"] and set(tune["arm_spaces"]) == {"raw"}
    converged = {p.arm for p in suite.premises if p.metric == "loss_late_fall"}
    assert converged == {"raw"} | {f"compressed_r{r}" for r in ranks}
    companions = {name, f"{name.removesuffix('_rank')}_raw_grid"}  # a grid extension shares its tuning seeds
    others = set().union(*(set(load_suites(path, apply_locks=False)[0].seeds) for path in suites.glob("er2*.yaml")
                           if path.stem not in companions))
    assert not (set(tune["seeds"]) | set(suite.seeds)) & others


def test_the_mqar_claims_on_compressed_need_convergence_and_a_nonlocal_memory_not_the_treatments_gate():
    """Premises bound the testbed: every arm converged, the memory non-local; the treatment's own gate is a
    diagnostic (a premise on it would let the mechanism's failure read as VACUOUS)."""
    (suite,) = load_suites(Path(__file__).parents[1] / "suites" / "er2_mqar.yaml", apply_locks=False)
    needed = {p.name for p in suite.premises if not p.claims or "compressed-vs-raw" in p.claims}
    assert {"compressed_converged", "raw_converged", "memory_is_nonlocal"} <= needed
    assert not any(p.metric == "gate_auroc" for p in suite.premises)
    tests = {(c.contrast, c.metric): c.test for c in suite.claims}
    for metric in ("load_recall@32", "load_recall@64"):
        assert tests[("compressed-vs-raw", metric)] == "superior"
        assert tests[("compressed-noninferior-raw", metric)] == "non_inferior"


def test_er2_mqar_rank_lock_chose_every_arm_inside_its_grid():
    """The rank sweep's grid was extended until no arm's best sits on an edge (issue 70): its lock passes the
    check `harness register` applies, and er2_mqar's arms are the points it chose."""
    from harness.evidence.registration import tuned_on_edge

    suites = Path(__file__).parents[1] / "suites"
    (sweep,) = load_suites(suites / "er2_mqar_rank.yaml")
    assert tuned_on_edge(sweep) == []
    (claims,) = load_suites(suites / "er2_mqar.yaml")
    chosen = {name: entry.params for name, entry in sweep.tuned.arms.items()}
    assert {k: claims.arms["raw"].params[k] for k in chosen["raw"]} == chosen["raw"]
    assert {k: claims.arms["compressed"].params[k] for k in chosen["compressed_r16"]} == chosen["compressed_r16"]
    assert claims.arms["compressed"].params["code_rank"] == 16


def _paired(bundle, treatment: str, control: str, metric: str) -> list[float]:
    values = {(r.arm, r.seed): r.metrics.get(metric) for r in bundle.trials}
    return [values[(treatment, s)] - values[(control, s)] for s in sorted(bundle.seeds)
            if values.get((treatment, s)) is not None and values.get((control, s)) is not None]


def test_the_noninferiority_suite_runs_at_er2_passkeys_points_with_margins_from_the_controls_sealed_lead():
    """er2_passkey_noninferiority asks er2_passkey's exploratory question with the seeds it needs: the same
    workload, budget, premises and points, and each margin half the lower 95% bound of raw's lead over none
    pooled (DerSimonian-Laird, the programme's estimate) over er2_passkey's sealed seed sets, rounded down
    to 0.005: no compressed value sets a margin."""
    from harness.evidence.bundle import read_bundle
    from harness.evidence.programme import pool
    root = Path(__file__).parents[1]
    (claims,) = load_suites(root / "suites" / "er2_passkey.yaml", apply_locks=False)
    (suite,) = load_suites(root / "suites" / "er2_passkey_noninferiority.yaml", apply_locks=False)
    assert suite.params == claims.params and set(suite.arms) == set(claims.arms)
    for name, arm in suite.arms.items():
        assert arm.params == claims.arms[name].params, name
    assert {p.name for p in suite.premises} == {p.name for p in claims.premises}
    nonlocal_ = next(p for p in suite.premises if p.name == "probe_is_nonlocal")
    assert nonlocal_.at_least == 0.05
    sealed = ("59e60c81", "394347e7", "a1cccab3", "ec41bc78")  # the seed sets the design names
    bundles = [read_bundle(root / "evidence" / "er2_passkey" / f"{name}.jsonl.gz") for name in sealed]
    margins = {c.metric: c.margin for c in suite.claims if c.test == "non_inferior"}
    assert set(margins) == {"recall@128", "nll_delta@128"}
    for metric, better in (("recall@128", 1.0), ("nll_delta@128", -1.0)):
        leads = []
        for bundle in bundles:
            diffs = [better * d for d in _paired(bundle, "raw", "none", metric)]
            leads.append((sum(diffs) / len(diffs), statistics.variance(diffs) / len(diffs)))
        pooled = pool(leads)
        assert pooled is not None and pooled.low > 0
        assert margins[metric] == pytest.approx(math.floor(pooled.low / 2 / 0.005) * 0.005), metric
    every_sealed = [read_bundle(path) for path in (root / "evidence").glob("er2*/*.jsonl.gz")]
    assert not set(suite.seeds) & {s for b in every_sealed for s in b.seeds}
