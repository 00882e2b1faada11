"""The numeric mode (``harness.core.numeric``) of a baseline and of a run: values of the two modes differ by
the kernels that computed them, not by the code, so the gate compares a run only with a baseline of its
own mode (exit 2 otherwise, like any baseline of another run), and a baseline comes from the
deterministic mode unless asked otherwise.

A baseline or a run made before modes were recorded names none: the gate compares it, and a
baseline is saved from it, as before modes existed.
"""
from __future__ import annotations

from pathlib import Path

from harness.analysis.run_results import RunResults
from harness.gating.values import BaselineEnvironment, GateError, trial_environments
from harness.core.numeric import DETERMINISTIC, OPTION


def refuse_other_mode(environment: BaselineEnvironment, results: RunResults, path: Path) -> None:
    """GateError when the baseline (its ``environment``) and the run both record a numeric mode and the two
    differ."""
    theirs = environment.numeric_mode
    ours = BaselineEnvironment.of_run(results).numeric_mode
    if theirs is None or ours is None or theirs == ours:
        return
    raise GateError(
        f"refusing to gate: baseline {path} was saved from a run in the {theirs} numeric mode, these results ran "
        f"in the {ours} mode (the two compute other floats from the same code); rerun the suite with "
        f"{OPTION} {theirs}, or save a baseline of this mode"
    )


def refuse_baseline_mode(results: RunResults, allowed: str = DETERMINISTIC) -> None:
    """GateError unless the finished trials that record a mode ran in one, and that mode is ``allowed``
    (the fast mode allows either)."""
    modes = sorted({env.numeric_mode for env in trial_environments(results) if env.numeric_mode is not None})
    if len(modes) > 1:
        raise GateError(f"{results.run_dir}: its trials ran in different numeric modes ({', '.join(modes)}); a "
                        "baseline must come from one (rerun the suite with --no-resume)")
    if allowed == DETERMINISTIC and modes and modes[0] != DETERMINISTIC:
        raise GateError(f"{results.run_dir}: ran in the {modes[0]} numeric mode; a baseline is saved from a "
                        f"deterministic run (rerun without {OPTION} {modes[0]}), or from this one with "
                        f"`harness baseline save {OPTION} {modes[0]}`")
