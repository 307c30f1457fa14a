"""SPALM: the gate at 1 is the local model; neighbours never include the position itself."""

import numpy as np
import pytest
import torch
from torch import nn

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.lm.knn_lm import build_datastore
from lifelong.lm.spalm import SemiparametricLM, gate_histogram, neighbour_table
from lifelong.lm.text import CausalLM, CharVocabulary, TrainSettings, train_lm

TEXT = "the cat sat on the mat. the dog sat on the log. " * 20


def lm(name, vocab, seed=0):
    torch.manual_seed(seed)
    config = ModuleConfig(vocab_size=vocab, d_model=16, heads=2, layers=1, ffn=32, causal=True,
                          max_positions=8)  # fmt: skip
    return CausalLM(build_memory_module(name, config, 8), 8)


@pytest.fixture(scope="module")
def setup():
    vocab = CharVocabulary.of(TEXT)
    data = vocab.encode(TEXT)
    frozen = lm("transformer", vocab.size)
    train_lm(frozen, data, TrainSettings(steps=10, batch_size=4, window=16, lr=1e-2, warmup=1))
    memory = build_datastore(frozen, data, 16, index="Flat")
    return vocab, data, frozen, memory


def test_a_training_position_never_retrieves_itself(setup):
    vocab, _, frozen, _ = setup
    data = np.random.default_rng(0).integers(0, vocab.size, 200)  # no two contexts alike
    memory = build_datastore(frozen, data, 16, index="Flat")
    own = neighbour_table(frozen, memory, data, 16, 3, exclude_own=True)
    other = neighbour_table(frozen, memory, data, 16, 4, exclude_own=False)
    covered = (len(data) - 1) // 16 * 16
    assert own.found[:covered].all() and not own.found[covered:].any()
    # positions whose key no other position shares (a window's first characters repeat)
    _, first, counts = np.unique(memory.keys, axis=0, return_index=True, return_counts=True)
    alone = torch.from_numpy(np.sort(first[counts == 1]))
    assert len(alone) > covered // 2
    # without the exclusion their nearest key is their own, whose value is their target
    targets = torch.from_numpy(data[1 : covered + 1])
    assert torch.equal(other.tokens[alone, 0], targets[alone])
    # with it, the same list one further on
    assert torch.equal(own.tokens[alone], other.tokens[alone, 1:])


def test_gate_at_one_gives_the_local_models_output(setup):
    vocab, data, frozen, memory = setup
    table = neighbour_table(frozen, memory, data, 16, 3, exclude_own=True)
    model = SemiparametricLM(lm("transformer-xl", vocab.size, seed=1)).eval()
    x = torch.from_numpy(data[:32].reshape(2, 16))
    tokens, found = table.rows(np.array([0, 16]), 16)
    with torch.no_grad():
        model.gate.weight.zero_()
        _, gate = model(x, tokens, found)
        assert torch.allclose(gate, torch.full_like(gate, 0.5))
        model.gate = Always(float("inf"))  # g_t = 1: the local state alone
        logits, gate = model(x, tokens, found)
        torch.testing.assert_close(logits, model.local(x))
        assert bool((gate == 1).all())


class Always(nn.Module):
    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, hidden):
        return hidden.new_full((*hidden.shape[:-1], 1), self.value)


def test_memory_read_is_attention_over_the_neighbours_embeddings(setup):
    vocab, *_ = setup
    model = SemiparametricLM(lm("transformer-xl", vocab.size))
    hidden = torch.randn(1, 2, 16)
    tokens = torch.tensor([[[1, 2, 3], [4, 5, 5]]])
    found = torch.tensor([[[True, True, False], [True, True, True]]])
    model.gate = Always(float("-inf"))  # g_t = 0: the memory read alone
    mixed, _ = model.mix(hidden, tokens, found)
    E = model.local.module.embed.words.weight
    for t in range(2):
        ys = E[tokens[0, t][found[0, t]]]  # (k', d)
        expected = torch.softmax(ys @ hidden[0, t], 0) @ ys
        torch.testing.assert_close(mixed[0, t], expected)


def test_training_moves_the_gate_and_reports_its_distribution(setup):
    vocab, data, frozen, memory = setup
    table = neighbour_table(frozen, memory, data, 16, 3, exclude_own=True)
    model = SemiparametricLM(lm("transformer-xl", vocab.size, seed=2))
    before = model.gate.weight.detach().clone()

    def logits(m, x, starts):
        return m(x, *table.rows(starts, x.shape[1]))[0]

    settings = TrainSettings(steps=5, batch_size=2, window=16, lr=1e-2, warmup=1)
    train_lm(model, data[: (len(data) - 1) // 16 * 16], settings, logits=logits)
    assert not torch.equal(model.gate.weight, before)
    hist = gate_histogram(torch.rand(1000))
    assert len(hist) == 10 and sum(hist) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="tied"):
        local = lm("transformer-xl", vocab.size)
        local.head.weight = nn.Parameter(local.head.weight.detach().clone())
        SemiparametricLM(local)


def test_neighbours_an_approximate_index_did_not_find_are_marked_missing(setup, monkeypatch):
    _, data, frozen, memory = setup
    exact = neighbour_table(frozen, memory, data, 16, 3, exclude_own=False)
    search = memory.nearest

    def fewer(queries, k):  # an IVF index whose lists held fewer than k: slot -1, inf
        distances, slots = search(queries, k)
        past = np.arange(k) >= 2
        return np.where(past, np.inf, distances), np.where(past, -1, slots)

    monkeypatch.setattr(memory, "nearest", fewer)
    table = neighbour_table(frozen, memory, data, 16, 3, exclude_own=False)
    covered = (len(data) - 1) // 16 * 16
    assert table.found[:covered, :2].all() and not table.found[:, 2].any()
    assert torch.equal(table.tokens[:covered, :2], exact.tokens[:covered, :2])
