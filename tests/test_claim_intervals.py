"""One interval per claim: the summary shows the interval the claims table shows (the repeated CI of a
sequential design, labelled so), and an exploratory row that reads more seeds than its claim says so."""
from __future__ import annotations

import re

from calibration_task import sequential_suite
from fault_injection import harness_here

from harness.analysis.present.run_summary import REPEATED_CI_NOTE


def test_a_sequential_claim_shows_its_repeated_ci_in_the_summary_and_the_claims_table(tmp_path):
    suite = tmp_path / "seq.yaml"
    suite.write_text(sequential_suite("seq", {"b": 2.5, "c": 0.0}))
    done = harness_here("run", str(suite), "--results", str(tmp_path / "r"), "--no-mlflow", "--allocation", "all")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = done.stdout[done.stdout.index("## harness summary"):]
    assert "estimate [repeated 95% CI]" in summary and REPEATED_CI_NOTE in summary
    verdicts = (tmp_path / "r" / "seq" / "default" / "report" / "verdicts.txt").read_text()
    claims = verdicts[verdicts.index("primary claims"):verdicts.index("exploratory contrasts")]
    for contrast in ("b-vs-a", "c-vs-a"):
        (row,) = [line for line in summary.splitlines() if f"{contrast} · score" in line]
        shown = re.search(r"\[[^\]]+\]", row).group(0)
        (table_row,) = [line for line in claims.splitlines() if line.startswith(contrast)]
        assert shown in table_row  # the claims table's repeated CI, the same figures
    # c's claim stopped as futile at look 2 (4 seeds); with every arm run to the end its row reads 10 pairs
    assert "claimed rows at another seed count than their claim:" in verdicts
    assert re.search(r"c-vs-a score: the row reads 10 pairs, its claim 4 \(look 2, where it stopped\)", verdicts)
    assert "b-vs-a score: the row reads" not in verdicts  # decided at the last look run: the same pairs
