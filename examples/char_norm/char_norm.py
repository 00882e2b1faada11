"""A language-model task in one file: RMSNorm against LayerNorm in a small character transformer.

The mechanism: RMSNorm (scale by the root mean square, one gain vector) in place of LayerNorm (subtract
the mean, divide by the standard deviation, a gain and a bias) at every pre-norm position of the model.
It is cheaper; the question is whether it costs held-out quality, and a cost only means something
against what the model learns at all. So the suite claims RMSNorm is not worse than LayerNorm by more
than a tenth of what context buys (the control against the same model that sees one character only).

The text ships with Python: modules of the standard library, read from this interpreter's own folder,
nothing downloaded. Each seed trains on another stretch of it and is scored on the stretch after it, in
bits per character. Every arm of a seed reads the same stretch, starts from the same weights where
the arms' shapes agree and draws the same batches (``ctx.stream``), so treatment and control are
paired by seed.
"""
from __future__ import annotations

import math
import sysconfig
import time
from functools import lru_cache
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from harness.measure.memory import tensor_bytes
from harness.services.seeding import global_rng_from
from harness.tasks.base import Metric, Task, TaskParams, TrialContext, training_budget, training_budget_metrics

# Plain Python source, about 730,000 characters (each seed trains on a stretch of it), as ASCII: the
# alphabet is 128 characters, and anything else reads as '?'.
SOURCES = ("argparse.py", "difflib.py", "textwrap.py", "string.py", "json/decoder.py", "json/encoder.py",
           "calendar.py", "shutil.py", "tarfile.py", "dataclasses.py", "inspect.py", "typing.py")
ALPHABET = 128
BLOCK = 64  # the sequence length every arm trains and is scored on; ``context`` limits what a position sees
EVAL_WINDOWS = 64  # held-out windows scored at a time


class CharNormParams(TaskParams):
    """Arms differ only by these; every number declares its bounds (the contract test checks it)."""

    norm: Literal["layernorm", "rmsnorm"] = Field("layernorm", description="the norm at every pre-norm position")
    context: int = Field(BLOCK, ge=1, le=BLOCK,
                         description="characters each position attends to, itself included (1: a bigram model)")
    width: int = Field(64, ge=16, le=512, multiple_of=16, description="model width: heads of 16 dimensions")
    layers: int = Field(2, ge=1, le=8)
    steps: int = Field(600, ge=1, le=100_000)
    batch: int = Field(16, ge=1, le=1024, description="sequences per step")
    lr: float = Field(3e-3, gt=0.0, le=1.0)
    train_chars: int = Field(200_000, ge=1_000, le=5_000_000)
    eval_chars: int = Field(20_000, ge=1_000, le=1_000_000)


@lru_cache(maxsize=1)
def corpus() -> str:
    """The chosen standard-library modules, one after another, as ASCII."""
    folder = Path(sysconfig.get_paths()["stdlib"])
    text = "".join((folder / name).read_text(encoding="utf-8") for name in SOURCES)
    return text.encode("ascii", "replace").decode("ascii")


class Block(nn.Module):
    """One pre-norm transformer block; ``norm`` builds its two normalisations."""

    def __init__(self, width: int, norm: type[nn.Module]) -> None:
        super().__init__()
        self.norm1, self.norm2 = norm(width), norm(width)
        self.attention = nn.MultiheadAttention(width, width // 16, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class CharModel(nn.Module):
    """Character embeddings, learned positions, ``layers`` blocks, a final norm and the output head."""

    def __init__(self, params: CharNormParams) -> None:
        super().__init__()
        norm = nn.LayerNorm if params.norm == "layernorm" else nn.RMSNorm
        self.embed = nn.Embedding(ALPHABET, params.width)
        self.position = nn.Parameter(0.02 * torch.randn(BLOCK, params.width))
        self.blocks = nn.ModuleList(Block(params.width, norm) for _ in range(params.layers))
        self.norm = norm(params.width)
        self.head = nn.Linear(params.width, ALPHABET)
        # True where attention is refused: the future, and the past beyond the context window
        offset = torch.arange(BLOCK)[:, None] - torch.arange(BLOCK)[None, :]
        self.register_buffer("mask", (offset < 0) | (offset >= params.context), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        x = self.embed(ids) + self.position[:n]
        for block in self.blocks:
            x = block(x, self.mask[:n, :n])
        return self.head(self.norm(x))


def _ids(text: str, device: torch.device) -> torch.Tensor:
    return torch.tensor([min(ord(c), ALPHABET - 1) for c in text], dtype=torch.long, device=device)


class CharNormTask(Task):
    name = "char_norm"
    version = "1"  # part of every trial's id: bump it whenever a change can move a result
    Params = CharNormParams
    description = "RMSNorm vs LayerNorm in a small character transformer on Python's own sources"
    metrics = (
        Metric(name="bits_per_char", direction="lower", unit="bits", kind="quality", key=True,
               description="held-out cross-entropy per character"),
        Metric(name="param_bytes", direction="lower", unit="bytes", kind="memory",
               description="bytes of the trained parameters"),
        Metric(name="train_chars_per_s", direction="higher", unit="chars/s", kind="speed",
               description="training throughput"),
        *training_budget_metrics("optimizer steps the arm trained",
                                 "sequences its batches held (steps x batch)"),
    )
    smoke_params = {"steps": 20, "train_chars": 20_000, "eval_chars": 2_000}

    def run(self, params: CharNormParams, ctx: TrialContext) -> dict[str, float]:
        text = corpus()
        span = params.train_chars + params.eval_chars
        if span > len(text):
            raise ValueError(f"train_chars + eval_chars ({span}) exceed the corpus ({len(text)} characters)")
        start = int(ctx.numpy_stream("stretch").integers(0, len(text) - span + 1))
        train = _ids(text[start:start + params.train_chars], ctx.device)
        held = _ids(text[start + params.train_chars:start + span], ctx.device)

        with global_rng_from(ctx.stream("init"), ctx.device):
            model = CharModel(params).to(ctx.device)
        optimiser = torch.optim.AdamW(model.parameters(), lr=params.lr)
        order = ctx.stream("batches")

        def step(_: int) -> dict[str, float]:
            starts = torch.randint(0, len(train) - BLOCK - 1, (params.batch,), generator=order).to(ctx.device)
            windows = train[starts[:, None] + torch.arange(BLOCK + 1, device=ctx.device)]
            logits = model(windows[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, ALPHABET), windows[:, 1:].reshape(-1))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            return {"loss": loss.item()}

        started = time.perf_counter()
        ctx.fit(params.steps, step)
        elapsed = time.perf_counter() - started
        return {
            "bits_per_char": self._bits_per_char(model, held),
            "param_bytes": float(sum(tensor_bytes(p) for p in model.parameters())),
            "train_chars_per_s": params.steps * params.batch * BLOCK / elapsed,
            **training_budget(params.steps, params.batch),
        }

    @staticmethod
    @torch.no_grad()
    def _bits_per_char(model: CharModel, held: torch.Tensor) -> float:
        """Mean cross-entropy in bits over the held-out stretch, read in windows of BLOCK characters."""
        model.eval()
        usable = (len(held) - 1) // BLOCK * BLOCK
        inputs, targets = held[:usable].view(-1, BLOCK), held[1:usable + 1].view(-1, BLOCK)
        nats = sum(F.cross_entropy(model(x).reshape(-1, ALPHABET), y.reshape(-1), reduction="sum").item()
                   for x, y in zip(inputs.split(EVAL_WINDOWS), targets.split(EVAL_WINDOWS)))
        return nats / usable / math.log(2)
