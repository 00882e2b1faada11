"""The suite's claims: its pre-declared primary hypotheses, tested one-sided and Holm-corrected.

Every claim is a one-sided t test at level (1 - confidence) / 2, which is exactly "the two-sided
interval at the run's confidence lies on the right side of the boundary" when it stands alone.
The claims of a suite form one family, fixed by the suite file (not by which claims happened to
carry a p-value): Holm's step-down procedure decides them together, PASS and FAIL alike. A claim
PASSes when its pass hypothesis is rejected at its Holm level and FAILs when the opposite one-sided
hypothesis is rejected at the same kind of level, so both read the same adjusted interval
(``decision_interval``: the interval at the level the claim was actually tested at). Holm controls
the false PASS rate and, separately, the false FAIL rate at the claim level each, so the chance of
any wrong-direction decision in the family is at most twice that level (1 - confidence, e.g. 5%):
the same error a two-sided interval at the run's confidence makes, which is what a reader of that
interval already accepts. Intervals are read in 'better is positive' units (the metric's direction).
A strict test's boundary is strict: ``superior`` never passes on an exactly zero difference (an arm
identical to its control fails it); the bounds of non-inferiority, equivalence and ratio are
inclusive. Each test (``superior``, ``non_inferior``, ``equivalent``, ``equal``, ``ratio``) is one class
in harness/analysis/claim_tests/, whose module says what it passes and fails on; this module runs the
steps they share and asks the claim's test for the rest.

Claims without sampling error (``equal``, and any claim whose observed differences do not vary at
all) sit outside the Holm family: they cannot be false positives, and a failing one must not make
the others harder to pass. Every other claim stays in the family, a claim that could not be tested
(its metric missing, too few pairs) at p = 1. Timing claims form a family of their own.

A one-sided t test on skewed per-seed differences is not exact (skewness 0.8-1.8 takes a 2.5% test
to 4.6-8.4%). Where the pairs can reach the level without normality, a superiority or
non-inferiority claim crosses its bound only when the sign-flip permutation test of its own
hypothesis, at its own bound and level, crosses too; a claim that t alone would decide is left
undecided and names the sample's skewness. Below that many pairs (1 / 2^n above the level) t stands
alone, as it must.

Non-inferiority and equivalence prove nothing when the control itself does nothing in this run
(both arms at chance are "equivalent"). Such a claim names a ``reference`` contrast whose
treatment is the claim's control (e.g. raw-vs-none). The claim is ``vacuous`` unless the
reference effect is established (its interval lies on the better side beyond the margin). A
relative margin is a fraction of the reference effect's *conservative confidence bound*, not of its
point estimate: the fixed-margin ("95-95") method of the FDA's non-inferiority guidance (2016),
which allows for the reference's own uncertainty. Fewer than two pairs give ``insufficient pairs``.

A suite may look at its seeds sequentially (``sequential.py``): then every look re-tests the claims
at that look's nominal levels, a claim keeps the first decision it reaches, and a claim that can
no longer be decided by the last look stops as FUTILE.

A claim naming ``<treatment arm>-vs-<control arm>`` applies to every variant of a swept arm; a
metric family without a qualifier applies to each of its reported keys. For every claim the
minimum detectable effect (80% power at the run's n, its observed spread and the level the claim
was tested at) says what the testbed could have found.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping

import numpy as np
import scipy.stats

from harness.analysis.claim_status import (
    DECIDED,
    FAIL,
    FUTILE,
    INCONCLUSIVE,
    INSUFFICIENT,
    NO_ANSWER,
    PASS,
    SHORT,
    VACUOUS,
)
from harness.analysis.claim_tests import claim_test
from harness.analysis.claim_tests.contract import QUALITY_FAMILY, ClaimTest, ClaimTestOutcome
from harness.analysis.claim_tests.bounds import p_better
from harness.analysis.decide.looks import claim_alpha, looks_taken, run_design, spent_level
from harness.analysis.decide.premises import OPEN, PremiseResult, evaluate_premises, worst_needed
from harness.analysis.decide.verdicts import ContrastVariant, compare, contrast_variants, oriented, variants_named
from harness.analysis.run_results import RunResults, metric_order
from harness.analysis.stats.paired_stats import (
    Interval,
    MeanEstimate,
    critical_t,
    holm_adjust,
    mean_estimate,
    smallest_one_sided_sign_flip_p,
)
from harness.analysis.stats.sequential_design import Schedule, conditional_power
from harness.core.metrics import metric_family
from harness.suite.schema import ClaimSpec

FOR, AGAINST = "for", "against"  # a decided claim's polarity: it favours the suite's mechanism, or its control
IDENTICAL_ARMS = "treatment and control bit-identical on every seed: is the mechanism on?"


@dataclass(frozen=True)
class ReferenceEffect:
    """The assay-sensitivity check of a non-inferiority or equivalence claim."""

    contrast: str
    estimate: float | None  # in the metric's units (treatment - control of the reference contrast)
    interval: Interval | None
    n: int
    margin: float | None  # the claim's absolute margin (resolved when relative)
    established: bool
    reason: str
    p_value: float | None = None  # one-sided, H0: the reference effect is not beyond its bound


@dataclass(frozen=True)
class ClaimResult:
    claim: ClaimSpec
    contrast: str
    point: str
    key: str
    status: str
    n: int
    estimate: float | None
    interval: Interval | None
    detail: str
    p_value: float | None = None  # one-sided, for the claim's pass hypothesis
    p_adjusted: float | None = None  # Holm over the suite's family (fixed designs)
    mde: float | None = None  # minimum detectable effect at 80% power and the tested level, metric units
    dropped: int = 0
    reference: ReferenceEffect | None = None
    p_fail: float | None = None  # one-sided, for the opposite hypothesis (the claim is surely false)
    in_family: bool = False  # tested under Holm with the suite's other sampled claims
    level: float | None = None  # the one-sided level it was tested at (Holm-adjusted in the family)
    nominal_level: float | None = None  # that level at the deciding look (sequential boundary)
    decision_interval: Interval | None = None  # the two-sided interval at nominal_level: what decided
    look: int = 1  # 1-based look at which it was decided (or the last look taken)
    looks: int = 1  # looks the design plans
    sequential: bool = False
    mean_estimate: MeanEstimate | None = None  # the estimate the test read (difference or ratio)
    premise: PremiseResult | None = None  # the premise that failed (or is still open) and made it vacuous
    identical_arms: bool = False  # treatment and control reported the same metrics on every seed
    p_flip: float | None = None  # one-sided sign-flip p of the pass hypothesis at its bound (no normality)
    p_flip_fail: float | None = None  # the same for the fail hypothesis
    skewness: float | None = None  # of the paired differences (3 pairs at least)
    skew_blocked: bool = False  # t alone would decide; the sign-flip test at the bound and level does not
    treatment_arm: str = ""  # the arms of its contrast ('' when no contrast of the run matches the claim)
    control_arm: str = ""
    family: str = QUALITY_FAMILY  # the Holm family it is tested in (timing claims have their own)
    better_sign: int = 0  # +1 / -1: the metric's better direction (0: none, or a ratio claim)
    which_way: str = ""  # where the deciding interval lies beside the boundary: "not better", "superior too", ...

    @property
    def result_text(self) -> str:
        """The result as every report shows it: 'PASS', or 'VACUOUS (premise <name> not met: ...)'."""
        if self.premise is not None:
            return f"{self.status.upper()} ({self.premise.text()})"
        if self.skew_blocked:
            skew = "" if self.skewness is None else f"sample skewness {self.skewness:+.2f}; "
            return (f"{self.status.upper()} (skewed: {skew}t alone would decide, the sign-flip test at the "
                    f"bound does not)")
        if self.which_way and self.status in (PASS, FAIL, SHORT):
            return f"{self.status.upper()} ({self.which_way})"
        return self.status.upper()

    @property
    def test(self) -> ClaimTest:
        """The claim's test (harness/analysis/claim_tests/)."""
        return claim_test(self.claim.test)

    @property
    def statement(self) -> str:
        return self.test.statement(self.claim)

    def polarity(self, mechanism: str | None) -> str:
        """FOR when the result favours the suite's mechanism arm, AGAINST when it favours the arm it
        is compared with, '' when it says neither: undecided, an exact check (equal bytes), a suite
        that names no mechanism or a contrast without it. A claim with the mechanism as control reads
        the other way round: its PASS (or SHORT OF MARGIN) favours the other arm."""
        if not mechanism or not self.test.favours_an_arm() or self.status not in (PASS, FAIL, SHORT):
            return ""
        if self.treatment_arm == mechanism:
            return FOR if self.status == PASS else AGAINST
        if self.control_arm == mechanism:
            return FOR if self.status == FAIL else AGAINST
        return ""

    def favours(self, mechanism: str | None) -> str:
        """'for precision' / 'against precision', as every report appends it to the result ('' when neither)."""
        side = self.polarity(mechanism)
        return f"{side} {mechanism}" if side else ""

    @property
    def open(self) -> bool:
        """Undecided, and more seeds could decide it (a failed premise cannot be mended by seeds)."""
        if self.premise is not None:
            return self.premise.status == OPEN
        return self.status in (VACUOUS, INSUFFICIENT) or (self.status == INCONCLUSIVE and self.p_value is not None)

    @property
    def boundary_t(self) -> float | None:
        """The t statistic the deciding look's test had to reach."""
        if self.nominal_level is None or self.n < 2:
            return None
        return critical_t(self.nominal_level, self.n)


