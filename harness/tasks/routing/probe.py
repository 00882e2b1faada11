"""A linear probe: does the asked slot's routing-layer state name its document?

Pooling weights can only route with what the pooled states hold. If a linear read-out of the
asked (masked value) slot's state entering the routing layer recovers the gold document's entity
name (unique per document, so it names the document), "the state knows and the weights do not
find it" is separated from "the state does not know". The probe predicts each name token from
the standardised state, trains on queries about the training documents and is scored on the
evaluation queries of the held-out bank, whose names it never saw, as a router is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.nn.functional as F

from harness.services.seeding import global_rng_from
from harness.tasks.routing.backbone import Backbone
from harness.tasks.routing.workload import Layout, QueryBatch, make_queries


@dataclass(frozen=True)
class ProbeTraining:
    queries: int
    steps: int
    lr: float
    max_noise_step: int
    # the stream the probe's initial weights are drawn from: seeded, so the probe is the same whichever
    # trial builds it (the global RNG differs by arm at that point); part of the cached probe's identity
    init: str = "probe-init"


def slot_states(hidden: torch.Tensor, queries: QueryBatch, documents: torch.Tensor,
                layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, D) states of every asked slot and (N, entity_len) its document's name tokens (0-based)."""
    rows = queries.is_value.nonzero()[:, 0]
    names = documents[queries.gold[rows], : layout.entity_len] - layout.vocabulary.entity_start
    return hidden[queries.is_value], names


def train_probe(backbone: Backbone, documents: torch.Tensor, layout: Layout, training: ProbeTraining,
                generator: torch.Generator, device: torch.device, init: torch.Generator) -> dict[str, Any]:
    """Fit the probe on queries about ``documents`` (the training documents); full-batch Adam from
    initial weights drawn from ``init`` (``generator`` draws the queries)."""
    gold = torch.randint(documents.shape[0], (training.queries,), generator=generator)
    queries = make_queries(layout, documents, gold, training.max_noise_step,
                           backbone.model.config.n_diffusion_steps, generator).to(device)
    with torch.no_grad():
        hidden = backbone.model.hidden_before(backbone.routing_layer, queries.noisy, queries.t)
    states, names = slot_states(hidden, queries, documents.to(device), layout)
    mean, std = states.mean(dim=0), states.std(dim=0).clamp_min(1e-6)
    n_names = layout.vocabulary.n_entities
    with global_rng_from(init, device):
        probe = torch.nn.Linear(states.shape[1], layout.entity_len * n_names).to(device)
    optimizer = torch.optim.Adam(probe.parameters(), lr=training.lr)
    features = (states - mean) / std
    for _ in range(training.steps):
        logits = probe(features).view(-1, layout.entity_len, n_names)
        loss = F.cross_entropy(logits.flatten(0, 1), names.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return {"weight": probe.weight.detach(), "bias": probe.bias.detach(), "mean": mean, "std": std}


def probe_accuracy(probe: Mapping[str, torch.Tensor], states: torch.Tensor, names: torch.Tensor) -> float:
    """Fraction of asked slots whose whole entity name the probe reads right."""
    logits = ((states - probe["mean"]) / probe["std"]) @ probe["weight"].T + probe["bias"]
    predicted = logits.view(states.shape[0], names.shape[1], -1).argmax(dim=-1)
    return float((predicted == names).all(dim=1).double().mean())
