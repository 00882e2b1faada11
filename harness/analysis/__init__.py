"""From stored trial results to decisions: paired contrasts, verdicts, claims, plots, report.

``run_results`` reads a results folder (every subpackage's input); ``claim_tests`` holds one class per
claim test and ``claim_status`` the results a claim can have; ``stats`` holds the paired
statistics and the sequential design, ``decide`` what a run's results decide (verdicts, claims,
premises, validity, the seed plan), ``present`` how they are shown (tables, plots, the report, the
summaries, the export), ``compare`` two runs of one suite side by side. Nothing is imported here,
so that reading results does not load matplotlib."""
