"""The asked-slot probe reads a document's name where the state holds it linearly, on names it never
trained on, and reads nothing from states that carry no name (known truth from a stand-in backbone)."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from harness.tasks.routing.probe import ProbeTraining, probe_accuracy, slot_states, train_probe
from harness.tasks.routing.workload import Layout, Vocabulary, make_documents, make_queries, split_names

LAYOUT = Layout(Vocabulary(n_entities=8, n_attributes=4, n_values=6), entity_len=2, doc_facts=4, query_facts=1,
                chunk_size=2, regime="uncertain_key", segments=3)


class NameInSlot:
    """A stand-in backbone: the state at every position is a one-hot code of its segment's entity
    tokens as the query shows them (``holds_name``), or noise."""

    config = SimpleNamespace(n_diffusion_steps=100)

    def __init__(self, holds_name: bool) -> None:
        self.holds_name = holds_name
        self.generator = torch.Generator().manual_seed(7)

    def hidden_before(self, layer: int, tokens: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if not self.holds_name:
            return torch.randn(*tokens.shape, 2 * (LAYOUT.vocabulary.size + 1), generator=self.generator)
        segment_start = torch.arange(tokens.shape[1]) // LAYOUT.segment_len * LAYOUT.segment_len
        names = torch.stack([tokens[:, segment_start + i] for i in range(LAYOUT.entity_len)], dim=-1)
        return torch.nn.functional.one_hot(names, LAYOUT.vocabulary.size + 1).flatten(2).float()


def _accuracy(holds_name: bool) -> float:
    gen = torch.Generator().manual_seed(0)
    train_names, test_names = split_names(LAYOUT, [48, 16], gen)
    train_docs = make_documents(LAYOUT, 48, gen, names=train_names)
    test_docs = make_documents(LAYOUT, 16, gen, names=test_names)
    backbone = SimpleNamespace(model=NameInSlot(holds_name), routing_layer=1)
    training = ProbeTraining(queries=512, steps=150, lr=0.05, max_noise_step=1)
    probe = train_probe(backbone, train_docs, LAYOUT, training, gen, torch.device("cpu"), torch.Generator().manual_seed(1))
    queries = make_queries(LAYOUT, test_docs, torch.arange(16).repeat(4), 1, 100, gen)
    hidden = backbone.model.hidden_before(1, queries.noisy, queries.t)
    return probe_accuracy(probe, *slot_states(hidden, queries, test_docs, LAYOUT))


def test_probe_reads_a_linearly_held_name_of_an_unseen_document() -> None:
    assert _accuracy(holds_name=True) > 0.9  # a noise-masked name token now and then is unreadable


def test_probe_reads_nothing_from_states_without_the_name() -> None:
    assert _accuracy(holds_name=False) < 0.1  # chance: 1/64 names


def test_probe_is_the_same_whatever_the_global_rng_holds() -> None:
    """The shared probe is built by whichever trial of a seed gets there first, and the arms leave torch's
    global RNG in different states (a pooled router's construction draws from it): the probe must not read it."""
    gen = torch.Generator().manual_seed(0)
    train_names, _ = split_names(LAYOUT, [48, 16], gen)
    train_docs = make_documents(LAYOUT, 48, gen, names=train_names)
    training = ProbeTraining(queries=64, steps=5, lr=0.05, max_noise_step=1)
    probes = []
    for global_seed in (11, 12):
        torch.manual_seed(global_seed)
        backbone = SimpleNamespace(model=NameInSlot(holds_name=True), routing_layer=1)
        probes.append(train_probe(backbone, train_docs, LAYOUT, training, torch.Generator().manual_seed(2),
                                  torch.device("cpu"), torch.Generator().manual_seed(3)))
    for name in ("weight", "bias"):
        assert torch.equal(probes[0][name], probes[1][name])
