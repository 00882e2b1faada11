"""The sealed evidence bundles under evidence/, analysed as `harness report` would: realistic runs of every
shipped suite (several suites, sequential designs, premises, mechanisms) without training anything."""
from __future__ import annotations

import tempfile
from pathlib import Path

from harness.analysis.decide.run_decisions import RunAnalysis, analyse
from harness.analysis.run_results import load_results
from harness.evidence.bundle import read_bundle
from harness.store import SUITE_FILE, RunFolder, write_json_atomic

EVIDENCE = Path(__file__).resolve().parent.parent / "evidence"


def sealed_analyses(root: Path) -> list[RunAnalysis]:
    """Each suite's latest sealed bundle, its trials stored under ``root`` and analysed, in suite order."""
    latest = {}
    for path in sorted(EVIDENCE.glob("*/*.jsonl.gz")):
        bundle = read_bundle(path)
        if bundle.suite not in latest or bundle.sealed_at > latest[bundle.suite].sealed_at:
            latest[bundle.suite] = bundle
    analyses = []
    for suite, bundle in sorted(latest.items()):
        folder = RunFolder(Path(tempfile.mkdtemp(dir=root)), bundle.suite, bundle.profile)
        write_json_atomic(folder.path / SUITE_FILE, bundle.suite_json)
        for record in bundle.trials:
            folder.save_trial(record)
        analyses.append(analyse(load_results(folder.path)))
    return analyses
