"""``harness programme``: each claim across its sealed designs, in the order they ran, with its verdicts
and a programme verdict that pays for every redesign.

A claim redesigned after each undecided or unwelcome result gets more chances at a false PASS, so the
programme shows every design, not only the latest, and decides the question over all of its registered
studies at once: each study's p-value (Holm-adjusted, times the looks it took: valid whatever its stopping)
becomes an e-value through the calibrator e = 1 / (2 sqrt(p)), and the programme's e-value is their
product. Under the null the product is a nonnegative supermartingale however the decision to run another
study depended on the ones before (optional continuation), so by Ville's inequality it ever reaches 1/alpha
with probability at most alpha: the programme PASSes only there. An abandoned registration counts as a
study with e = 1, and so does a study the ledger invalidates. Studies sealed before the ledger began are listed, not counted, with the number of
versions of their suite file in git history.

Beside the latest verdict (never in its place) comes an exploratory pooled estimate over all sealed seed
sets: the mean paired difference with a random effect per design (DerSimonian-Laird), whose interval is a
normal one at the suite's confidence. Designs differ in margins, looks and sometimes in what they measure,
so the pooled figure decides nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from scipy import stats

from harness.analysis.present.markdown_tables import plain
from harness.analysis.present.stored_summary import ClaimSummary, ContrastSummary
from harness.evidence.bundle import SUFFIX, Bundle, read_bundle
from harness.evidence.ledger import Ledger
from harness.evidence.bundle_verdicts import Verdict, claim_name, claim_verdict
from harness.suite.claim_needs import reads_ratios
from harness.core.terminal import format_table, format_value


@dataclass(frozen=True)
class Sealing:
    """One claim in one sealed design: its verdict and the seed-level differences behind it."""

    bundle: Bundle
    verdict: Verdict
    differences: tuple[float, ...]  # treatment - control per seed (empty for a ratio claim)
    p_value: float | None = None  # one-sided, Holm-adjusted where the claim is in a Holm family
    looks: int = 1  # the looks its sequential design took

    @property
    def registered(self) -> bool:
        return self.bundle.stored.registration is not None

    @property
    def evalue(self) -> float:
        return study_evalue(self.p_value, self.looks)


def study_evalue(p_value: float | None, looks: int = 1) -> float:
    """One study's e-value from its one-sided p-value: the calibrator 1 / (2 sqrt(p)) (expectation at most 1
    for any valid p), the p-value first multiplied by the looks the study took (Bonferroni over its looks, so
    a sequential study's last-look p stays valid); a study with no p-value brings no evidence (1)."""
    if p_value is None or not math.isfinite(p_value):
        return 1.0
    adjusted = min(1.0, max(p_value, 0.0) * max(looks, 1))
    return 1.0 / (2.0 * math.sqrt(adjusted)) if adjusted > 0 else math.inf


def programme_passes(evalues: Sequence[float], alpha: float) -> bool:
    """Whether the running product of the studies' e-values ever reached 1/alpha (Ville's inequality keeps
    that at most alpha under the null, whatever made each next study run)."""
    product = 1.0
    for evalue in evalues:
        product *= evalue
        if product >= 1 / alpha:
            return True
    return False


@dataclass(frozen=True)
class Pooled:
    estimate: float
    low: float
    high: float
    tau2: float  # between-design variance
    designs: int


def pool(effects: Sequence[tuple[float, float]], confidence: float = 0.95) -> Pooled | None:
    """DerSimonian-Laird random-effects mean of (estimate, variance) pairs; None without two designs of
    positive variance."""
    usable = [(y, v) for y, v in effects if v > 0 and math.isfinite(y) and math.isfinite(v)]
    if len(usable) < 2:
        return None
    weights = [1 / v for _, v in usable]
    total = sum(weights)
    fixed = sum(w * y for w, (y, _) in zip(weights, usable)) / total
    q = sum(w * (y - fixed) ** 2 for w, (y, _) in zip(weights, usable))
    scale = total - sum(w * w for w in weights) / total
    tau2 = max(0.0, (q - (len(usable) - 1)) / scale)
    random = [1 / (v + tau2) for _, v in usable]
    estimate = sum(w * y for w, (y, _) in zip(random, usable)) / sum(random)
    half = stats.norm.ppf(0.5 + confidence / 2) / math.sqrt(sum(random))
    return Pooled(estimate, estimate - half, estimate + half, tau2, len(usable))


def bundles_under(root: Path) -> dict[str, list[Bundle]]:
    """Every bundle under ``root`` (``<suite>/<hash>.jsonl.gz``) by suite, each suite's in the order they ran."""
    by_suite: dict[str, list[Bundle]] = {}
    for path in sorted(Path(root).glob(f"*/*{SUFFIX}")):
        bundle = read_bundle(path)
        by_suite.setdefault(bundle.suite, []).append(bundle)
    return {suite: sorted(found, key=lambda b: (b.first_start, b.design)) for suite, found in sorted(by_suite.items())}


def claim_sealings(bundles: Sequence[Bundle]) -> dict[str, list[Sealing]]:
    """Each claim name of a suite's bundles: its sealing in every design that decides it, in order."""
    found: dict[str, list[Sealing]] = {}
    for bundle in bundles:
        for claim in bundle.summary.claims:
            row = bundle.summary.contrast_row(claim)
            found.setdefault(claim_name(claim), []).append(Sealing(
                bundle, claim_verdict(claim), _differences(claim, row), _first_number(claim.p_holm, claim.p_value),
                max(claim.look, 1)))
    return found


def _first_number(*values: float | None) -> float | None:
    """The first value that is a number (a claim outside a Holm family has no p_holm)."""
    return next((float(v) for v in values if v is not None), None)


def _differences(claim: ClaimSummary, row: ContrastSummary | None) -> tuple[float, ...]:
    """The claim's per-seed differences (its contrast row's); none for a ratio test or a seed without one."""
    if reads_ratios(claim.test) or row is None or any(v is None for v in row.differences):
        return ()
    return tuple(float(v) for v in row.differences)


def _effect(differences: Sequence[float]) -> tuple[float, float] | None:
    """The mean difference and its variance (sd^2 / n); None under two seeds."""
    n = len(differences)
    if n < 2:
        return None
    mean = sum(differences) / n
    return mean, sum((d - mean) ** 2 for d in differences) / (n - 1) / n


def render(root: Path, ledger: Ledger | None = None, versions: Callable[[str], int] | None = None) -> str:
    """The programme of every suite with bundles under ``root``: ``ledger`` gives the abandoned registrations,
    ``versions(suite_file)`` how many versions of a suite file git holds (for studies sealed before the ledger)."""
    sections = []
    abandoned = [r for r in (ledger.registrations() if ledger else []) if r.abandoned is not None]
    invalidated = {r.id for r in (ledger.registrations() if ledger else []) if r.invalidated is not None}
    for suite, bundles in bundles_under(root).items():
        confidence = float(bundles[-1].stored.confidence or 0.95)
        alpha = (1 - confidence) / 2
        dropped = [r for r in abandoned if r.entry.suite == suite]
        legacy = [b for b in bundles if b.stored.registration is None]
        lines = [f"## {suite}: {len(bundles)} sealed design(s), oldest first; {len(bundles) - len(legacy)} registered"
                 f"{f', {len(dropped)} registration(s) abandoned' if dropped else ''}"]
        if legacy and versions is not None:
            lines.append(f"sealed before the ledger (not counted in the programme verdict): "
                         f"{', '.join(b.design for b in legacy)}; {legacy[-1].suite_file} has "
                         f"{versions(legacy[-1].suite_file)} versions in git history")
        for name, sealings in claim_sealings(bundles).items():
            rows = [[s.bundle.design, _study(s, invalidated), s.bundle.first_start, _seed_text(s.bundle.seeds),
                     plain(s.verdict.text()), format_value(_evalue(s, invalidated)) if s.registered else "-"]
                    for s in sealings]
            lines += ["", plain(name), format_table(["design", "study", "first trial", "seeds", "verdict", "e-value"],
                                                    rows)]
            counted = [_evalue(s, invalidated) for s in sealings if s.registered] + [1.0] * len(dropped)
            product = math.prod(counted)
            if not counted:
                lines.append("programme verdict: none yet (no registered study)")
            else:
                verdict = "PASS" if programme_passes(counted, alpha) else "not shown"
                lines.append(f"programme verdict: {verdict} (e-value {format_value(product)} over {len(counted)} "
                             f"registered stud{'y' if len(counted) == 1 else 'ies'}; PASS at {format_value(1 / alpha)}, "
                             f"which holds the one-sided error at {format_value(alpha)} whatever led to each redesign)")
            latest = sealings[-1]
            pooled = pool([e for s in sealings if (e := _effect(s.differences)) is not None], confidence)
            pooled_text = ("pooled: not computed (needs two designs with seed-level differences)" if pooled is None else
                           f"pooled over {pooled.designs} designs (exploratory; DerSimonian-Laird, a random effect per "
                           f"design): {format_value(pooled.estimate)} [{format_value(pooled.low)}, "
                           f"{format_value(pooled.high)}], tau^2 {format_value(pooled.tau2)}")
            lines.append(f"latest verdict: {plain(latest.verdict.result)} (design {latest.bundle.design}) | {pooled_text}")
        sections.append("\n".join(lines))
    return "\n\n".join(sections) if sections else f"no sealed bundles under {root}"


def _study(sealing: Sealing, invalidated: set[str]) -> str:
    if not sealing.registered:
        return "before the ledger"
    return "invalidated" if sealing.bundle.stored.registration in invalidated else "registered"


def _evalue(sealing: Sealing, invalidated: set[str]) -> float:
    """A registered study's e-value; an invalidated one brings no evidence (1)."""
    return 1.0 if sealing.bundle.stored.registration in invalidated else sealing.evalue


def _seed_text(seeds: set[int]) -> str:
    ordered = sorted(seeds)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))
