"""Soak: random SIGKILLs of a first run into a new results folder, then concurrent runs (not a test).

    PYTHONPATH=$PWD python tests/fault_soak.py [--kills 20] [--window 2.0] [--repo CHECKOUT]

Each kill: a new results folder, `harness run toy --profile smoke`, SIGKILL at a random moment
within --window seconds after the MLflow store (or its temporary file) first appears, then a
normal run. A store is broken when that run fails; any other breach of "nothing lost, nothing
duplicated" (tests/fault_injection.check_results) is counted too. Then two runs at once of the same
suite, and of two suites, into a new folder, with trial files and MLflow runs counted per suite.
--repo measures another checkout of harness (e.g. `git archive` of an older commit).
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

from fault_injection import (REPO, TESTS, check_results, cli_env, hang_guard, harness, mlflow_runs, slow_suite, start,
                             trial_records)


def store_appeared(results: Path) -> bool:
    return results.is_dir() and any("mlflow.db" in p.name for p in results.iterdir())


def one_kill(work: Path, suite: Path, env: dict, window: float, rng: random.Random) -> tuple[str, list[str]]:
    results = work / "results"
    proc = start("run", str(suite), "--profile", "smoke", "--results", str(results), env=env)
    deadline = time.time() + 120
    while not store_appeared(results) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(rng.uniform(0, window))
    state = "finished before the kill" if proc.poll() is not None else (
        "store in place" if (results / "mlflow.db").exists() else "store being created")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    rerun = harness("run", str(suite), "--profile", "smoke", "--results", str(results), env=env)
    if rerun.returncode != 0:
        last = (rerun.stderr.strip().splitlines() or ["?"])[-1]
        return state, [f"BROKEN STORE: rerun exit {rerun.returncode}: {last[:160]}"]
    return state, check_results(results)


def concurrent(work: Path, suites: list[Path], env: dict) -> str:
    results = work / "results"
    procs = [start("run", str(s), "--profile", "smoke", "--results", str(results), env=env) for s in suites]
    outcomes = [(p.wait(timeout=hang_guard(600)), p.communicate()[1]) for p in procs]
    lines = [f"  exit codes {[code for code, _ in outcomes]}"]
    lines += [f"  refused: {err.strip().splitlines()[-1][:150]}" for code, err in outcomes if code == 2]
    for name in sorted({s.stem for s in suites}):
        runs, parents = mlflow_runs(results, name) if (results / "mlflow.db").exists() else ([], [])
        ids = [r.data.tags.get("harness.trial_id") for r in runs]
        lines.append(f"  {name}: {len(trial_records(results, name))} trial files, {len(runs)} MLflow trial runs "
                     f"({len(set(ids))} distinct ids, {sum(r.info.status == 'FINISHED' for r in runs)} FINISHED), "
                     f"parents {sorted(p.info.status for p in parents)}; problems: {check_results(results, name) or 'none'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--window", type=float, default=2.0, help="seconds after the store appears")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repo", type=Path, default=REPO, help="the harness checkout to measure")
    args = parser.parse_args()
    env = cli_env(args.repo.resolve())
    os.chdir(args.repo)  # `python -m harness` imports from the working directory first
    rng = random.Random(args.seed)
    toy = TESTS / "suites" / "toy.yaml"
    broken = other = 0
    with tempfile.TemporaryDirectory(prefix="fault-soak-") as tmp:
        for i in range(args.kills):
            work = Path(tmp) / f"kill{i}"
            work.mkdir()
            state, problems = one_kill(work, toy, env, args.window, rng)
            broken += any(p.startswith("BROKEN STORE") for p in problems)
            other += bool(problems) and not any(p.startswith("BROKEN STORE") for p in problems)
            print(f"kill {i + 1:2d} ({state}): {'; '.join(problems) or 'ok'}", flush=True)
        print(f"\n{args.kills} kills: {broken} broken stores, {other} other breaches")
        for label, names in (("same suite twice", ["toy", "toy"]), ("two suites", ["toy", "toy2"])):
            work = Path(tmp) / label.replace(" ", "-")
            work.mkdir()
            suites = [slow_suite(work, toy, name, seconds_per_step=0.02) for name in names]
            print(f"\n{label} at once into a new folder:\n{concurrent(work, suites, env)}", flush=True)
    sys.exit(1 if broken or other else 0)


if __name__ == "__main__":
    main()
