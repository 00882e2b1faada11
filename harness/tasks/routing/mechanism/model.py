"""PC-SHO-DLM: a masked diffusion language model whose layers settle by predictive coding.

Absorbing-state diffusion: the MASK id is ``vocab_size``; at integer step t in 1..T every token
is masked with probability t / T and the model predicts the clean tokens (cross-entropy on the
masked positions). Each layer is a bidirectional pre-norm transformer block whose output ``mu``
is the layer's *prediction* of its next state; the state ``x`` then settles towards it for
``n_settling_steps`` of damped-harmonic-oscillator dynamics driven by the precision-weighted
prediction error::

    e = x - mu,   Pi = tok_precision * ch_precision
    v <- (1 - gamma*dt) v - dt * (omega^2 * e + Pi * e),   x <- x + dt * v

with learned positive gamma and omega per layer, integrated semi-implicitly: the restoring force is
taken at the new position (see ``settle``), which is stable for every Pi >= 0, so the dynamics need
no ceiling on precision. High precision means "trust the prediction": the state moves fully to it;
low precision leaves it where it was.

The precision heads are trained to carry real uncertainty by the spec's precision-weighted energy
``0.5 * (Pi * e^2 - log Pi)`` (``precision_energy``), exactly, and by it alone: the settling reads a
detached precision, because the denoising gradient through it raised precision exactly at the
masked tokens (where a full step towards the prediction helps) and left it anti-calibrated. Here
``e`` is *the token's own prediction error* (``token_errors``): 1 - p(clean token) under the model's
output at a masked position, 0 at a visible one (the model carries visible tokens over, so it never
errs there). It belongs to the token alone, unlike a difference of hidden states, which
bidirectional attention spreads over every position; and it is what a router needs to know: how
much the model does not know this token. The optimum ``Pi = 1 / E[e^2 | state]`` is low at masked
positions whose token the model cannot tell and unbounded at visible ones, so every head
parametrises ``log`` precision, bounded smoothly (``LOG_PRECISION_BOUND * tanh``): the energy is
evaluated from the log directly, without a floor, and Pi stays within float range.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

# each precision factor lies in [exp(-bound), exp(bound)]: Pi spans e^+-16 (float32 keeps 7 digits of it)
LOG_PRECISION_BOUND = 8.0


@dataclass(frozen=True)
class PCSHOConfig:
    vocab_size: int
    max_seq_len: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    n_diffusion_steps: int
    n_settling_steps: int
    settle_dt: float = 1.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_seq_len", "d_model", "n_heads", "n_layers", "d_ff", "n_diffusion_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"PCSHOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_settling_steps < 0:
            raise ValueError(f"PCSHOConfig.n_settling_steps must be >= 0, got {self.n_settling_steps}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")

    @property
    def mask_id(self) -> int:
        return self.vocab_size


def inverse_softplus(y: float) -> float:
    return y + math.log(-math.expm1(-y))


def bounded_log(raw: torch.Tensor, bound: float = LOG_PRECISION_BOUND) -> torch.Tensor:
    """A log precision in (-bound, bound), the identity near 0: smooth, so it keeps a gradient."""
    return bound * torch.tanh(raw / bound)


def check_hidden(h: torch.Tensor, d_model: int, what: str) -> None:
    """Hidden states must be (B, S, d_model); the error names the shapes."""
    if h.dim() != 3 or h.shape[-1] != d_model:
        raise ValueError(f"{what} must have shape (B, S, {d_model}), got {tuple(h.shape)}")


class PrecisionHead(nn.Module):
    """Per-token and per-channel precision of a layer's state, conditioned on the diffusion step.

    Returns ``tok_precision`` (B, S, 1) and ``ch_precision`` (B, 1, D), both positive; their
    product is the layer's precision Pi. Each is exp of a bounded log (``log_precisions``), and
    starts at 1.
    """

    def __init__(self, d_model: int, n_diffusion_steps: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_diffusion_steps = n_diffusion_steps
        self.norm = nn.LayerNorm(d_model, elementwise_affine=False)
        self.time_embedding = nn.Embedding(n_diffusion_steps + 1, d_model)
        self.tok = nn.Linear(d_model, 1)
        self.ch = nn.Linear(d_model, d_model)
        with torch.no_grad():
            for linear in (self.tok, self.ch):
                linear.weight.mul_(0.1)
                linear.bias.zero_()
            self.time_embedding.weight.mul_(0.1)

    def log_precisions(self, h: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log tok_precision (B, S, 1), log ch_precision (B, 1, D)), each in (-bound, bound)."""
        check_hidden(h, self.d_model, "PrecisionHead input h")
        if t.shape != (h.shape[0],):
            raise ValueError(f"timesteps t must have shape ({h.shape[0]},), got {tuple(t.shape)}")
        z = self.norm(h) + self.time_embedding(t.long())[:, None, :]
        return bounded_log(self.tok(z)), bounded_log(self.ch(z.mean(dim=1, keepdim=True)))

    def forward(self, h: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_tok, log_ch = self.log_precisions(h, t)
        return log_tok.exp(), log_ch.exp()


class TransformerBlock(nn.Module):
    """Pre-norm bidirectional attention + MLP; can also attend over external memory entries.

    With ``memory_k``/``memory_v`` of shape (B, M, D) (already in key/value space) every query
    attends over ``[memory ; own keys]``; without memory it is plain self-attention.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.norm_attn = nn.LayerNorm(d_model)
        self.q_attn = nn.Linear(d_model, d_model)
        self.k_attn = nn.Linear(d_model, d_model)
        self.v_attn = nn.Linear(d_model, d_model)
        self.o_attn = nn.Linear(d_model, d_model)
        self.norm_ff = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.n_heads, self.d_model // self.n_heads).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, memory_k: torch.Tensor | None = None, memory_v: torch.Tensor | None = None
    ) -> torch.Tensor:
        check_hidden(x, self.d_model, "block input x")
        h = self.norm_attn(x)
        k, v = self.k_attn(h), self.v_attn(h)
        if (memory_k is None) != (memory_v is None):
            raise ValueError("memory_k and memory_v must be given together")
        if memory_k is not None:
            expected = (x.shape[0], memory_k.shape[1], self.d_model)
            if memory_k.shape != expected or memory_v.shape != expected:
                raise ValueError(
                    f"memory_k {tuple(memory_k.shape)} and memory_v {tuple(memory_v.shape)} must both be "
                    f"(B={x.shape[0]}, M, D={self.d_model})"
                )
            k = torch.cat([memory_k.to(k.dtype), k], dim=1)
            v = torch.cat([memory_v.to(v.dtype), v], dim=1)
        attended = F.scaled_dot_product_attention(
            self._split_heads(self.q_attn(h)), self._split_heads(k), self._split_heads(v)
        )
        x = x + self.o_attn(attended.transpose(1, 2).reshape(x.shape))
        return x + self.ff(self.norm_ff(x))


@dataclass
class ForwardTrace:
    """What a forward pass exposes besides logits: per-layer inputs, settled outputs, precisions."""

    logits: torch.Tensor
    layer_inputs: list[torch.Tensor]
    layer_outputs: list[torch.Tensor]
    tok_precision: list[torch.Tensor]
    ch_precision: list[torch.Tensor]


LayerMemory = Mapping[int, tuple[torch.Tensor, torch.Tensor]]


class PCSHODLM(nn.Module):
    """The masked diffusion LM with predictive-coding settling in every layer."""

    def __init__(self, config: PCSHOConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.token_embedding = nn.Embedding(config.vocab_size + 1, d)
        self.position_embedding = nn.Embedding(config.max_seq_len, d)
        self.time_embedding = nn.Embedding(config.n_diffusion_steps + 1, d)
        # A small step embedding keeps token identity dominant, so the state of a noisy query
        # token stays comparable with the same token in a clean (t = 0) document.
        with torch.no_grad():
            self.time_embedding.weight.mul_(0.1)
        self.blocks = nn.ModuleList(
            TransformerBlock(d, config.n_heads, config.d_ff) for _ in range(config.n_layers)
        )
        self.precision_up = nn.ModuleList(
            PrecisionHead(d, config.n_diffusion_steps) for _ in range(config.n_layers)
        )
        # gamma = 1/dt makes the first step a plain relaxation; omega^2 adds a precision-free pull.
        self.raw_gamma = nn.Parameter(torch.full((config.n_layers,), inverse_softplus(1.0 / config.settle_dt)))
        self.raw_omega_sq = nn.Parameter(torch.full((config.n_layers,), inverse_softplus(0.1)))
        self.norm_out = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, config.vocab_size)

    def embed(self, tokens: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Token + position (restarting at 0 in every sequence) + diffusion-step embedding."""
        if tokens.dim() != 2 or tokens.shape[1] > self.config.max_seq_len:
            raise ValueError(
                f"tokens must be (B, S<= {self.config.max_seq_len}), got {tuple(tokens.shape)}"
            )
        if t.shape != (tokens.shape[0],):
            raise ValueError(f"timesteps t must have shape ({tokens.shape[0]},), got {tuple(t.shape)}")
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return (
            self.token_embedding(tokens)
            + self.position_embedding(positions)[None]
            + self.time_embedding(t.long())[:, None, :]
        )

    def settle(
        self, layer: int, x: torch.Tensor, mu: torch.Tensor, precision: torch.Tensor
    ) -> torch.Tensor:
        """Damped-oscillator predictive-coding settling of the state x towards prediction mu.

        Semi-implicit Euler: with K = omega^2 + Pi, the force is taken at the new position,
        v' = ((1 - gamma dt) v - dt K e) / (1 + dt^2 K), x' = x + dt v'. An explicit step diverges
        once K dt^2 > 2 (Pi is unbounded above by design); this one contracts the error for every
        K >= 0, to e / (1 + dt^2 K) on the first step.
        """
        dt = self.config.settle_dt
        gamma = F.softplus(self.raw_gamma[layer])
        stiffness = F.softplus(self.raw_omega_sq[layer]) + precision
        velocity = torch.zeros_like(x)
        for _ in range(self.config.n_settling_steps):
            error = x - mu
            velocity = ((1 - gamma * dt) * velocity - dt * stiffness * error) / (1 + dt * dt * stiffness)
            x = x + dt * velocity
        return x

    def run_layers(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        start: int,
        stop: int,
        memory: LayerMemory | None = None,
        trace: ForwardTrace | None = None,
    ) -> torch.Tensor:
        """Layers [start, stop) from state x; memory maps a layer index to its (K, V) entries."""
        for layer in range(start, stop):
            tok_precision, ch_precision = self.precision_up[layer](x, t)
            memory_k, memory_v = (memory or {}).get(layer, (None, None))
            mu = self.blocks[layer](x, memory_k, memory_v)
            # the precision heads learn from the energy alone: a denoising gradient through the
            # settling would raise precision wherever a full update helps, i.e. at masked tokens
            settled = self.settle(layer, x, mu, (tok_precision * ch_precision).detach())
            if trace is not None:
                trace.layer_inputs.append(x)
                trace.layer_outputs.append(settled)
                trace.tok_precision.append(tok_precision)
                trace.ch_precision.append(ch_precision)
            x = settled
        return x

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm_out(x))

    def hidden_before(self, layer: int, tokens: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The state entering ``layer`` (what a router at that layer sees)."""
        return self.run_layers(self.embed(tokens, t), t, 0, layer)

    def forward_trace(
        self, tokens: torch.Tensor, t: torch.Tensor, memory: LayerMemory | None = None
    ) -> ForwardTrace:
        trace = ForwardTrace(logits=torch.empty(0), layer_inputs=[], layer_outputs=[], tok_precision=[], ch_precision=[])
        x = self.run_layers(self.embed(tokens, t), t, 0, self.config.n_layers, memory, trace)
        trace.logits = self.readout(x)
        return trace

    def forward(self, tokens: torch.Tensor, t: torch.Tensor, memory: LayerMemory | None = None) -> torch.Tensor:
        """Logits (B, S, vocab_size) for the clean tokens."""
        return self.forward_trace(tokens, t, memory).logits


def mask_tokens(
    tokens: torch.Tensor, t: torch.Tensor, n_diffusion_steps: int, mask_id: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward diffusion: mask each token with probability t / T. Returns (noisy, masked)."""
    probability = (t.float() / n_diffusion_steps)[:, None]
    draws = torch.rand(tokens.shape, generator=generator, device=generator.device).to(tokens.device)
    masked = draws < probability
    return tokens.masked_fill(masked, mask_id), masked


def denoising_loss(logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on masked positions (unmasked ones are carried over unchanged)."""
    if not bool(masked.any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits[masked], targets[masked])


def per_token_loss(logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Per-position denoising loss; 0 where the token is visible (carry-over unmasking)."""
    loss = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return torch.where(masked, loss, torch.zeros_like(loss))


def precision_energy(log_tok: torch.Tensor, log_ch: torch.Tensor, error: torch.Tensor) -> torch.Tensor:
    """Mean of the spec's 0.5 * (Pi * e^2 - log Pi), Pi = tok * ch, from the log precisions (no
    log of a product of small numbers); e (B, S, 1) is treated as data."""
    log_precision = log_tok + log_ch
    return 0.5 * (log_precision.exp() * error.detach().pow(2) - log_precision).mean()


def token_errors(logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """(B, S, 1) each token's own prediction error, no gradient: 1 - p(clean token) where masked,
    0 where visible (carried over, so never wrong)."""
    with torch.no_grad():
        probability = logits.softmax(dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return torch.where(masked, 1.0 - probability, torch.zeros_like(probability)).unsqueeze(-1)
