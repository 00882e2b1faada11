"""What isolates the mechanism: held-out documents no router trained on, the mean-pooling
ablation (same router, uniform weights), an oracle with real distractors, and a backbone trained
with the top-k memory it is evaluated with."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.execution.executor import run_single
from harness.tasks.routing.mechanism.model import PrecisionHead
from harness.tasks.routing.mechanism.precision_router import MeanPoolRouter, PrecisionGuidedRouter
from harness.tasks.routing import routers as routers_module
from harness.tasks.routing import task as task_module
from harness.tasks.routing.routers import fixed_document_scores
from harness.tasks.routing.task import RoutingTask, backbone_spec, layout_of
from harness.tasks.routing.workload import Layout, Vocabulary, distinct_names, split_names
from test_routing_task import TINY


def _names(documents: torch.Tensor, entity_len: int) -> set[tuple[int, ...]]:
    return {tuple(row) for row in documents[:, :entity_len].tolist()}


def test_split_names_are_disjoint_and_a_set_does_not_depend_on_the_sizes_after_it() -> None:
    layout = Layout(Vocabulary(n_entities=8, n_attributes=4, n_values=4), entity_len=2, doc_facts=2,
                    query_facts=1, chunk_size=2)
    train, bank = split_names(layout, [20, 30], torch.Generator().manual_seed(0))
    assert len(set(train.tolist()) | set(bank.tolist())) == 50
    train_again, small_bank = split_names(layout, [20, 5], torch.Generator().manual_seed(0))
    assert torch.equal(train, train_again) and torch.equal(small_bank, bank[:5])
    with pytest.raises(ValueError, match="65 documents"):
        split_names(layout, [60, 5], torch.Generator().manual_seed(0))


def test_names_from_a_space_too_large_to_permute_are_distinct_and_prefix_stable() -> None:
    space = 128**4
    many = distinct_names(space, 5000, torch.Generator().manual_seed(1))
    few = distinct_names(space, 300, torch.Generator().manual_seed(1))
    assert len(set(many.tolist())) == 5000 and int(many.max()) < space
    assert torch.equal(few, many[:300])


@pytest.mark.integration  # trains the routers
def test_routers_never_train_on_the_documents_they_are_evaluated_on(tmp_path: Path, monkeypatch) -> None:
    seen: dict[str, torch.Tensor] = {}

    def spy(where: str, original):
        def make_queries(layout, documents, *args, **kwargs):
            seen.setdefault(where, documents.clone())
            return original(layout, documents, *args, **kwargs)
        return make_queries

    monkeypatch.setattr(routers_module, "make_queries", spy("router", routers_module.make_queries))
    monkeypatch.setattr(task_module, "make_queries", spy("eval", task_module.make_queries))
    result = run_single(RoutingTask, {**TINY, "router": "mean_pool", "measure_speed": False}, seed=1,
                        work_root=tmp_path)
    assert result.finished, result.error
    trained, evaluated = _names(seen["router"], 2), _names(seen["eval"], 2)
    assert len(trained) == TINY["backbone.docs"] and len(evaluated) == TINY["bank_size"]
    assert not trained & evaluated


def test_mean_pool_is_the_precision_router_with_uniform_weights() -> None:
    torch.manual_seed(0)
    head = PrecisionHead(16, 10)
    with torch.no_grad():
        head.tok.weight.normal_()  # a head whose token precisions clearly differ
    precision = PrecisionGuidedRouter(head, 16, 8, 2)
    ablation = MeanPoolRouter(head, 16, 8, 2)
    ablation.load_state_dict(precision.state_dict())
    h, t, keys = torch.randn(3, 7, 16), torch.tensor([1, 5, 9]), torch.randn(11, 8)
    with torch.no_grad():
        uniform = ablation.compute_precision_weights(h, t)
        weights = precision.compute_precision_weights(h, t)
        # the seed's own fallback: t=None pools by the plain mean
        reference = precision.compute_routing_scores(h, keys, t=None)
        pooled_by_mean = ablation.compute_routing_scores(h, keys, t=t)
        pooled_by_precision = precision.compute_routing_scores(h, keys, t=t)
    assert torch.allclose(uniform, torch.full_like(uniform, 1 / 7))
    assert float((weights - 1 / 7).abs().max()) > 0.02
    assert torch.allclose(pooled_by_mean, reference, atol=1e-5)
    assert not torch.allclose(pooled_by_precision, reference, atol=1e-3)


def test_oracle_puts_gold_first_and_draws_its_distractors_at_random() -> None:
    gold = torch.tensor([3, 3, 0, 7, 7, 7])
    scores = fixed_document_scores("oracle", gold, 10, torch.Generator().manual_seed(0))
    top = scores.topk(4, dim=1).indices
    assert torch.equal(top[:, 0], gold)
    assert len({tuple(sorted(row[1:].tolist())) for row in top}) > 1


def test_backbone_trains_with_top_k_memory_and_names_cover_a_held_out_bank() -> None:
    params = RoutingTask.validate_params({**TINY, "top_k": 3})
    assert backbone_spec(params, layout_of(params)).memory_docs == 3
    one_token = RoutingTask.validate_params({"entity_len": 1, "bank_size": 2048})
    assert one_token.entity_tokens == 8192 and layout_of(one_token).max_documents >= 4096 + 2048
    assert RoutingTask.validate_params({"entity_len": 2}).entity_tokens == 128
    with pytest.raises(ValueError, match="disjoint names"):
        RoutingTask.validate_params({**TINY, "bank_size": 40})
