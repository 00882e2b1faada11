"""Token-weighting ablations of the precision router: the same router and training, only the
weights that pool the query tokens change, so each contrast with ``precision`` isolates a choice
of weights.

- ``PoweredPrecisionRouter``: weights proportional to (1/Pi)^power. power 1 is the seed's
  formula, 0 uniform (``mean_pool``), -1 its inverse (confident tokens up), 1/temperature > 1 a
  temperature-sharpened version (the seed's weights as a softmax of -log Pi at temperature 1).
- ``OracleTokenRouter``: weights only on the query tokens that truly identify the gold document
  (the workload knows them): the positive control for pooling.
- ``OracleMaskedRouter``: weights only on the asked (masked value) slots: what perfect
  uncertainty weights would pool, so the positive control of the seed's premise that the slot the
  model does not know carries the route.
- ``MaskPoolRouter``: weights 1 on every masked input, 0 elsewhere: the free shortcut (the error,
  hence 1/Pi, is 0 on every visible token), which precision must beat to carry anything more.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.tasks.routing.mechanism.model import check_hidden
from harness.tasks.routing.mechanism.precision_router import PrecisionGuidedRouter
from harness.tasks.routing.workload import QueryBatch


class PoweredPrecisionRouter(PrecisionGuidedRouter):
    """The precision router with its uncertainty raised to ``power`` (set after construction)."""

    power: float = 1.0

    def uncertainty(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return super().uncertainty(h, t).pow(self.power)


class InversePrecisionRouter(PoweredPrecisionRouter):
    """Weights proportional to precision: the tokens the model is surest about drive routing."""

    power = -1.0


class SharpPrecisionRouter(PoweredPrecisionRouter):
    """The seed's weights sharpened: (1/Pi)^(1/temperature); install_router sets the power."""

    power = 4.0


class OracleTokenRouter(PrecisionGuidedRouter):
    """Pools only the given query tokens (uniformly): the gold document's identifying tokens
    (``tokens_of``); without them it refuses to route."""

    @staticmethod
    def tokens_of(queries: QueryBatch) -> torch.Tensor:
        return queries.route_tokens

    def uncertainty(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{type(self).__name__} pools the workload's tokens: call project_query(h, pool_tokens=...)")

    def project_query(
        self, h_q: torch.Tensor, t: torch.Tensor | None = None, pool_tokens: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, router_dim): q_proj of the mean of the pooled tokens' states (B, S) bool."""
        check_hidden(h_q, self.d_model, "query hidden states")
        if pool_tokens is None or pool_tokens.shape != h_q.shape[:2]:
            got = None if pool_tokens is None else tuple(pool_tokens.shape)
            raise ValueError(f"pool_tokens must be a (B, S) = {tuple(h_q.shape[:2])} mask, got {got}")
        weights = pool_tokens.to(h_q.dtype).unsqueeze(-1)
        return self.q_proj((weights * h_q).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0))

    def pooled_scores(self, h_q: torch.Tensor, keys: torch.Tensor, pool_tokens: torch.Tensor) -> torch.Tensor:
        """(B, N) cosine between the pooled tokens' routing query and every routing key (N, router_dim)."""
        query = F.normalize(self.project_query(h_q, pool_tokens=pool_tokens), dim=-1)
        return query @ F.normalize(keys, dim=-1).T


class OracleMaskedRouter(OracleTokenRouter):
    """Pools only the asked (masked value) slots of the query."""

    @staticmethod
    def tokens_of(queries: QueryBatch) -> torch.Tensor:
        return queries.is_value


class MaskPoolRouter(OracleTokenRouter):
    """Pools every masked input (the asked values and the diffusion noise's masks), weight 1 each:
    what 1/Pi would pool if it were only a mask indicator, so the shortcut precision must beat."""

    @staticmethod
    def tokens_of(queries: QueryBatch) -> torch.Tensor:
        return queries.masked


def pool_tokens_of(router, queries: QueryBatch) -> torch.Tensor:
    """(B, S) the tokens an oracle router pools; the route tokens for any other router, which
    ignores them."""
    return router.tokens_of(queries) if isinstance(router, OracleTokenRouter) else queries.route_tokens


def pooling_weights(router: PrecisionGuidedRouter, h: torch.Tensor, t: torch.Tensor, pool_tokens: torch.Tensor) -> torch.Tensor:
    """(B, S) the weights a pooled router gives each query token (they sum to 1 per query)."""
    if isinstance(router, OracleTokenRouter):
        weights = pool_tokens.to(h.dtype)
        return weights / weights.sum(dim=1, keepdim=True).clamp_min(1.0)
    return router.compute_precision_weights(h, t).squeeze(-1)
