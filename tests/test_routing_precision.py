"""Precision as the spec defines it: the energy is exactly 0.5 * (Pi * e^2 - log Pi) and is
minimised at Pi = 1/e^2; e is each token's own prediction error; the settling stays stable at any
precision; the per-trial signal (AUROC of 1/Pi for the asked slot, Spearman with the loss) agrees
with references; and after brief training 1/Pi marks the masked tokens."""
from __future__ import annotations

import math

import pytest
import scipy.stats
import torch

from harness.tasks.routing.mechanism.model import (
    LOG_PRECISION_BOUND,
    PCSHOConfig,
    PCSHODLM,
    denoising_loss,
    mask_tokens,
    per_token_loss,
    precision_energy,
    token_errors,
)
from harness.tasks.routing.evaluation import precision_signal, token_uncertainty
from harness.tasks.routing.workload import QueryBatch


def test_energy_is_the_specs_formula_without_a_floor() -> None:
    gen = torch.Generator().manual_seed(0)
    log_tok, log_ch = torch.randn(2, 5, 1, generator=gen), torch.randn(2, 1, 3, generator=gen)
    error = torch.rand(2, 5, 1, generator=gen)
    precision = log_tok.exp() * log_ch.exp()
    reference = (0.5 * (precision * error**2 - precision.log())).mean()
    assert precision_energy(log_tok, log_ch, error).item() == pytest.approx(reference.item(), rel=1e-6)


def test_energy_is_minimised_at_the_inverse_squared_error() -> None:
    error = torch.tensor([[[0.5]], [[0.1]]])
    log_tok = torch.zeros(2, 1, 1, requires_grad=True)
    optimizer = torch.optim.Adam([log_tok], lr=0.05)
    for _ in range(600):
        optimizer.zero_grad()
        precision_energy(log_tok, torch.zeros(2, 1, 1), error).backward()
        optimizer.step()
    assert log_tok.detach().exp().flatten().tolist() == pytest.approx([4.0, 100.0], rel=1e-3)


def test_token_errors_are_one_minus_the_clean_tokens_probability_where_masked() -> None:
    logits = torch.log(torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]]))
    clean, masked = torch.tensor([[0, 1]]), torch.tensor([[True, False]])
    errors = token_errors(logits, clean, masked)
    assert errors.shape == (1, 2, 1)
    assert errors.flatten().tolist() == pytest.approx([0.3, 0.0])


def test_precision_heads_stay_bounded_and_settling_contracts_at_any_precision() -> None:
    torch.manual_seed(0)
    config = PCSHOConfig(vocab_size=8, max_seq_len=6, d_model=8, n_heads=2, n_layers=2, d_ff=16,
                         n_diffusion_steps=10, n_settling_steps=3)
    model = PCSHODLM(config)
    with torch.no_grad():
        model.precision_up[0].tok.bias.fill_(1e6)
    log_tok, _ = model.precision_up[0].log_precisions(torch.randn(2, 6, 8), torch.tensor([1, 2]))
    assert bool((log_tok <= LOG_PRECISION_BOUND).all()) and bool((log_tok > 0.99 * LOG_PRECISION_BOUND).all())
    x, mu = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    torch.set_grad_enabled(False)  # restored below; settling reads a detached precision anyway
    for precision in (0.0, 1.0, 1e3, math.exp(2 * LOG_PRECISION_BOUND)):
        settled = model.settle(0, x, mu, torch.full((2, 6, 8), precision))
        assert torch.isfinite(settled).all()
        assert float((settled - mu).norm()) <= float((x - mu).norm()) + 1e-4, precision
    nearly = model.settle(0, x, mu, torch.full((2, 6, 8), math.exp(2 * LOG_PRECISION_BOUND)))
    torch.set_grad_enabled(True)
    assert torch.allclose(nearly, mu, atol=1e-4)


def _queries(masked: torch.Tensor, is_value: torch.Tensor) -> QueryBatch:
    batch, length = masked.shape
    zeros = torch.zeros(batch, length, dtype=torch.long)
    return QueryBatch(noisy=zeros, clean=zeros, masked=masked, is_value=is_value, t=torch.ones(batch, dtype=torch.long),
                      gold=torch.zeros(batch, dtype=torch.long), positive_chunks=torch.ones(batch, 1, dtype=torch.bool),
                      route_tokens=torch.zeros(batch, length, dtype=torch.bool),
                      token_docs=torch.zeros(batch, length, dtype=torch.long))


def test_signal_matches_references() -> None:
    gen = torch.Generator().manual_seed(1)
    tok = torch.rand(4, 6, 1, generator=gen) + 0.1
    ch = torch.rand(4, 1, 3, generator=gen) + 0.1
    masked = torch.rand(4, 6, generator=gen) < 0.4
    is_value = torch.zeros(4, 6, dtype=torch.bool)
    is_value[:, 5] = True
    masked |= is_value
    loss = torch.where(masked, torch.rand(4, 6, generator=gen), torch.zeros(4, 6))
    signal = precision_signal(tok, ch, _queries(masked, is_value), loss)
    uncertainty = (1.0 / (tok.squeeze(-1) * ch.mean(dim=-1))).double()
    asked, visible = uncertainty[is_value], uncertainty[~masked]
    wins = (asked[:, None] > visible[None, :]).double() + 0.5 * (asked[:, None] == visible[None, :]).double()
    assert signal["asked_slot_auroc"] == pytest.approx(float(wins.mean()))
    assert signal["uncertainty_spearman"] == pytest.approx(scipy.stats.spearmanr(uncertainty.flatten(), loss.flatten()).statistic)
    assert signal["uncertainty_spearman_masked"] == pytest.approx(
        scipy.stats.spearmanr(uncertainty[masked], loss[masked]).statistic)
    assert torch.allclose(token_uncertainty(tok, ch), uncertainty.float())


def _sequences(n: int, generator: torch.Generator) -> torch.Tensor:
    """Half-predictable text: pairs (a, a+1 mod 12), so a masked token is often recoverable."""
    first = torch.randint(12, (n, 6), generator=generator)
    return torch.stack([first, (first + 1) % 12], dim=-1).flatten(1)


@pytest.mark.integration  # trains a backbone
def test_trained_precision_marks_masked_tokens_and_tracks_the_loss() -> None:
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
        errors = token_errors(trace.logits, clean, masked)
        energy = sum(
            precision_energy(*model.precision_up[i].log_precisions(x.detach(), t), errors)
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
        signal = precision_signal(trace.tok_precision[-1], trace.ch_precision[-1], _queries(masked, masked),
                                  per_token_loss(trace.logits, clean, masked))
    assert signal["asked_slot_auroc"] > 0.9, signal
    assert signal["uncertainty_spearman"] > 0, signal
