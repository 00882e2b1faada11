"""Where a run's time went, and where a sequential run stopped each arm: two short sections of the report.

The phase table splits a suite's time into training, evaluation (data, evaluation and timing outside
the training loops) and waiting on another trial's cached artifact, from each trial's record
(``harness.measure.phases``), and into the driver's analysis and MLflow seconds, from ``phases.json``,
which the run writes into its folder, so ``harness report`` shows the same table.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from harness.analysis.run_results import RunResults
from harness.core.trial_environment import TrialEnvironment
from harness.measure.phases import PHASE_DETAIL
from harness.store import write_json_atomic
from harness.core.terminal import format_table

PHASES_FILE = "phases.json"


@dataclass(frozen=True)
class DriverSeconds:
    """What the driver measured of one suite's run: its wall time, deciding its looks, mirroring to MLflow."""

    wall: float
    analysis: float
    mlflow: float
    slots: int  # trials the executor ran side by side


def save_driver_seconds(run_dir: Path, seconds: DriverSeconds) -> None:
    write_json_atomic(Path(run_dir) / PHASES_FILE, asdict(seconds))


def load_driver_seconds(run_dir: Path) -> DriverSeconds | None:
    """The last run's figures; None for a folder written before they were kept (or unreadable)."""
    try:
        data = json.loads((Path(run_dir) / PHASES_FILE).read_text(encoding="utf-8"))
        return DriverSeconds(float(data["wall"]), float(data["analysis"]), float(data["mlflow"]), int(data["slots"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Phases:
    """One suite's seconds by phase: trial-seconds for what trials did, wall seconds for the driver."""

    trials: int
    train: float
    evaluate: float
    waiting: float
    report: float  # building this report
    driver: DriverSeconds | None
    train_flops: float = 0.0  # counted in the training loops (torch's FLOP counter: matrix products, convolutions)
    peak_flops: float | None = None  # the trials' device's nominal fp32 peak (FLOP/s, one trial's threads)

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s over the training loops' trial-seconds (None before FLOPs were counted)."""
        return self.train_flops / self.train if self.train_flops and self.train > 0 else None

    @property
    def peak_fraction(self) -> float | None:
        achieved = self.achieved_flops
        return achieved / self.peak_flops if achieved is not None and self.peak_flops else None

    @property
    def trial_seconds(self) -> float:
        return self.train + self.evaluate + self.waiting


def phases(results: RunResults, report_seconds: float) -> Phases:
    """The phases of the trials ``results`` holds (finished ones), with the run's driver figures."""
    train = waiting = total = flops = 0.0
    peaks = set()
    for record in results.finished:
        split = record.details.get(PHASE_DETAIL) or {}
        total += record.wall_seconds
        train += float(split.get("train", 0.0))
        waiting += float(split.get("waiting", 0.0))
        flops += float(split.get("train_flops", 0.0))
        peaks.add(TrialEnvironment.of(record.environment).peak_fp32_flops or "unknown")
    peak = float(next(iter(peaks))) if len(peaks) == 1 and "unknown" not in peaks else None  # one machine's
    return Phases(len(results.finished), train, max(total - train - waiting, 0.0), waiting, report_seconds,
                  load_driver_seconds(results.run_dir), flops, peak)


def _flops(found: Phases) -> str:
    """'1.2 GFLOP/s (0.7% of 166 GFLOP/s)', or '-' before FLOPs were counted."""
    achieved = found.achieved_flops
    if achieved is None:
        return "-"
    fraction = found.peak_fraction
    return f"{achieved / 1e9:.2f} GFLOP/s" + (f" ({fraction:.1%} of {found.peak_flops / 1e9:.0f})" if fraction else "")


def _s(seconds: float) -> str:
    return f"{seconds:.1f}"


def render_phases(found: Phases) -> str:
    """'where the time went' with one row per phase: figures stored with the run, so that the report
    rebuilt from the same folder says the same (the time building it is the per-suite table's)."""
    driver = found.driver
    rows = [
        ["train", _s(found.train), f"trial-seconds in training loops ({found.trials} trials)"],
        ["evaluate", _s(found.evaluate), "trial-seconds of data, evaluation and timing outside training"],
        ["waiting", _s(found.waiting), "trial-seconds blocked on another trial's cached artifact"],
        ["FLOP/s", _flops(found), f"{found.train_flops / 1e9:.1f} GFLOP counted in training loops over their "
                                  "trial-seconds (and of the device's nominal fp32 peak at a trial's threads)"],
        ["analysis", _s(driver.analysis) if driver else "-", "seconds deciding the run's looks"],
        ["MLflow", _s(driver.mlflow) if driver else "-", "seconds mirroring trials and runs to MLflow"],
    ]
    if driver is not None:
        busy = found.trial_seconds / max(driver.slots, 1)
        rows.append(["other", _s(max(driver.wall - busy - driver.analysis - driver.mlflow, 0.0)),
                     "seconds storing records, starting workers, slots left idle"])
        rows.append(["wall", _s(driver.wall), f"the suite's last run: its trials, {driver.slots} at a time, and looks"])
    return "where the time went:\n" + format_table(["phase", "seconds", "of what"], rows)


def stopped_arms(results: RunResults) -> dict[str, int]:
    """Arm label -> the seeds it ran, for each arm of a sequential run that stopped before its last seed
    (its seeds a prefix of the run's: an arm short of seeds in the middle lost trials, it did not stop)."""
    if results.stored.sequential is None:
        return {}
    seeds = results.seeds
    ran: dict[str, set[int]] = {}
    for record in results.finished:
        ran.setdefault(record.arm_label, set()).add(record.seed)
    for failed in results.failed:
        if failed.seed is not None:
            ran.setdefault(failed.arm_label, set()).add(failed.seed)
    out = {}
    for label in results.arm_labels():
        have = ran.get(label, set())
        if 0 < len(have) < len(seeds) and have == set(seeds[:len(have)]):
            out[label] = len(have)
    return out


def render_allocation(results: RunResults) -> str:
    """One line naming each arm a sequential run stopped early and at how many seeds ('' when none)."""
    stopped = stopped_arms(results)
    if not stopped:
        return ""
    arms = ", ".join(f"{label} at {n}" for label, n in stopped.items())
    return (f"arms stopped once no open question read them (seeds run, of {len(results.seeds)}): {arms}. "
            "Exploratory contrasts with them read the seeds both arms have; their n (-k) counts the seeds not run.")


def render_suite_phases(rows: Sequence[tuple[str, Phases]]) -> str:
    """Every suite of a run in one table: the trials' seconds by phase and the driver's."""
    header = ["suite", "trials", "train", "evaluate", "waiting", "analysis", "MLflow", "wall", "training FLOP/s"]
    body = []
    for suite, found in rows:
        driver = found.driver
        body.append([suite, str(found.trials), _s(found.train), _s(found.evaluate), _s(found.waiting),
                     _s((driver.analysis if driver else 0.0) + found.report), _s(driver.mlflow) if driver else "-",
                     _s(driver.wall) if driver else "-", _flops(found)])
    return ("where the time went, per suite (train, evaluate, waiting: trial-seconds; analysis: the looks and "
            "the report; the rest: seconds):\n"
            + format_table(header, body))
