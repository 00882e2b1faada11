"""What the spine lends a task's run (through ``TrialContext``): seeding and named random streams,
the per-seed artifact cache and the training loop. Below the tasks, so a task imports nothing of
the execution that runs it."""
