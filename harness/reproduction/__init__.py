"""``harness reproduce``: rebuild recorded trials, rerun them here, and prove (or refute) the result."""
