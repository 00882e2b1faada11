"""From stored trial results to decisions: paired contrasts, verdicts, claims, plots, report.

Nothing is imported here, so that reading results (``analysis.results``) does not load matplotlib."""