def _exact(estimate: MeanEstimate) -> bool:
    """Every paired difference (or ratio) the same: no sampling error, so no Holm family to join."""
    return estimate.sd == 0.0


def last_look_premises(results: RunResults) -> list[PremiseResult]:
    """The premises on the seeds the claims were last decided on (the last look taken, in a sequential
    run), at that look's spent level: the premises table and the claims' VACUOUS reasons read this one
    evaluation."""
    design = run_design(results)
    seen = results.first_seeds(looks_taken(results, design)[-1]) if design.sequential else results
    return evaluate_premises(seen, spent_level(seen))


def evaluate_claims(results: RunResults, include_speed: bool = True,
                    premises: list[PremiseResult] | None = None) -> list[ClaimResult]:
    """One result per claim x matching contrast variant x sweep point x metric key, Holm-corrected,
    decided look by look when the run is sequential.

    ``include_speed=False`` leaves claims on speed metrics out, Holm family included: the gate's view
    where timings are not gated, so that their noise cannot move the claims it does gate. ``premises``:
    ``last_look_premises(results)``, when the caller already has it.
    """
    design = run_design(results)
    taken = looks_taken(results, design)
    alpha = claim_alpha(results.confidence)
    schedule = design.looks if design.sequential else taken
    reference_levels = design.levels(schedule, alpha)

    def tested_at(k: int) -> list[ClaimResult]:
        seen = results.first_seeds(taken[k]) if design.sequential else results
        return _tested(seen, include_speed, reference_levels[k])

    decided = _decide_looks(tested_at, len(taken), schedule, design, alpha)
    if premises is None:
        premises = last_look_premises(results)
    return [_no_answer_when_identical(_under_premises(claim, premises)) for claim in decided]


