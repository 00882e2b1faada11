"""The shared backbone: PC-SHO-DLM with MSA layers, trained once per seed and cached.

The backbone learns to denoise queries while reading chunk-pooled memory: each query sees the
pooled K/V of ``memory_docs`` documents from its batch, its gold document among them with
probability ``gold_rate``, so it learns both to copy a value from the right chunk and that
memory can be wrong. Its precision heads are trained with the precision-weighted energy at the
same time. Arms then reuse it unchanged (same init, same weights, same data).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from harness.mechanisms.routing.model import (
    PCSHOConfig,
    PCSHODLM,
    denoising_loss,
    precision_energy,
    state_errors,
)
from harness.mechanisms.routing.msa import (
    MSAConfig,
    attach_msa_layers,
    chunk_mean_pool,
    create_msa_layers,
    msa_layer_indices,
)
from harness.measure.timing import throughput
from harness.tasks.routing.workload import Layout, QueryBatch, make_documents, make_queries, stream

CACHE_FORMAT = "routing-backbone-v1"


@dataclass(frozen=True)
class BackboneSpec:
    """Everything that determines the trained backbone (and so its cache key)."""

    model: PCSHOConfig
    msa: MSAConfig
    layout: Layout
    steps: int
    batch: int
    lr: float
    energy_weight: float
    gold_rate: float
    memory_docs: int
    pool_docs: int
    max_noise_step: int
    seed: int
    device_type: str

    def cache_key(self) -> str:
        text = json.dumps({"format": CACHE_FORMAT, **asdict(self)}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass
class Backbone:
    model: PCSHODLM
    msa: MSAConfig
    train_tokens_per_s: float
    from_cache: bool

    @property
    def routing_layer(self) -> int:
        """The first MSA layer: its router picks the documents every MSA layer reads."""
        return msa_layer_indices(self.model.config, self.msa).start

    @property
    def msa_layers(self) -> list[int]:
        return list(msa_layer_indices(self.model.config, self.msa))


def build_model(spec: BackboneSpec, device: torch.device) -> PCSHODLM:
    """Fresh initialisation fixed by the seed (routers included, so arms start equal)."""
    torch.manual_seed(int(stream(spec.seed, "backbone-init").initial_seed()))
    model = PCSHODLM(spec.model)
    attach_msa_layers(model, create_msa_layers(spec.model, spec.msa))
    return model.to(device)


def document_states(model: PCSHODLM, documents: torch.Tensor, stop: int) -> list[torch.Tensor]:
    """Inputs of layers 0..stop-1 for clean documents (t = 0, positions restart per document)."""
    t = torch.zeros(documents.shape[0], dtype=torch.long, device=documents.device)
    states = [model.embed(documents, t)]
    for layer in range(stop - 1):
        states.append(model.run_layers(states[-1], t, layer, layer + 1))
    return states


def encode_memory(model: PCSHODLM, msa: MSAConfig, documents: torch.Tensor) -> dict[int, dict[str, torch.Tensor]]:
    """Per MSA layer: pooled K, V, KR of every document, each (n_docs, chunks_per_doc, width)."""
    layers = list(msa_layer_indices(model.config, msa))
    states = document_states(model, documents, layers[-1] + 1)
    return {layer: model.blocks[layer].encode_memory(states[layer]) for layer in layers}


@torch.no_grad()
def encode_bank(
    model: PCSHODLM, msa: MSAConfig, documents: torch.Tensor, batch_size: int = 256
) -> tuple[dict[int, dict[str, torch.Tensor]], torch.Tensor]:
    """Encode documents once: per-layer memory entries, and the routing layer's chunk-pooled
    input states (n_docs, chunks_per_doc, D), from which any router's keys follow."""
    layers = list(msa_layer_indices(model.config, msa))
    parts, pooled = [], []
    for start in range(0, documents.shape[0], batch_size):
        states = document_states(model, documents[start : start + batch_size], layers[-1] + 1)
        parts.append({layer: model.blocks[layer].encode_memory(states[layer]) for layer in layers})
        pooled.append(chunk_mean_pool(states[layers[0]], msa.chunk_size))
    encoded = {
        layer: {name: torch.cat([part[layer][name] for part in parts]) for name in ("K", "V", "KR")}
        for layer in layers
    }
    return encoded, torch.cat(pooled)


