"""PDelta2 stack, as flash-linear-attention lays out a recurrent layer: ``ops/`` holds the math in its
forms (``naive`` token-by-token references, ``chunk`` chunked forms, ``fused_decode`` the C decode
step), and the modules here build layers on them: ``features`` (the PDelta2 core), ``er`` (value
convolution, retention spectra), ``er2`` (the ER2 layer and its training losses), ``decode`` (its
one-token decoder)."""
from harness.tasks.er2.mechanism.er2 import (
    ER2State,
    ER2Layer,
    hard_error_mask,
    normalized_hard_weights,
)
from harness.tasks.er2.mechanism.features import ER2Core, PDeltaState

__all__ = [
    "ER2State",
    "ER2Core",
    "PDeltaState",
    "ER2Layer",
    "hard_error_mask",
    "normalized_hard_weights",
]
