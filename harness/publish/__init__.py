"""``harness publish``: stored runs as a static HTML report, one page per suite, readable without a server."""
