"""Serial against side-by-side trials on one suite, in one invocation of this script.

Runs the suite three times through the CLI, each into its own results folder without MLflow:
serial at the default thread count (the old default run), serial at one thread, and the parallel
executor at one thread per trial. Prints each wall time, the ratios, and whether the parallel
run's quality values and verdicts equal the one-thread serial run's bit for bit.
Run: python tests/benchmarks/side_by_side.py suites/vocab.yaml --profile ci [--workers N]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.store import iter_runs, iter_trial_files, read_trial


def run(suite: Path, profile: str, results: Path, *options: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "run", str(suite), "--profile", profile, "--results",
                    str(results), "--no-mlflow", *options], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def outcomes(results: Path) -> tuple[dict, dict]:
    """Quality metrics per trial, and every verdict and claim result, of each stored run."""
    quality, verdicts = {}, {}
    for run_dir in iter_runs(results):
        kinds = {name: m["kind"] for name, m in json.loads((run_dir / "suite.json").read_text())["metrics"].items()}
        for record in map(read_trial, iter_trial_files(run_dir)):
            quality[record.trial_id] = {k: v for k, v in record.metrics.items() if kinds.get(k) == "quality"}
        summary = json.loads((run_dir / "report" / "summary.json").read_text())
        verdicts[run_dir.parent.name] = (
            [(c["contrast"], c.get("point"), c["metric"], c["result"]) for c in summary["claims"]],
            [(r["contrast"], r.get("point"), r["metric"], r["verdict"]) for r in summary.get("contrasts", [])],
        )
    return quality, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--workers", type=int)
    args = parser.parse_args()
    workers = ["--workers", str(args.workers)] if args.workers else []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        default = run(args.suite, args.profile, root / "default", "--executor", "serial")
        serial = run(args.suite, args.profile, root / "serial1", "--executor", "serial", "--threads", "1")
        parallel = run(args.suite, args.profile, root / "parallel", "--executor", "parallel", "--threads", "1", *workers)
        same_quality = outcomes(root / "serial1")[0] == outcomes(root / "parallel")[0]
        same_verdicts = outcomes(root / "serial1")[1] == outcomes(root / "parallel")[1]
    print(f"{args.suite} --profile {args.profile}")
    print(f"serial, default threads: {default:.1f}s")
    print(f"serial, 1 thread:        {serial:.1f}s")
    print(f"parallel, 1 thread each: {parallel:.1f}s")
    print(f"ratio serial(default threads)/parallel: {default / parallel:.2f}; serial(1 thread)/parallel: "
          f"{serial / parallel:.2f}")
    print(f"quality values bit-identical to serial(1 thread): {same_quality}; verdicts identical: {same_verdicts}")
    if not (same_quality and same_verdicts):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
