"""Paired statistics with honest coverage at small n, the group-sequential seed design, and how
the reports write numbers: no knowledge of suites or results folders."""
