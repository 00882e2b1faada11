"""The contrastive training step shared by the interference warm-up and every arm.

Batch order comes from a numpy stream of the seed, so all arms of a seed see the same batches
in the same order (paired comparison).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch

from harness.services.training_loop import optimizer_step
from harness.tasks.vocab.mechanism.embedder import StaticEmbedder, symmetric_info_nce
from harness.tasks.base import TrialContext
from harness.tasks.vocab.corpus import ParallelSet

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int
    lr: float
    scale: float
    l1_weight: float = 0.0
    fusion_weight: float = 0.0


def batches(data: ParallelSet, batch_size: int, rng: np.random.Generator, device: torch.device) -> Iterator[Batch]:
    """Endless random batches (source ids, source languages, target ids, target languages)."""
    tensors = [torch.from_numpy(array).to(device) for array in
               (data.source, data.source_language, data.target, data.target_language)]
    while True:
        index = torch.from_numpy(rng.choice(len(data), size=batch_size, replace=False)).to(device)
        yield tuple(tensor[index] for tensor in tensors)  # type: ignore[misc]


def initial_table(vocab_size: int, dim: int, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """The starting shared table; every arm of a seed starts from it (same stream, same table)."""
    return (torch.randn(vocab_size, dim, generator=generator) / dim ** 0.5).to(device)


def train(model: StaticEmbedder, stream: Iterator[Batch], config: TrainConfig, ctx: TrialContext, name: str,
          log_every: int) -> float:
    """Adam on the contrastive loss plus the mode's regulariser; returns the last contrastive loss."""
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)

    def step(_: int) -> float:
        source_ids, source_lang, target_ids, target_lang = next(stream)
        loss = symmetric_info_nce(model(source_ids, source_lang), model(target_ids, target_lang), config.scale)
        optimizer_step(loss + model.regulariser(config.l1_weight, config.fusion_weight), optimizer)
        return float(loss.detach())

    return ctx.fit(config.steps, step, name=name, log_every=log_every).get("loss", float("nan"))


@torch.no_grad()
def encode(model: StaticEmbedder, ids: np.ndarray, languages: np.ndarray, device: torch.device,
           chunk: int = 4096) -> torch.Tensor:
    """Sentence vectors for a whole split, in chunks."""
    parts = []
    for start in range(0, ids.shape[0], chunk):
        parts.append(model(torch.from_numpy(ids[start:start + chunk]).to(device),
                           torch.from_numpy(languages[start:start + chunk]).to(device)))
    return torch.cat(parts)
