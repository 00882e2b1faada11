"""What seed batches change in a sealed study: its trials rerun in batches, its verdicts decided again.

For each bundle named (``evidence/<suite>/<hash>.jsonl.gz``), its recorded trials are written to a results
folder, rerun by ``harness reproduce --seed-batch K`` (the trials of a task that trains seeds as one model
in batches of K, every other trial alone), and the rerun is analysed as the original was. Prints, per
bundle, how many values came back bit-identical, the largest relative difference among the others (by
metric kind), and whether every claim's result and every premise's status is the sealed summary's.
Run: python tests/benchmarks/batched_verdicts.py evidence/er2_mqar/5aac594a.jsonl.gz [...] [--seed-batch 8]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from harness import api
from harness.core.stored_fields import as_stored
from harness.core.terminal import Console
from harness.evidence.bundle import read_bundle
from harness.store import RunFolder


def decisions(summary: dict) -> list[tuple]:
    """Every claim's result and every premise's status, in order."""
    claims = [(c["contrast"], c.get("point"), c["metric"], c["result"]) for c in summary.get("claims", [])]
    premises = [(p.get("name"), p.get("status")) for p in summary.get("premises", [])]
    return claims + premises


def check(path: Path, seed_batch: int, scratch: Path) -> None:
    bundle = read_bundle(path)
    recorded = RunFolder(scratch / "recorded", bundle.suite, bundle.profile)
    recorded.save_suite(dict(bundle.suite_json))
    for record in bundle.trials:
        recorded.save_trial(record)
    plan = api.plan_reproduction(str(recorded.path), mlflow=False, out=scratch / "batched", device="cpu",
                                 seed_batch=seed_batch)
    outcome = api.reproduce(plan, Console(quiet=True))
    comparison = outcome.comparison
    kinds = {name: spec["kind"] for name, spec in bundle.suite_json["metrics"].items()}
    worst: dict[str, tuple[float, str]] = {}
    for item in comparison.differing:
        family = item.key.split("@")[0]
        kind = kinds.get(family, "info")
        if kind == "speed":
            continue
        scale = max(abs(item.recorded or 0.0), 1e-12)
        relative = abs((item.reproduced or 0.0) - (item.recorded or 0.0)) / scale
        if relative > worst.get(kind, (0.0, ""))[0]:
            worst[kind] = (relative, item.key)
    [rerun] = api.report(scratch / "batched")
    again = json.loads(rerun.summary_path.read_text())
    same = decisions(again) == decisions(as_stored(bundle.summary))
    batched = sum(1 for r in outcome.records if r.seed_batch)
    print(f"{bundle.name}: {len(outcome.records)} trials rerun ({batched} in seed batches of up to {seed_batch}); "
          f"{len(comparison.exact) - len(comparison.differing)} of {len(comparison.exact)} values identical; largest relative "
          "difference "
          + (", ".join(f"{kind} {value:.2e} ({key})" for kind, (value, key) in sorted(worst.items())) or "none")
          + f"; claims and premises {'unchanged' if same else 'CHANGED'}", flush=True)
    if not same:
        for before, after in zip(decisions(as_stored(bundle.summary)), decisions(again)):
            if before != after:
                print(f"  {before} -> {after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--seed-batch", type=int, default=8)
    args = parser.parse_args()
    for path in args.bundles:
        with tempfile.TemporaryDirectory(prefix="harness-batched-verdicts-") as scratch:
            check(path, args.seed_batch, Path(scratch))


if __name__ == "__main__":
    main()
