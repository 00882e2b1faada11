"""An LM-like task for the guide's non-inferiority example: a character n-gram model of Python's own
sources, scored by held-out bits per character.

The mechanism is a hashed context table (``buckets`` rows shared by every context that hashes to
them): less memory than the full table, and the question is whether it costs more than a small share
of what context buys at all. Each seed reads another stretch of the standard library.
"""
from __future__ import annotations

import math
import sysconfig
import zlib
from collections import Counter
from functools import lru_cache
from pathlib import Path

from pydantic import Field

from harness.tasks.base import Metric, Task, TaskParams, TrialContext

SOURCES = ("textwrap.py", "string.py", "json/decoder.py", "json/encoder.py", "argparse.py", "difflib.py")
SMOOTHING = 0.1
ALPHABET = 256


class CharLMParams(TaskParams):
    context: int = Field(2, ge=0, le=4, description="characters of context (0: a unigram model)")
    buckets: int = Field(0, ge=0, description="0: a row per context; else contexts hashed into this many rows")
    train_chars: int = Field(20_000, ge=100)
    eval_chars: int = Field(4_000, ge=100)


@lru_cache(maxsize=1)
def corpus() -> str:
    """The chosen standard-library modules, one after another (ASCII only, as the alphabet is bytes)."""
    folder = Path(sysconfig.get_paths()["stdlib"])
    text = "".join((folder / name).read_text(encoding="utf-8") for name in SOURCES)
    return text.encode("ascii", "replace").decode("ascii")


class CharLMTask(Task):
    name = "char_lm"
    version = "1"
    Params = CharLMParams
    description = "character n-gram model of Python's sources, hashed context table vs the full one"
    metrics = (Metric(name="bits_per_char", direction="lower", unit="bits", kind="quality", key=True,
                      description="held-out cross-entropy per character"),)

    def run(self, params: CharLMParams, ctx: TrialContext) -> dict[str, float]:
        text = corpus()
        span = params.train_chars + params.eval_chars
        start = int(ctx.numpy_stream("stretch").integers(0, len(text) - span - params.context))
        train = text[start:start + params.context + params.train_chars]
        held = text[start + params.train_chars:start + params.context + span]
        counts: Counter = Counter()
        totals: Counter = Counter()
        for i in range(params.context, len(train)):
            row = self._row(train[i - params.context:i], params.buckets)
            counts[row, train[i]] += 1
            totals[row] += 1
        bits = 0.0
        for i in range(params.context, len(held)):
            row = self._row(held[i - params.context:i], params.buckets)
            p = (counts[row, held[i]] + SMOOTHING) / (totals[row] + SMOOTHING * ALPHABET)
            bits -= math.log2(p)
        return {"bits_per_char": bits / (len(held) - params.context)}

    @staticmethod
    def _row(context: str, buckets: int) -> str | int:
        return context if buckets == 0 else zlib.crc32(context.encode()) % buckets