def _no_answer_when_identical(claim: ClaimResult) -> ClaimResult:
    """NO ANSWER when treatment and control gave bit-identical values on every seed: the two arms are one
    (the mechanism switched off, a param that changes nothing), so whatever the test computed (a zero
    difference reads as a PASS of an equality or non-inferiority claim) the claim asked nothing."""
    if not claim.identical_arms:
        return claim
    return replace(claim, status=NO_ANSWER, detail=f"treatment and control bit-identical on every seed; {claim.detail}")


def _under_premises(claim: ClaimResult, premises: list[PremiseResult]) -> ClaimResult:
    """VACUOUS when a premise the claim needs failed at its point (or is still open); unchanged when
    every one holds. The claim keeps its place in the Holm family, so the others stay as they were."""
    premise = worst_needed(premises, claim.claim.contrast, claim.point)
    if premise is None:
        return claim
    return replace(claim, status=VACUOUS, premise=premise)


def _tested(results: RunResults, include_speed: bool, reference_level: float) -> list[ClaimResult]:
    """Every claim's test at one look, before multiplicity."""
    variants = contrast_variants(results)
    out: list[ClaimResult] = []
    for claim in results.stored.claims:
        if not include_speed and results.spec_for(claim.metric).kind == "speed":
            continue
        matching = variants_named(variants, claim.contrast)
        if not matching:
            out.append(_undecided(claim, claim.contrast, "", claim.metric, "no such contrast in this run",
                                  claim_test(claim.test).family(results.spec_for(claim.metric))))
        for variant in matching:
            for point in results.point_labels():
                out.extend(_evaluate_at(results, variants, claim, variant, point, reference_level))
    return [_missing_cannot_pass(r) for r in out]


