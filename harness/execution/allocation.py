"""Arm-level allocation in a sequential suite: from the second look on, a look runs only the arms that
a question still open at the last look reads.

What a decision reads, and so what must keep running:

- a claim reads the paired seeds of its contrast's two arms (and of its reference contrast's) up to
  the look at which it is decided; a decided claim (PASS, FAIL, FUTILE) keeps that decision and is not
  tested again, so an arm that only decided claims read adds nothing any claim reads;
- premises and validity are read on the last look's seeds, so every arm a premise or the validity
  controls read runs at every look.

An arm every question has finished with stops; a stopped arm does not start again (a decided claim
stays decided, and the other readers never let their arms go), so every trial a decision reads is run
exactly as under ``all`` (every arm at every look) and every decision is the same.
"""
from __future__ import annotations

from typing import Iterable

from harness.analysis.decide.claims import DECIDED, evaluate_claims
from harness.analysis.decide.verdicts import ContrastVariant, contrast_variants, variants_named
from harness.analysis.run_results import RunResults
from harness.execution.trials import Trial

ALLOCATIONS = ("open", "all")  # open: later looks run what an open question reads; all: every arm at every look
Cell = tuple[str, str]  # (arm label, sweep point label): the unit a look runs or leaves out


def needed_cells(results: RunResults) -> set[Cell]:
    """The (arm label, point) cells a further look must run, judged on the looks ``results`` holds."""
    variants = contrast_variants(results)
    points = results.point_labels()
    needed: set[Cell] = set()
    for claim in evaluate_claims(results, premises=[]):  # its own decision: a premise overlays it at the end
        if claim.status in DECIDED:
            continue
        readers = variants_named(variants, claim.contrast)
        if claim.claim.reference:
            readers += variants_named(variants, str(claim.claim.reference))
        needed |= {cell for variant in readers for cell in _pair(variant, [claim.point])}
    for premise in results.stored.premises:
        if premise.arm:
            needed |= _cells(results.arm_labels(premise.arm), points)
        for variant in variants_named(variants, str(premise.contrast or "")):
            needed |= _pair(variant, points)
    validity = results.stored.validity
    if validity is not None:
        for arm in (validity.control, validity.positive, validity.negative):
            if arm:
                needed |= _cells(results.arm_labels(arm), points)
    return needed


def allocate(trials: list[Trial], previous: list[Trial], new_seeds: Iterable[int], needed: set[Cell]) -> list[Trial]:
    """A look's trials: those the earlier looks ran, and of its new seeds those of the needed cells."""
    ran = {_where(t) for t in previous}
    fresh = set(new_seeds)
    return [t for t in trials
            if _where(t) in ran or (t.seed in fresh and (t.arm_label, t.point_label) in needed)]


def stopped_arms(previous: list[Trial], trials: list[Trial], last_batch: Iterable[int],
                 new_seeds: Iterable[int]) -> list[str]:
    """Arm labels the last look's new seeds ran and this look's new seeds do not: those that stop here."""
    ran, fresh = set(last_batch), set(new_seeds)
    running = {t.arm_label for t in trials if t.seed in fresh}
    return sorted({t.arm_label for t in previous if t.seed in ran} - running)


def _where(trial: Trial) -> tuple[str, str, int]:
    return trial.arm_label, trial.point_label, trial.seed


def _pair(variant: ContrastVariant, points: list[str]) -> set[Cell]:
    return _cells([variant.treatment_label, variant.control_label], points)


def _cells(labels: list[str], points: list[str]) -> set[Cell]:
    return {(label, point) for label in labels for point in points}
