"""How the harness names things in MLflow: metric and param keys MLflow accepts, and nested values as
flat params. Shared by the tracker and the trial view (what a trial's MLflow run shows)."""
from __future__ import annotations

import json
import re
from typing import Any, Mapping

from harness.core.metrics import tracking_name

_BAD_NAME = re.compile(r"[^/\w.\- :]")


def mlflow_key(key: str) -> str:
    """MLflow names allow [/\\w.- :]; '@' qualifiers become '_at_' (nmse@1024 -> nmse_at_1024)."""
    return _BAD_NAME.sub("_", tracking_name(key))


def flatten(prefix: str, value: Any) -> dict[str, str]:
    """A nested value as flat params ``a.b.c`` -> text, each within MLflow's length for a param."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    text = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return {mlflow_key(prefix): text[:6000]}
