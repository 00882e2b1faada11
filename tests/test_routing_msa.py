"""MSA pieces against hand-written references, the fast index against the reference scoring,
and the bad-input contract (empty bank, shape mismatches, banks too large to allocate)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from harness.tasks.routing.mechanism.model import PrecisionHead
from harness.tasks.routing.mechanism.msa import (
    BankTooLargeError,
    MemoryBank,
    RouterProjector,
    chunk_mean_pool,
    ensure_bank_fits,
    routing_contrastive_loss,
)
from harness.tasks.routing.mechanism.precision_router import PrecisionGuidedRouter
from harness.tasks.routing.scoring import RoutingIndex, random_keys


def test_chunk_mean_pool_excludes_padding_and_masked_tokens() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 7, 3, generator=gen, dtype=torch.float64)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 1] = False
    pooled = chunk_mean_pool(x, 3, mask)
    assert pooled.shape == (2, 3, 3)
    for b in range(2):
        for c in range(3):
            rows = [i for i in range(c * 3, min(c * 3 + 3, 7)) if mask[b, i]]
            torch.testing.assert_close(pooled[b, c], x[b, rows].mean(dim=0))
    assert torch.equal(chunk_mean_pool(torch.zeros(2, 4), 4, torch.zeros(2, dtype=torch.bool)), torch.zeros(1, 4))


def test_contrastive_loss_matches_hand_computation() -> None:
    scores = torch.tensor([[0.9, 0.2, 0.5, -0.1], [0.1, 0.3, 0.0, 0.4]], dtype=torch.float64)
    positive = torch.tensor([[True, False, True, False], [False, False, False, True]])
    tau = 0.5
    terms = []
    for b in range(2):
        negatives = sum(math.exp(scores[b, j] / tau) for j in range(4) if not positive[b, j])
        for p in range(4):
            if positive[b, p]:
                own = math.exp(scores[b, p] / tau)
                terms.append(-math.log(own / (own + negatives)))
    expected = sum(terms) / len(terms)
    assert routing_contrastive_loss(scores, positive, tau).item() == pytest.approx(expected, rel=1e-12)


def test_contrastive_loss_at_positives_only_equals_every_pair_bit_for_bit() -> None:
    """The loss keeps the positives before its per-pair terms, not after: a trained model must not
    move by a single bit for it, so value and gradient equal the every-pair form exactly in float32."""
    gen = torch.Generator().manual_seed(3)
    scores = torch.randn(96, 640, generator=gen).tanh()
    positive = torch.rand(96, 640, generator=gen) < 0.002
    positive[torch.arange(96), torch.randint(640, (96,), generator=gen)] = True
    ours = scores.clone().requires_grad_(True)
    every_pair = scores.clone().requires_grad_(True)
    loss = routing_contrastive_loss(ours, positive, 0.05)
    logits = every_pair / 0.05
    negatives = torch.logsumexp(logits.masked_fill(positive, float("-inf")), dim=-1, keepdim=True)
    reference = (torch.logaddexp(logits, negatives) - logits)[positive].mean()
    loss.backward()
    reference.backward()
    assert torch.equal(loss.detach(), reference.detach())
    assert torch.equal(ours.grad, every_pair.grad)


def test_router_projector_score_is_max_over_tokens_of_mean_head_cosine() -> None:
    torch.manual_seed(0)
    router = RouterProjector(d_model=8, router_dim=6, n_heads=3).double()
    h = torch.randn(2, 4, 8, dtype=torch.float64)
    keys = torch.randn(5, 6, dtype=torch.float64)
    scores = router.compute_routing_scores(h, keys)
    q = router.project_query(h)
    for b in range(2):
        for n in range(5):
            per_token = [
                sum(F.cosine_similarity(q[b, s, 2 * i : 2 * i + 2], keys[n, 2 * i : 2 * i + 2], dim=0) for i in range(3)) / 3
                for s in range(4)
            ]
            assert scores[b, n].item() == pytest.approx(max(per_token).item(), rel=1e-10)


def reference_document_scores(
    queries: torch.Tensor, keys: torch.Tensor, n_heads: int, chunks_per_doc: int
) -> torch.Tensor:
    """(B, n_docs) by the definition: max over query tokens and a document's chunks of the mean
    over heads of the cosines."""
    chunk_scores = torch.einsum(
        "bshd,nhd->bshn",
        F.normalize(queries.unflatten(-1, (n_heads, -1)), dim=-1),
        F.normalize(keys.unflatten(-1, (n_heads, -1)), dim=-1),
    ).mean(dim=2).amax(dim=1)
    return chunk_scores.view(queries.shape[0], -1, chunks_per_doc).amax(dim=-1)


# Blocks of 8 and 12 chunks (2 and 3 documents, the last block partial), of 3 chunks (less than a
# document: one per block, fewer than k), one block for the whole bank, and the default size.
@pytest.mark.parametrize("block_chunks", [8, 12, 3, 1000, None])
@pytest.mark.parametrize("n_heads,tokens", [(4, 5), (1, 1)])
def test_fast_index_matches_reference_document_scores(n_heads: int, tokens: int, block_chunks: int | None) -> None:
    gen = torch.Generator().manual_seed(1)
    keys = torch.randn(40, 8, generator=gen, dtype=torch.float64)
    queries = torch.randn(3, tokens, 8, generator=gen, dtype=torch.float64)
    index = RoutingIndex(keys, n_heads=n_heads, chunks_per_doc=4, block_chunks=block_chunks)
    reference = reference_document_scores(queries, keys, n_heads, chunks_per_doc=4)
    torch.testing.assert_close(index.document_scores(queries), reference)
    values, docs = index.top_documents(queries, k=3)
    expected = reference.topk(3, dim=1)
    torch.testing.assert_close(values, expected.values)
    assert torch.equal(docs, expected.indices)


@pytest.mark.parametrize("tokens", [1, 3])
def test_fast_index_top_documents_with_tied_scores_across_blocks(tokens: int) -> None:
    """Documents 0, 3 and 6 are copies (one per block of three), so they tie at the top: the
    k best scores are exact and every returned document is distinct and has its returned score."""
    gen = torch.Generator().manual_seed(2)
    docs = torch.randn(9, 2, 8, generator=gen, dtype=torch.float64)
    docs[3] = docs[6] = docs[0]
    keys = docs.flatten(0, 1)
    queries = docs[0, :1].expand(2, tokens, 8).clone()
    index = RoutingIndex(keys, n_heads=2, chunks_per_doc=2, block_chunks=6)
    reference = reference_document_scores(queries, keys, n_heads=2, chunks_per_doc=2)
    values, found = index.top_documents(queries, k=4)
    torch.testing.assert_close(values, reference.topk(4, dim=1).values)
    torch.testing.assert_close(torch.gather(reference, 1, found), values)
    assert all(len(set(row.tolist())) == 4 for row in found)
    assert all(set(row[:3].tolist()) == {0, 3, 6} for row in found)


def _precision_router() -> PrecisionGuidedRouter:
    torch.manual_seed(0)
    return PrecisionGuidedRouter(PrecisionHead(8, 10), d_model=8, router_dim=4, n_heads=2)


def test_empty_bank_gives_empty_gain() -> None:
    router = _precision_router()
    gains, doc_ids = router.estimate_precision_gain(torch.randn(3, 5, 8), torch.tensor([1, 2, 3]), MemoryBank(4), layer_idx=0)
    assert gains.shape == (3, 0) and doc_ids == []


def test_dimension_mismatches_name_the_shapes() -> None:
    router = _precision_router()
    with pytest.raises(ValueError, match=r"\(5, 3\)"):
        router.compute_routing_scores(torch.randn(2, 5, 8), torch.randn(5, 3), t=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"\(2, 5, 7\)"):
        router.compute_precision_weights(torch.randn(2, 5, 7), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"\(3, 5\)"):
        RouterProjector(8, 4, 2).compute_routing_scores(torch.randn(2, 6, 8), torch.randn(3, 5))
    bank = MemoryBank(4)
    bank.add_document("a", {0: {"K": torch.randn(2, 8), "V": torch.randn(2, 8), "KR": torch.randn(2, 4)}})
    with pytest.raises(ValueError, match=r"\(2, 6\)"):
        bank.add_document("b", {0: {"K": torch.randn(2, 6), "V": torch.randn(2, 6), "KR": torch.randn(2, 4)}})


def test_bank_too_large_is_refused_with_its_size_before_allocation() -> None:
    n_chunks = 10**13
    expected_bytes = n_chunks * 64 * 4
    with pytest.raises(BankTooLargeError, match=str(expected_bytes)):
        ensure_bank_fits(n_chunks, 64, torch.device("cpu"))
    with pytest.raises(BankTooLargeError, match=str(expected_bytes)):
        random_keys(n_chunks, 64, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert ensure_bank_fits(1000, 64, torch.device("cpu")) == 1000 * 64 * 4
