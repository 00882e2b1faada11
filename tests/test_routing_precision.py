"""Precision means something: after brief training of a tiny PC-SHO-DLM, masked positions get
lower token precision than visible ones, and precision falls as the per-token loss rises."""
from __future__ import annotations

import pytest

import torch

from harness.mechanisms.routing.model import (
    PCSHOConfig,
    PCSHODLM,
    denoising_loss,
    mask_tokens,
    per_token_loss,
    precision_energy,
    state_errors,
)
from harness.tasks.routing.evaluation import precision_sanity


def _sequences(n: int, generator: torch.Generator) -> torch.Tensor:
    """Half-predictable text: pairs (a, a+1 mod 12), so a masked token is often recoverable."""
    first = torch.randint(12, (n, 6), generator=generator)
    return torch.stack([first, (first + 1) % 12], dim=-1).flatten(1)


@pytest.mark.integration  # trains a backbone
def test_trained_precision_is_lower_where_tokens_are_masked_and_loss_is_high() -> None:
    torch.manual_seed(0)
    config = PCSHOConfig(vocab_size=12, max_seq_len=12, d_model=32, n_heads=2, n_layers=2, d_ff=64,
                         n_diffusion_steps=10, n_settling_steps=2)
    model = PCSHODLM(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(120):
        clean = _sequences(32, gen)
        t = torch.randint(1, 11, (32,), generator=gen)
        noisy, masked = mask_tokens(clean, t, 10, config.mask_id, gen)
        trace = model.forward_trace(noisy, t)
        with torch.no_grad():
            reference = model.forward_trace(clean, t)
        errors = state_errors(trace.layer_outputs, reference.layer_outputs)
        energy = sum(
            precision_energy(*model.precision_up[i](x.detach(), t), errors[i], config.error_floor)
            for i, x in enumerate(trace.layer_inputs)
        )
        loss = denoising_loss(trace.logits, clean, masked) + energy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        clean = _sequences(256, gen)
        t = torch.randint(1, 11, (256,), generator=gen)
        noisy, masked = mask_tokens(clean, t, 10, config.mask_id, gen)
        trace = model.forward_trace(noisy, t)
        sanity = precision_sanity(trace.tok_precision[-1], masked, per_token_loss(trace.logits, clean, masked))
    assert sanity["prec_masked"] < 0.9 * sanity["prec_unmasked"], sanity
    assert sanity["prec_spearman"] < 0, sanity
