"""The uncertain_key regime puts the route only at the masked position; the token-weighting
ablations change nothing but the pooling weights; an unknown regime, weighting, layer or premise metric is
one error line."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from harness.cli import main
from harness.tasks.routing.mechanism.model import PrecisionHead
from harness.tasks.routing.mechanism.precision_router import PrecisionGuidedRouter
from harness.tasks.routing.pooling import (
    InversePrecisionRouter,
    OracleMaskedRouter,
    OracleTokenRouter,
    SharpPrecisionRouter,
    pool_tokens_of,
    pooling_weights,
)
from harness.tasks.routing.workload import (
    Layout,
    Vocabulary,
    make_documents,
    make_queries,
)

SUITES = Path(__file__).resolve().parents[1] / "suites"


def _layout(regime: str = "uncertain_key") -> Layout:
    return Layout(Vocabulary(n_entities=6, n_attributes=5, n_values=7), entity_len=2, doc_facts=3,
                  query_facts=2, chunk_size=2, regime=regime, segments=4)


def test_needle_queries_hide_the_route_in_the_one_masked_value_among_visible_distractor_facts() -> None:
    layout = _layout()
    docs = make_documents(layout, 30, torch.Generator().manual_seed(0))
    gold = torch.tensor([0, 5, 5, 29, 12, 7])
    batch = make_queries(layout, docs, gold, max_noise_step=1, n_diffusion_steps=1000,
                         generator=torch.Generator().manual_seed(1))
    assert batch.clean.shape == (6, 4 * 4) and layout.query_len == 16
    facts_of = {tuple(doc[:2]): {tuple(doc[i : i + 2]) for i in range(2, 8, 2)} for doc in docs.tolist()}
    for row in range(6):
        segments = batch.clean[row].view(4, 4).tolist()
        entities = [tuple(segment[:2]) for segment in segments]
        assert len(set(entities)) == 4  # distinct documents
        for segment in segments:  # every segment is a true fact of the document it names
            assert tuple(segment[2:]) in facts_of[tuple(segment[:2])]
        asked = batch.is_value[row].nonzero().flatten().tolist()
        assert len(asked) == 1 and asked[0] % 4 == 3  # one value, the last token of its segment
        gold_segment = asked[0] // 4
        assert entities[gold_segment] == tuple(docs[gold[row], :2].tolist())
        assert batch.route_tokens[row].nonzero().flatten().tolist() == [4 * gold_segment, 4 * gold_segment + 1]
    assert bool(batch.masked[batch.is_value].all())
    # visible_entity: the route tokens are the query's entity name, at the front
    visible = make_queries(_layout("visible_entity"), docs, gold, 1, 1000, torch.Generator().manual_seed(1))
    assert visible.route_tokens.sum(dim=1).tolist() == [2] * 6 and bool(visible.route_tokens[:, :2].all())


def _routers() -> dict[str, PrecisionGuidedRouter]:
    torch.manual_seed(0)
    head = PrecisionHead(16, 10)
    with torch.no_grad():
        head.tok.weight.normal_()  # token precisions that clearly differ
    routers = {"precision": PrecisionGuidedRouter(head, 16, 8, 2)}
    for name, cls in (("inverse", InversePrecisionRouter), ("sharp", SharpPrecisionRouter), ("oracle", OracleTokenRouter)):
        routers[name] = cls(head, 16, 8, 2)
        routers[name].load_state_dict(routers["precision"].state_dict())
    return routers


def test_weighting_ablations_differ_from_the_seed_only_in_the_token_weights() -> None:
    routers = _routers()
    h, t = torch.randn(3, 7, 16), torch.tensor([1, 5, 9])
    route = torch.zeros(3, 7, dtype=torch.bool)
    route[:, 2:4] = True
    with torch.no_grad():
        seed = routers["precision"].compute_precision_weights(h, t).squeeze(-1)
        uncertainty = routers["precision"].uncertainty(h, t).squeeze(-1)
        inverse = pooling_weights(routers["inverse"], h, t, route)
        sharp = pooling_weights(routers["sharp"], h, t, route)
        oracle = pooling_weights(routers["oracle"], h, t, route)
        oracle_query = routers["oracle"].project_query(h, pool_tokens=route)
    precision = 1.0 / uncertainty
    torch.testing.assert_close(inverse, precision / precision.sum(dim=1, keepdim=True))
    torch.testing.assert_close(sharp, seed**4 / (seed**4).sum(dim=1, keepdim=True))
    # the ablations order tokens as claimed: inverse reverses the seed's order, sharp keeps it
    assert torch.equal(inverse.argmax(dim=1), seed.argmin(dim=1)) and torch.equal(sharp.argmax(dim=1), seed.argmax(dim=1))
    assert (sharp.max(dim=1).values > seed.max(dim=1).values).all()
    torch.testing.assert_close(oracle, route.float() / 2)
    torch.testing.assert_close(oracle_query, routers["oracle"].q_proj(h[:, 2:4].mean(dim=1)))
    with pytest.raises(TypeError, match="pools the workload's tokens"):
        routers["oracle"].compute_precision_weights(h, t)


def test_oracle_masked_pools_only_the_asked_slot_and_oracle_tokens_only_the_route() -> None:
    layout = _layout()
    gen = torch.Generator().manual_seed(2)
    documents = make_documents(layout, 12, gen)
    queries = make_queries(layout, documents, torch.arange(6), 10, 100, gen)
    head = PrecisionHead(16, 100)
    masked, tokens = OracleMaskedRouter(head, 16, 8, 2), OracleTokenRouter(head, 16, 8, 2)
    assert torch.equal(pool_tokens_of(masked, queries), queries.is_value)
    assert torch.equal(pool_tokens_of(tokens, queries), queries.route_tokens)
    assert torch.equal(pool_tokens_of(PrecisionGuidedRouter(head, 16, 8, 2), queries), queries.route_tokens)
    h = torch.randn(6, layout.query_len, 16)
    weights = pooling_weights(masked, h, queries.t, pool_tokens_of(masked, queries))
    torch.testing.assert_close(weights, queries.is_value.float())  # one asked slot per needle query
    torch.testing.assert_close(masked.project_query(h, pool_tokens=queries.is_value), masked.q_proj(h[queries.is_value]))


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ("regime: uncertain_key,", "regime: uncertain_kye,",
         ["param 'regime'", "'visible_entity' or 'uncertain_key'", "(got 'uncertain_kye')"]),
        ("router: oracle_masked}", "router: oracle_maskd}",
         ["param 'router'", "'mean_pool'", "'precision_inverse'", "'oracle_masked'", "(got 'oracle_maskd')"]),
        ("segments: 4,", "segments: 4, msa_from_layer: 3,",
         ["param 'msa_from_layer'", "no layer of the 3-layer backbone", "(got 3)"]),
        ("metric: family_lead,", "metric: family_leed,",
         ["premises.3.metric", "declares no metric 'family_leed'", "family_lead"]),
    ],
    ids=["regime", "weighting", "layer", "premise-metric"],
)
def test_an_unknown_regime_weighting_layer_or_premise_metric_is_one_line_with_file_line_and_the_known_names(
    tmp_path: Path, old: str, new: str, fragments: list[str]
) -> None:
    text = (SUITES / "routing_needle.yaml").read_text()
    assert text.count(old) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new))
    line = 1 + text[: text.index(old)].count("\n")
    result = CliRunner().invoke(main, ["validate", str(bad)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith(f"error: {bad}:{line}: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
