"""Evidence: a confirmatory run sealed beside its suite (``harness seal``), checked from the repository
alone (``harness audit``), and each claim's sealed designs listed in order (``harness programme``)."""
