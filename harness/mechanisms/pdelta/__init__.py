"""PDelta2 stack: delta-rule recurrence, PDelta2 core, ER helpers and the ER2 layer."""
from harness.mechanisms.pdelta.er2 import ER2State, SelectiveCompressedPDelta2Layer, hard_error_mask, normalized_hard_weights
from harness.mechanisms.pdelta.features import PDelta2Core, PDeltaState

__all__ = [
    "ER2State",
    "PDelta2Core",
    "PDeltaState",
    "SelectiveCompressedPDelta2Layer",
    "hard_error_mask",
    "normalized_hard_weights",
]
