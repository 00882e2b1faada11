"""Streaming vs one-shot on the trained layer, in every run.

A recurrent layer is only worth its state if decoding token by token gives what the chunked forward
gives. The tests check that on fixed random weights; this checks the layer the run actually trained,
on the teacher's own held-out q/k/v, so a fast path that drifts from the decode path (or the reverse)
shows up as a quality regression in the CI gate, not only as a failing unit test. Decode here is the
layer's default decoder, the one the speed figures time (the fused C kernel where it builds).
"""
from __future__ import annotations

import torch

from harness.tasks.er2.mechanism.decode import ER2Decoder
from harness.tasks.er2.mechanism.er2 import ER2Layer

# fp32 state on both paths; the unit tests hold random layers to 1e-4 relative.
AGREEMENT_TOLERANCE = 1e-3


def decode_prefill_agreement(layer: ER2Layer, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             decoder_type: type[ER2Decoder] = ER2Decoder) -> dict[str, float]:
    """Largest |decode - chunked forward| over the sequence, relative to the forward's RMS, and whether it
    is within ``AGREEMENT_TOLERANCE``. Both paths run on an fp32-state twin of ``layer`` so that the
    comparison measures the two algorithms, not the storage dtype's rounding after every token."""
    twin = type(layer)(**{**layer.config, "state_dtype": "fp32"}).to(q.device)
    twin.load_state_dict(layer.state_dict())
    twin.eval()
    with torch.no_grad():
        forward = twin(q, k, v)
        decoder, state, outputs = decoder_type(twin), None, []
        for t in range(q.shape[2]):
            output, state = decoder.step(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state)
            outputs.append(output)
        decoded = torch.cat(outputs, dim=2)
    scale = forward.float().square().mean().sqrt().clamp(min=1e-12)
    error = float((decoded.float() - forward.float()).abs().max() / scale)
    return {"decode_prefill_max_error": error, "decode_agrees": float(error <= AGREEMENT_TOLERANCE)}
