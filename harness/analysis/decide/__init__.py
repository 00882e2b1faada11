"""What one run's stored results decide: exploratory verdicts, primary claims, premises, fair-arm
facts, the suite's validity, the seeds a claim needs and what a sequential design saved."""
