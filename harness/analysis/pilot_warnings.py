"""Before a run: a claim whose margin is far below what its seeds can resolve (``validate``/``run --pilot``).

A pilot (a smoke or exploratory run of the suite, as ``harness plan --from`` reads it) gives each claim's
spread of paired differences. At the design's most seeds (``max_seeds``, or a fixed design's seeds) and
the level ``plan`` plans at (the one-sided claim level over the claim's Holm family), the t test finds a
distance from the claim's bound of ``detectable_effect(n, level, 80%) x sd`` (its minimum detectable
effect, MDE, beyond the bound). When that is more than twice the margin, the claim can hardly pass
whatever the arms do (a non-inferiority claim between equal arms stands one margin from its bound), and
the seeds are spent on an answer the design cannot give: one warning line per claim, before anything runs.

Claims without a margin are skipped: a superiority claim of margin 0 and a ``ratio`` or ``equal``
claim state no effect to compare the MDE with (``harness plan --from`` gives their power at the pilot's
effect). A relative margin is read as the pilot's reference effect resolves it; a claim whose pilot
has no spread (fewer than 2 pairs) is skipped too. The MDE is normal theory: a design that declares
a skewness bound needs a little more, so the warning errs on the side of silence.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from harness.analysis.decide.claims import ClaimResult, evaluate_claims
from harness.analysis.decide.looks import claim_alpha
from harness.analysis.decide.seed_planning import family_sizes
from harness.analysis.run_results import ResultsError, load_results
from harness.analysis.stats.paired_stats import minimum_detectable_effect
from harness.store import iter_runs
from harness.suite.resolved_suite import Suite

RESOLUTION = 2.0  # the warning's threshold: MDE at max_seeds over the margin


class PilotError(ValueError):
    """A pilot that cannot be read (one line, naming the option that gave it)."""


def pilot_claims(pilot: Path, suite: str, option: str = "--pilot",
                 warn: Callable[[str], None] | None = None) -> list[ClaimResult]:
    """The claim results of the stored run of ``suite`` under ``pilot`` (a results folder or one run's
    folder), as ``harness plan --from`` reads them; PilotError names ``option`` when there is none."""
    pilot = Path(pilot)
    if not pilot.exists():
        raise PilotError(f"{option}: {pilot} does not exist")
    runs = iter_runs(pilot)
    if not runs:
        raise PilotError(f"{option}: no stored results under {pilot} (expected <suite>/<profile>/suite.json)")
    folder = next((p for p in runs if p.parent.name == suite), None)
    if folder is None:
        raise PilotError(f"{option} {pilot}: no stored run of suite {suite!r} there")
    try:
        results = load_results(folder)
        if results.stale_note and warn is not None:
            warn(results.stale_note)
        return evaluate_claims(results)  # reads the pilot's stored sequential design
    except ResultsError as exc:
        raise PilotError(str(exc)) from None


def most_seeds(suite: Suite) -> int:
    """The most seeds a run of the suite takes: a sequential design's max_seeds, else its seeds."""
    return max(suite.sequential.max_seeds, len(suite.seeds)) if suite.sequential is not None else len(suite.seeds)


def margin_warnings(suite: Suite, claims: Sequence[ClaimResult]) -> list[str]:
    """One line per claim of the pilot whose MDE at the suite's most seeds is more than twice its margin."""
    sizes = family_sizes([c.model_dump(exclude_none=True) for c in suite.claims],
                         {m.name: m for m in suite.task.metrics})
    alpha = claim_alpha(suite.confidence)
    seeds = most_seeds(suite)
    lines = []
    for claim in claims:
        margin = _margin(claim)
        estimate = claim.mean_estimate
        if not claim.in_family or margin is None or margin <= 0 or estimate is None or estimate.sd is None:
            continue
        mde = minimum_detectable_effect(estimate.sd, seeds, alpha / max(sizes.get(claim.family, 1), 1))
        if mde is None or mde <= RESOLUTION * margin:
            continue
        point = f" @ {claim.point}" if claim.point else ""
        most = "max_seeds" if suite.sequential is not None else "seeds"
        lines.append(f"warning: {suite.name} ({suite.profile}): claim {claim.contrast} {claim.key}{point} "
                     f"{claim.statement}: MDE {mde:.4g} at {most} {seeds} (the pilot's sd "
                     f"{estimate.sd:.4g} over {estimate.n} seeds) is more than twice its margin {margin:.4g}: it can "
                     f"hardly pass whatever the arms do; widen the margin or allow more seeds (harness plan --from)")
    return lines


def pilot_warnings(suite: Suite, pilot: Path | None, warn: Callable[[str], None] | None = None) -> list[str]:
    """``margin_warnings`` of ``suite`` at the pilot under ``pilot`` (nothing, and nothing read, without one)."""
    if pilot is None:
        return []
    return margin_warnings(suite, pilot_claims(pilot, suite.name, "--pilot", warn))


def _margin(claim: ClaimResult) -> float | None:
    """The claim's absolute margin: declared, or resolved from the pilot's reference effect."""
    if claim.claim.margin is not None:
        return float(claim.claim.margin)
    if claim.reference is not None and claim.reference.margin is not None:
        return float(claim.reference.margin)
    return None