def _evaluate_at(
    results: RunResults, variants: list[ContrastVariant], claim: ClaimSpec, variant: ContrastVariant,
    point: str, reference_level: float,
) -> list[ClaimResult]:
    reported = set(results.metric_keys(variant.treatment_label, point)) & set(
        results.metric_keys(variant.control_label, point)
    )
    wanted = claim.metric
    family_keys = (k for k in reported if "@" not in wanted and metric_family(k) == wanted)
    keys = [wanted] if wanted in reported else sorted(family_keys, key=metric_order)
    if not keys:
        return [_undecided(claim, variant.name, point, wanted, "metric not reported by both arms",
                           claim_test(claim.test).family(results.spec_for(wanted)))]
    identical = results.identical_arms(variant.treatment_label, variant.control_label, point)
    return [replace(_evaluate_key(results, variants, claim, variant, point, key, reference_level), identical_arms=identical,
                    treatment_arm=variant.treatment_arm, control_arm=variant.control_arm)
            for key in keys]


def _evaluate_key(
    results: RunResults, variants: list[ContrastVariant], claim: ClaimSpec, variant: ContrastVariant,
    point: str, key: str, reference_level: float,
) -> ClaimResult:
    """The claim's test before multiplicity: p-values for passing and for failing, or why there are none."""
    test = claim_test(claim.test)
    spec = results.spec_for(key)
    in_family = test.in_holm_family(spec)
    family = test.family(spec)
    if test.needs.ratio:
        ratio = _ratio(results, claim, test, variant, point, key, family)
        exact = ratio.mean_estimate is not None and _exact(ratio.mean_estimate)
        return replace(ratio, in_family=in_family and not exact, family=family)
    difference = compare(results, variant.treatment_label, variant.control_label, point, key)
    if difference is None:
        return replace(_undecided(claim, variant.name, point, key, "no seed finished on both sides", family),
                       in_family=in_family)
    estimate = difference.estimate
    common = dict(claim=claim, contrast=variant.name, point=point, key=key, n=difference.n,
                  estimate=difference.mean_difference, interval=difference.interval, dropped=len(difference.dropped),
                  in_family=in_family and not _exact(estimate), mean_estimate=estimate,
                  family=family, better_sign=spec.better_sign, skewness=_skewness(difference.differences))
    sign = spec.better_sign
    if test.exact:
        return _outcome(common, test.decide(claim, estimate, difference.differences, sign, 0.0))
    if sign == 0 and test.directional:
        return ClaimResult(**common, status=INCONCLUSIVE, detail="metric has no direction")
    reference = None
    margin = float(claim.margin or 0.0)
    if test.needs.reference:
        reference = _reference_effect(results, variants, claim, variant, point, key, sign or 1, reference_level)
        margin = reference.margin if reference.margin is not None else math.nan
    if estimate.insufficient:
        return ClaimResult(**common, status=INSUFFICIENT, reference=reference,
                           detail=f"{difference.n} pair(s): a t interval needs at least 2")
    common.update(reference=reference)
    if reference is not None and not reference.established:
        return ClaimResult(**common, status=VACUOUS, detail=reference.reason)
    return _outcome(common, test.decide(claim, estimate, difference.differences, sign, margin))


def _outcome(common: dict, outcome: ClaimTestOutcome) -> ClaimResult:
    return ClaimResult(**common, status=outcome.status, detail=outcome.detail, p_value=outcome.p_value,
                       p_fail=outcome.p_fail, p_flip=outcome.p_flip, p_flip_fail=outcome.p_flip_fail)