def batch_memory(
    encoded: dict[int, dict[str, torch.Tensor]], slots: torch.Tensor
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Memory of each query from its document slots (B, k) into the encoded batch documents."""
    return {
        layer: (entry["K"][slots].flatten(1, 2), entry["V"][slots].flatten(1, 2))
        for layer, entry in encoded.items()
    }


def memory_slots(batch: int, k: int, gold_rate: float, generator: torch.Generator) -> torch.Tensor:
    """(B, k) document slots: distinct in-batch distractors, the query's own document at a
    random slot with probability gold_rate."""
    k = min(k, batch)
    offsets = torch.randperm(batch - 1, generator=generator)[: k] + 1 if batch > 1 else torch.zeros(1, dtype=torch.long)
    slots = (torch.arange(batch)[:, None] + offsets[None, :k]) % batch
    with_gold = torch.rand(batch, generator=generator) < gold_rate
    position = torch.randint(k, (batch,), generator=generator)
    rows = torch.arange(batch)
    slots[rows[with_gold], position[with_gold]] = rows[with_gold]
    return slots


def backbone_loss(model: PCSHODLM, spec: BackboneSpec, queries: QueryBatch, documents: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(denoising loss, precision energy) of one batch."""
    memory = batch_memory(encode_memory(model, spec.msa, documents), slots.to(documents.device))
    trace = model.forward_trace(queries.noisy, queries.t, memory)
    with torch.no_grad():
        detached = {layer: (k.detach(), v.detach()) for layer, (k, v) in memory.items()}
        clean = model.forward_trace(queries.clean, queries.t, detached)
    errors = state_errors(trace.layer_outputs, clean.layer_outputs)
    energy = torch.stack(
        [
            precision_energy(*model.precision_up[layer](state.detach(), queries.t), errors[layer], spec.model.error_floor)
            for layer, state in enumerate(trace.layer_inputs)
        ]
    ).mean()
    return denoising_loss(trace.logits, queries.clean, queries.masked), energy


def train_backbone(spec: BackboneSpec, device: torch.device, logger) -> tuple[PCSHODLM, float]:
    """Train from the seeded init; returns the model and training tokens/s on this device."""
    model = build_model(spec, device)
    pool = make_documents(spec.layout, spec.pool_docs, stream(spec.seed, "backbone-docs"))
    data = stream(spec.seed, "backbone-batches")
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)
    warmup = max(1, spec.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))

    def next_batch() -> tuple[QueryBatch, torch.Tensor, torch.Tensor]:
        gold = torch.randint(spec.pool_docs, (spec.batch,), generator=data)
        queries = make_queries(spec.layout, pool, gold, spec.max_noise_step, spec.model.n_diffusion_steps, data)
        slots = memory_slots(spec.batch, spec.memory_docs, spec.gold_rate, data)
        # the batch's documents are the gold ones, so slot i is query i's gold document
        return queries.to(device), pool[gold].to(device), slots

    def step(queries: QueryBatch, documents: torch.Tensor, slots: torch.Tensor) -> tuple[float, float]:
        denoise, energy = backbone_loss(model, spec, queries, documents, slots)
        optimizer.zero_grad(set_to_none=True)
        (denoise + spec.energy_weight * energy).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(denoise.detach()), float(energy.detach())

    progress = logger.progress(spec.steps, "backbone")
    for index in range(spec.steps):
        denoise, energy = step(*next_batch())
        schedule.step()
        progress.advance()
        if index % 25 == 0 or index == spec.steps - 1:
            logger.log_metric("backbone_denoise_loss", denoise, index)
            logger.log_metric("backbone_precision_energy", energy, index)
    progress.close()
    tokens_per_s = measure_training_throughput(model, spec, device)
    return model, tokens_per_s


def measure_training_throughput(model: PCSHODLM, spec: BackboneSpec, device: torch.device) -> float:
    """Tokens/s (query + document tokens) of a forward+backward on a fixed batch, weights untouched."""
    data = stream(spec.seed, "backbone-throughput")
    pool = make_documents(spec.layout, spec.batch, data)
    gold = torch.arange(spec.batch)
    queries = make_queries(spec.layout, pool, gold, spec.max_noise_step, spec.model.n_diffusion_steps, data).to(device)
    slots = memory_slots(spec.batch, spec.memory_docs, spec.gold_rate, data)
    documents = pool.to(device)

    def forward_backward() -> None:
        denoise, energy = backbone_loss(model, spec, queries, documents, slots)
        (denoise + spec.energy_weight * energy).backward()

    tokens = spec.batch * (spec.layout.query_len + spec.layout.doc_len)
    rate = throughput(forward_backward, tokens, min_run_time=0.1)
    model.zero_grad(set_to_none=True)
    return rate


def load_or_train(spec: BackboneSpec, device: torch.device, cache_dir: Path, logger) -> Backbone:
    """The cached backbone for this spec, training and caching it (atomically) if absent."""
    path = Path(cache_dir) / f"routing-backbone-{spec.cache_key()}.pt"
    if path.is_file():
        saved = torch.load(path, map_location=device, weights_only=True)
        model = build_model(spec, device)
        model.load_state_dict(saved["state"])
        return Backbone(model.eval(), spec.msa, float(saved["train_tokens_per_s"]), from_cache=True)
    model, tokens_per_s = train_backbone(spec, device, logger)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"state": model.state_dict(), "train_tokens_per_s": tokens_per_s}, tmp)
    os.replace(tmp, path)
    return Backbone(model.eval(), spec.msa, tokens_per_s, from_cache=False)
