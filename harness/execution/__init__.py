"""Trial expansion and execution."""