def _reference_effect(
    results: RunResults, variants: list[ContrastVariant], claim: ClaimSpec, variant: ContrastVariant,
    point: str, key: str, sign: int, level: float,
) -> ReferenceEffect:
    """Does the claim's control really work here? Its reference contrast at the same point and key,
    read through its two-sided interval at one-sided ``level`` (the look's nominal level)."""
    name = str(claim.reference or "")
    candidates = variants_named(variants, name) if name else []
    chosen = [v for v in candidates if v.treatment_label == variant.control_label] or candidates[:1]
    relative = claim.relative_margin
    absolute = None if relative is not None else float(claim.margin or 0.0)
    if not chosen:
        why = "no reference contrast declared" if not name else f"reference {name!r} has no variant in this run"
        return ReferenceEffect(name, None, None, 0, absolute, False, f"vacuous: {why}, so nothing shows the control works")
    difference = compare(results, chosen[0].treatment_label, chosen[0].control_label, point, key)
    if difference is None or difference.interval is None:
        n = 0 if difference is None else difference.n
        return ReferenceEffect(chosen[0].name, None if difference is None else difference.mean_difference, None, n,
                               absolute, False, f"vacuous: reference {chosen[0].name} has {n} pair(s) on {key}")
    estimate = difference.estimate
    interval = estimate.interval_at(level)
    low, _ = oriented(interval, sign)
    # The fixed-margin method: a fraction of the reference's conservative bound, not of its point estimate.
    margin = absolute if relative is None else float(relative) * max(low, 0.0)
    p_value = p_better(estimate, sign, margin if relative is None else 0.0)
    label = (f"reference {chosen[0].name} {difference.mean_difference:+.4g} "
             f"[{interval.low:+.4g}, {interval.high:+.4g}]")
    found = ReferenceEffect(chosen[0].name, difference.mean_difference, interval, difference.n, margin, False, "",
                            p_value)
    if low <= 0:
        return replace(found, margin=margin if relative is None else None,
                       reason=f"vacuous: {label} is not established (interval reaches 0 or the worse side)")
    if low <= margin:
        return replace(found, reason=f"vacuous: {label} is not surely larger than the margin {margin:.4g}")
    return replace(found, established=True, reason=f"{label} established")


def _ratio(results: RunResults, claim: ClaimSpec, test: ClaimTest, variant: ContrastVariant, point: str, key: str,
           family: str) -> ClaimResult:
    difference = compare(results, variant.treatment_label, variant.control_label, point, key)
    controlled = np.asarray(difference.control if difference else ())
    usable = controlled != 0
    if not usable.any():
        return _undecided(claim, variant.name, point, key, "no pair with a non-zero control value", family)
    ratios = np.asarray(difference.treatment)[usable] / controlled[usable]
    estimate = mean_estimate(ratios, results.confidence)
    common = dict(claim=claim, contrast=variant.name, point=point, key=key, n=estimate.n, estimate=estimate.mean,
                  interval=estimate.interval, dropped=len(difference.dropped) + int(np.count_nonzero(~usable)),
                  mean_estimate=estimate)
    if estimate.insufficient:
        return ClaimResult(**common, status=INSUFFICIENT, detail=f"{estimate.n} pair(s): a t interval needs at least 2")
    return _outcome(common, test.decide(claim, estimate, ratios, 0, math.nan))


# -- decisions ---------------------------------------------------------------------------------------

def _decide_looks(tested_at: Callable[[int], list[ClaimResult]], looks: int, schedule: tuple[int, ...],
                  design: Schedule, alpha: float) -> list[ClaimResult]:
    """Decide every claim look by look: Holm over the family at each look, where a claim 'crosses'
    at level a when its test reached the look's nominal level for a at this or any earlier look.
    A claim keeps the first decision it reaches; FUTILE when it cannot be decided by the last look.
    Looks stop once every claim is decided: later seeds cannot change a decision."""
    history: dict[tuple, list[ClaimResult | None]] = {}
    families: dict[str, list[tuple]] = {}
    decided: set[tuple] = set()
    latest: dict[tuple, ClaimResult] = {}  # each claim as decided at the last look that tested it
    for k in range(looks):
        for result in tested_at(k):
            ident = _identity(result)
            if ident in decided:  # not tested again: a sequential run stops the arms only decided claims read
                continue
            if ident not in history:
                history[ident] = [None] * k
                if result.in_family:
                    families.setdefault(result.family, []).append(ident)
            history[ident].append(result)
        for entries in history.values():
            entries.extend([None] * (k + 1 - len(entries)))
        passes = _holm(families, alpha, lambda ident, a, k=k: _crossed(history[ident], schedule, design, a, k, "p_value"))
        fails = _holm(families, alpha, lambda ident, a, k=k: _crossed(history[ident], schedule, design, a, k, "p_fail"))
        for ident, entries in history.items():
            result = entries[k]
            if result is None or ident in decided:
                continue
            chosen = _decide_one(result, ident in passes.levels, passes, fails, ident, alpha, schedule, design, k)
            if design.sequential:
                chosen = _futile(chosen, schedule, design, k, alpha)
            latest[ident] = chosen
            if chosen.status in DECIDED:
                decided.add(ident)
        if all(ident in decided for ident in history):
            break
    out = []
    p_adjusted = _fixed_holm(families, history) if not design.sequential else {}
    for ident in history:
        result = latest[ident]
        out.append(replace(result, looks=len(schedule), sequential=design.sequential, mde=_mde(result),
                           p_adjusted=p_adjusted.get(ident) if result.p_value is not None else None))
    return out


