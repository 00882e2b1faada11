"""The mutation score may not fall: compare what ``mutmut run`` left in mutants/ with tests/mutation_score.json.

Run by ``tox -e mutation`` after mutmut (never by the test tiers: a full run takes hours on 2 cores). For each
folder of the decision core the committed file names the modules measured and the share of their mutants
the tests killed; a folder whose modules mutmut has checked fails the ratchet when its share is below the
committed one. A folder not (or not wholly) checked in this mutants/ is reported and left alone, so a run
limited to some modules (``mutmut run "harness.analysis.stats*"``) checks those.

    python tests/mutation_ratchet.py            # compare; exit 1 when a score fell
    python tests/mutation_ratchet.py --update   # write the measured scores (only ever upwards, per folder)
    python tests/mutation_ratchet.py --survivors  # list the surviving mutants of the measured modules

A mutant counts as killed when a test failed or it ran past mutmut's timeout (its behaviour was noticed);
one that no selected test reaches ("no tests") counts as a survivor, as does a suspicious one.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCORE_FILE = ROOT / "tests" / "mutation_score.json"
MUTANTS = ROOT / "mutants"

KILLED = {1, 3}  # a test failed (3: pytest's internal error, also a failure)
TIMEOUT = {36, 24, -24, 152, 255}  # past mutmut's CPU limit (SIGXCPU)
SURVIVED = {0}
# every other exit code of a checked mutant (5/33 no tests, 35 suspicious, segfaults) counts against the score
TOLERANCE = 1e-9


def module_results(module: str) -> dict[str, int | None] | None:
    """mutmut's exit code per mutant of one module (``harness/analysis/stats/paired_stats.py``); None when
    mutmut has not mutated it in this mutants/."""
    meta = MUTANTS / (module + ".meta")
    if not meta.is_file():
        return None
    return json.loads(meta.read_text())["exit_code_by_key"]


def tally(modules: list[str]) -> dict[str, int] | None:
    """Killed, survived and unchecked mutants over ``modules``; None when one was never mutated."""
    counts = {"mutants": 0, "killed": 0, "survived": 0, "unchecked": 0}
    for module in modules:
        results = module_results(module)
        if results is None:
            return None
        for code in results.values():
            counts["mutants"] += 1
            if code is None:
                counts["unchecked"] += 1
            elif code in KILLED or code in TIMEOUT:
                counts["killed"] += 1
            else:
                counts["survived"] += 1
    return counts


def score(counts: dict[str, int]) -> float:
    return counts["killed"] / counts["mutants"] if counts["mutants"] else 1.0


def survivors(modules: list[str]) -> list[str]:
    names = []
    for module in modules:
        for name, code in sorted((module_results(module) or {}).items()):
            if code is not None and code not in KILLED and code not in TIMEOUT:
                names.append(f"{name} (exit {code})")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="raise the committed scores to the measured ones")
    parser.add_argument("--survivors", action="store_true", help="list the surviving mutants")
    args = parser.parse_args(argv)
    committed = json.loads(SCORE_FILE.read_text())
    fell, measured_any = [], False
    for folder, entry in committed["folders"].items():
        counts = tally(entry["modules"])
        if counts is None or counts["unchecked"]:
            why = "not mutated here" if counts is None else f"{counts['unchecked']} of {counts['mutants']} unchecked"
            print(f"{folder}: not measured ({why}); committed {entry['score']:.4f}")
            continue
        measured_any = True
        now = score(counts)
        verdict = "FELL" if now < entry["score"] - TOLERANCE else "ok"
        print(f"{folder}: {now:.4f} ({counts['killed']} of {counts['mutants']} killed; committed "
              f"{entry['score']:.4f} of {entry['mutants']}): {verdict}")
        if verdict == "FELL":
            fell.append(folder)
        elif args.update and now > entry["score"]:
            entry.update(mutants=counts["mutants"], killed=counts["killed"], survived=counts["survived"],
                         score=math.floor(now * 10_000) / 10_000)  # never above the measured
        if args.survivors:
            for name in survivors(entry["modules"]):
                print(f"    {name}")
    if args.update:
        SCORE_FILE.write_text(json.dumps(committed, indent=2) + "\n")
    if not measured_any:
        print("no folder measured: run `mutmut run` first (tox -e mutation)")
    if fell:
        print(f"the mutation score fell in {', '.join(fell)}: kill the new survivors (mutmut results, mutmut show)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
