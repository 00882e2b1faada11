"""Experiment tracking (MLflow) and the environment every result is tagged with."""