def _identity(result: ClaimResult) -> tuple:
    return (id(result.claim), result.contrast, result.point, result.key)


def _crossed(history: list[ClaimResult | None], schedule: tuple[int, ...], design: Schedule, level: float, k: int,
             which: str, guarded: bool = True) -> bool:
    """Whether the claim's ``which`` test reached its nominal level at look k or before (``guarded``:
    confirmed by the sign-flip test at the same bound and level where the pairs can reach it)."""
    levels = design.levels(schedule, level)
    for j in range(k + 1):
        result = history[j]
        p = None if result is None else getattr(result, which)
        if p is not None and p <= levels[j] and (not guarded or _flip_confirms(result, which, levels[j])):
            return True
    return False


def _flip_confirms(result: ClaimResult, which: str, level: float) -> bool:
    """The sign-flip test of the same hypothesis reaches ``level`` too, or cannot with these pairs."""
    flip = result.p_flip if which == "p_value" else result.p_flip_fail
    if flip is None or result.mean_estimate is None or _exact(result.mean_estimate):
        return True
    return smallest_one_sided_sign_flip_p(result.n) > level or flip <= level


@dataclass(frozen=True)
class HolmStep:
    """Holm's step-down over the family at one look: the level each claim was tested at."""

    levels: Mapping[tuple, float]
    rejected: frozenset


def _holm(families: Mapping[str, list[tuple]], alpha: float, crossed: Callable[[tuple, float], bool]) -> HolmStep:
    """In each family on its own: reject every claim that crosses at alpha / (claims left), repeat
    with the rest; a rejected claim's level is the one it was rejected at, the others' the last level
    compared with. Every family member gets a level."""
    levels: dict[tuple, float] = {}
    rejected: set[tuple] = set()
    for family in families.values():
        remaining = list(family)
        while remaining:
            level = alpha / len(remaining)
            newly = [ident for ident in remaining if crossed(ident, level)]
            for ident in remaining:
                levels[ident] = level
            if not newly:
                break
            rejected.update(newly)
            remaining = [ident for ident in remaining if ident not in rejected]
    return HolmStep(levels, frozenset(rejected))


def _decide_one(result: ClaimResult, in_family: bool, passes: HolmStep, fails: HolmStep, ident: tuple,
                alpha: float, schedule: tuple[int, ...], design: Schedule, k: int) -> ClaimResult:
    """One claim's status at look k (a claim with nothing to test, VACUOUS or INSUFFICIENT, at this look too)."""
    if result.p_value is None and result.p_fail is None:
        return replace(result, look=k + 1)
    history = [result] * (k + 1)  # a deterministic claim's p-values do not change between looks
    if in_family:
        passed, failed = ident in passes.rejected, ident in fails.rejected
        level = fails.levels[ident] if failed and not passed else passes.levels[ident]
    else:
        level = alpha
        passed = _crossed(history, schedule, design, alpha, k, "p_value")
        failed = not passed and _crossed(history, schedule, design, alpha, k, "p_fail")
    status = PASS if passed else (FAIL if failed else INCONCLUSIVE)
    if status == PASS and result.dropped:
        status = INCONCLUSIVE
    nominal = design.levels(schedule, level)[k]
    blocked = status == INCONCLUSIVE and any(
        _crossed(history, schedule, design, level, k, which, guarded=False)
        and not _crossed(history, schedule, design, level, k, which) for which in ("p_value", "p_fail"))
    estimate = result.mean_estimate
    interval = estimate.interval_at(nominal) if estimate is not None and estimate.n >= 2 else None
    decided = replace(result, status=status, level=level, nominal_level=nominal, decision_interval=interval,
                      look=k + 1, skew_blocked=blocked)
    return _which_way(decided)


