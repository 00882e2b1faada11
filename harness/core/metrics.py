"""What a task declares about its outputs: metric families and plot hints.

One definition serves both ends: a task declares ``Metric`` objects, the run stores them in
suite.json (``as_stored``), and analysis reads them back (``from_stored``) without importing the
task, so reports and gates work on results from tasks that are not installed here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, get_args

from harness.core.stored_fields import Shape, from_stored, stored

Direction = Literal["higher", "lower", "none"]
MetricKind = Literal["quality", "speed", "memory", "info"]


# A metric key named in a suite (claims, validity, margins, tolerances, premises) is printed in headings,
# tables, MLflow names and XML: a plain word, optionally under one namespace of the fair-arm facts
# (budget/steps, at_bound/gain) and qualified after '@' (nmse@1024, contested_acc1@both).
METRIC_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]{0,31}/)?[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(@[A-Za-z0-9_.-]{1,32})?")
# Units whose values cannot leave a range: a metric in one has a best value nothing can beat.
BOUNDED_UNITS = {"fraction": (0.0, 1.0), "accuracy": (0.0, 1.0)}
METRIC_KEY_RULE = ("a word of A-Z a-z 0-9 _ . - (1-64 characters), optionally after one 'namespace/' (A-Z a-z 0-9 _ -) "
                   "and before '@' and a qualifier of up to 32")


def metric_key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a metric in a suite (markup, escapes, a newline, 6,000 characters), or None."""
    if isinstance(key, str) and METRIC_KEY.fullmatch(key):
        return None
    shown = repr(key) if len(repr(key)) <= 80 else repr(key)[:77] + "..."
    return f"metric name {shown} is not {METRIC_KEY_RULE}"


def tracking_name(key: str) -> str:
    """How MLflow spells a metric key: '@' qualifiers become '_at_' (nmse@1024 -> nmse_at_1024)."""
    return key.replace("@", "_at_")


def better_sign(direction: str) -> int:
    """+1 when larger is better ("higher"), -1 when smaller is better ("lower"), 0 when neither."""
    return {"higher": 1, "lower": -1}.get(direction, 0)


def metric_family(key: str) -> str:
    """``nmse@1024`` -> ``nmse``: the declared metric a reported key belongs to."""
    return key.split("@", 1)[0]


def _read_as(kind: Callable[[Any], Any]) -> Shape:
    """A declaration's value as suite.json holds it, read as ``kind`` makes it (as every declaration was read)."""
    return Shape("anything", lambda value: True, lambda value, where: kind(value))


@dataclass(frozen=True, kw_only=True)
class Metric:
    """A metric family. Reported keys may add a qualifier after '@' (``nmse@1024``).

    Declared by keyword and checked when made: a misspelt direction or kind would otherwise file the
    metric silently under no direction or outside the gate. suite.json keeps it under its name, each other
    field under its key (``stored``); a key a run written before it existed lacks falls back to neutral."""

    name: str
    direction: Direction = stored(_read_as(str), missing="none")
    unit: str = stored(_read_as(str), missing="")
    kind: MetricKind = stored(_read_as(str), missing="info")
    description: str = stored(_read_as(str), missing="", default="")
    key: bool = stored(_read_as(bool), missing=False, default=False)  # shown in the end-of-run table
    # what the number after '@' means, for plots: "context (tokens)"
    axis: str = stored(_read_as(lambda value: str(value or "")), missing="", default="")
    # a family plotted against this one over its axis (state vs KV cache)
    pairs_with: str | None = stored(_read_as(lambda value: value or None), missing=None, default=None)

    def __post_init__(self) -> None:
        for field, value, allowed in (("direction", self.direction, get_args(Direction)),
                                      ("kind", self.kind, get_args(MetricKind))):
            if value not in allowed:
                raise ValueError(f"metric {self.name!r}: {field} {value!r} is not one of {', '.join(allowed)}")

    @property
    def better_sign(self) -> int:
        """+1 when larger is better, -1 when smaller is better, 0 when neither."""
        return better_sign(self.direction)

    @property
    def ceiling(self) -> float | None:
        """The best value the metric can take, where its unit bounds it (a fraction where higher is
        better: 1); None where nothing bounds it or it has no direction."""
        bounds = BOUNDED_UNITS.get(self.unit)
        if bounds is None or self.better_sign == 0:
            return None
        return bounds[1] if self.better_sign > 0 else bounds[0]

    @classmethod
    def from_stored(cls, name: str, stored: Mapping[str, Any], where: str = "") -> Metric:
        """The declaration suite.json keeps under ``name`` (``where``: the prefix of its keys in errors)."""
        return from_stored(cls, dict(stored), where, given={"name": name})

    @classmethod
    def undeclared(cls, name: str) -> Metric:
        """A reported key no declaration covers: no direction, informational."""
        return cls(name=name, direction="none", unit="", kind="info")


@dataclass(frozen=True)
class DetailScatter:
    """A trial detail ``{x_key: [...], y_key: [...]}`` recorded under ``detail``: one point per item."""

    detail: str
    x_key: str
    y_key: str
    title: str
    xlabel: str
    ylabel: str


@dataclass(frozen=True)
class ParetoView:
    """One point per arm variant: the mean of metric key ``y`` against the mean of ``x`` over seeds
    (e.g. accuracy against the bytes an arm adds), with the 95% CI of ``y``."""

    x: str
    y: str
    title: str