def _which_way(result: ClaimResult) -> ClaimResult:
    """Say where the deciding interval lies beside 0 as well as beside the claim's boundary, as the
    claim's test reads it (a superiority claim surely short of its margin but surely better than 0 is
    SHORT OF MARGIN)."""
    interval, sign = result.decision_interval, result.better_sign
    if interval is None or sign == 0 or result.status not in (PASS, FAIL):
        return result
    low, high = oriented(interval, sign)
    status, which_way = result.test.which_way(result.claim, result.status, low, high)
    return replace(result, status=status, which_way=which_way) if which_way else result


def _mde(result: ClaimResult) -> float | None:
    """What the claim could have found, as its test powers it (80% power at its n, its spread and the
    level it was tested at)."""
    estimate = result.mean_estimate
    if estimate is None or result.nominal_level is None:
        return None
    return result.test.mde(result.claim, estimate, result.nominal_level)


def _futile(result: ClaimResult, schedule: tuple[int, ...], design: Schedule, k: int, alpha: float) -> ClaimResult:
    """FUTILE when neither a pass nor a fail (nor, for a vacuous claim, its reference) can plausibly be
    reached by the last look: conditional power under the current estimate below the design's threshold."""
    if k >= len(schedule) - 1 or not design.may_stop_futile(schedule[k]) or not result.open:
        return result
    fraction = schedule[k] / schedule[-1]
    if result.status == VACUOUS and result.reference is not None and result.reference.p_value is not None:
        final = design.levels(schedule, alpha)[-1]
        power = conditional_power(result.reference.p_value, fraction, final)
        if power < design.futility:
            return replace(result, status=FUTILE, detail=(
                f"futile: reference {result.reference.contrast} cannot be established by {schedule[-1]} seeds "
                f"(conditional power {power:.2f} < {design.futility:g})"))
        return result
    if result.p_value is None or result.p_fail is None or result.level is None:
        return result
    final = design.levels(schedule, result.level)[-1]
    to_pass = conditional_power(result.p_value, fraction, final)
    to_fail = conditional_power(result.p_fail, fraction, final)
    if max(to_pass, to_fail) < design.futility:
        return replace(result, status=FUTILE, detail=(
            f"futile: conditional power to pass {to_pass:.2f} and to fail {to_fail:.2f} by {schedule[-1]} seeds "
            f"(< {design.futility:g}); {result.detail}"))
    return result


def _fixed_holm(families: Mapping[str, list[tuple]], history: Mapping[tuple, list[ClaimResult | None]]
                ) -> dict[tuple, float]:
    """Holm-adjusted pass p-values of a fixed design, family by family (members without a p-value count as 1)."""
    adjusted: dict[tuple, float] = {}
    for family in families.values():
        finals = [history[ident][-1] for ident in family]
        ps = [1.0 if r is None or r.p_value is None else r.p_value for r in finals]
        adjusted.update(zip(family, holm_adjust(ps)))
    return adjusted


def _skewness(differences: tuple[float, ...]) -> float | None:
    """The sample skewness of the paired differences (bias-corrected), None below 3 pairs or without spread."""
    if len(differences) < 3 or float(np.std(differences)) == 0.0:
        return None
    return float(scipy.stats.skew(differences, bias=False))


def _missing_cannot_pass(result: ClaimResult) -> ClaimResult:
    """A claim with dropped pairs cannot PASS (set at decision time): a value missing not at random
    (the worst seeds diverging to NaN) must not help a claim; a fail stays a fail."""
    if not result.dropped:
        return result
    why = f"{result.dropped} pair(s) dropped (missing or non-finite): a pass needs every pair"
    return replace(result, detail=f"{result.detail}; {why}")


def _undecided(claim: ClaimSpec, contrast: str, point: str, key: str, detail: str, family: str) -> ClaimResult:
    """A claim that could not be tested: it stays in its Holm family at p = 1 (it does not shrink it)."""
    return ClaimResult(claim, contrast, point, key, INCONCLUSIVE, 0, None, None, detail,
                       in_family=not claim_test(claim.test).exact, family=family)
