"""kNN-LM: the mixture is a distribution equal to a brute-force computation; the datastore is
the project's episodic memory."""

import numpy as np
import pytest
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.lm.knn_lm import (
    GAIN_TOLERANCE,
    KNNLM,
    build_datastore,
    chosen_pair,
    context_vectors,
    key_block,
    keys_and_logits,
    knn_distribution,
    neighbours,
)
from lifelong.lm.text import (
    CausalLM,
    CharVocabulary,
    TrainSettings,
    evaluate_lm,
    train_lm,
    whole_windows,
)
from lifelong.memory import EpisodicMemory

TEXT = "the cat sat on the mat. the dog sat on the log. " * 30


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    vocab = CharVocabulary.of(TEXT)
    data = vocab.encode(TEXT)
    config = ModuleConfig(vocab_size=vocab.size, d_model=16, heads=2, layers=2, ffn=32,
                          causal=True, max_positions=16)  # fmt: skip
    model = CausalLM(build_memory_module("transformer", config, 16), 16)
    train_lm(model, data, TrainSettings(steps=20, batch_size=4, window=16, lr=1e-2, warmup=2))
    return model, data, vocab


def test_keys_are_the_last_feed_forward_blocks_input(trained):
    model, data, _ = trained
    assert key_block(model) is model.module.layers[-1].ffn
    x = torch.from_numpy(data[:16])[None]
    with context_vectors(model) as captured:
        model.eval()(x)
    assert captured[0].shape == (1, 16, 16)


def test_the_datastore_is_the_episodic_memory_searched_through_its_index(trained):
    model, data, _ = trained
    memory = build_datastore(model, data, 16)
    assert isinstance(memory, EpisodicMemory)
    assert len(memory) == (len(data) - 1) // 16 * 16  # one entry per position
    assert memory.get_array("token", np.array([0, 1]))[:, 0].tolist() == data[1:3].tolist()
    memory.nearest(memory.keys[:2].copy(), 3)
    assert memory.index_choice is not None  # the shared search (index: auto) served it


def brute_force(model, memory, x, k, lam, temperature, vocab):
    """Every key's distance to every query, the k smallest, the paper's two equations."""
    with context_vectors(model) as captured:
        logits = model(x)
    queries = captured[0].reshape(-1, captured[0].shape[-1]).double()
    keys = torch.from_numpy(memory.keys).double()
    tokens = torch.from_numpy(memory.get_array("token", np.arange(len(memory)))[:, 0])
    p_lm = torch.softmax(logits.double(), -1).reshape(-1, vocab)
    out = torch.zeros_like(p_lm)
    for n, q in enumerate(queries):
        d = ((keys - q) ** 2).sum(1)
        near = d.topk(k, largest=False).indices
        w = torch.softmax(-d[near] / temperature, 0)
        p_knn = torch.zeros(vocab, dtype=torch.float64).index_add_(0, tokens[near].long(), w)
        out[n] = lam * p_knn + (1 - lam) * p_lm[n]
    return out


def test_mixture_is_a_distribution_equal_to_brute_force(trained):
    model, data, vocab = trained
    memory = build_datastore(model, data[:400], 16, index="Flat")
    knn = KNNLM(model.eval(), memory, k=7, lam=0.3, temperature=2.0)
    x = torch.from_numpy(data[500:532].reshape(2, 16))
    with torch.no_grad():
        mixed = knn.log_probs(model, x).exp().reshape(-1, vocab.size)
        expected = brute_force(model, memory, x, 7, 0.3, 2.0, vocab.size)
    torch.testing.assert_close(mixed.sum(-1), torch.ones(32, dtype=torch.float64))
    torch.testing.assert_close(mixed, expected, atol=1e-5, rtol=1e-4)


def test_tuning_picks_k_and_lambda_and_lambda_zero_is_the_lm(trained):
    model, data, _ = trained
    memory = build_datastore(model, data[:800], 16)
    knn = KNNLM(model, memory, k=4, lam=0.0)
    plain, _ = evaluate_lm(model, data[800:], 16)
    alone, _ = evaluate_lm(model, data[800:], 16, log_probs=knn.log_probs)
    assert alone == pytest.approx(plain, rel=1e-5)
    losses = knn.tune(data[800:], 16, ks=(2, 8), lams=(0.0, 0.25, 0.5))
    assert losses[(knn.k, knn.lam)] == min(losses.values())
    # repetitive text: the datastore knows what follows, so it helps
    assert min(losses.values()) < losses[(2, 0.0)]


def test_entries_an_approximate_index_did_not_find_weigh_nothing(trained, monkeypatch):
    model, data, vocab = trained
    memory = build_datastore(model, data, 16, index="Flat")
    queries = torch.from_numpy(memory.keys[:5].copy())
    full = neighbours(memory, queries, 4)
    search = memory.nearest

    def fewer(q, k):  # slots -1 and distance inf past the second, as FAISS's IVF returns
        distances, slots = search(q, k)
        past = np.arange(k) >= 2
        return np.where(past, np.inf, distances), np.where(past, -1, slots)

    monkeypatch.setattr(memory, "nearest", fewer)
    found = neighbours(memory, queries, 4)
    p = knn_distribution(found, vocab.size)
    assert torch.allclose(p.sum(-1), torch.ones(5, dtype=p.dtype))
    two = type(full)(full.distances[:, :2], full.tokens[:, :2])
    assert torch.allclose(p, knn_distribution(two, vocab.size))


def test_tuning_widens_the_grid_until_the_best_pair_is_inside_it(trained):
    """A best pair on the grid's largest k or λ is not an optimum: the search goes on past it
    (k doubled while the datastore holds that many, λ up to `LAMBDA_LIMIT`)."""
    from lifelong.lm.knn_lm import K_LIMIT, LAMBDA_LIMIT

    model, data, _ = trained
    memory = build_datastore(model, data[:800], 16)
    knn = KNNLM(model, memory)
    losses = knn.tune(data[800:], 16, ks=(1,), lams=(0.0,))  # a grid of one pair: its edge
    grid = knn.grid
    assert losses[(knn.k, knn.lam)] <= min(losses.values()) + GAIN_TOLERANCE
    assert grid["k"][:2] == [1, 2] and grid["lambda"][:2] == [0.0, 0.1]  # both widened
    inside_k = knn.k < grid["k"][-1] or 2 * grid["k"][-1] > min(len(memory), K_LIMIT)
    inside_lam = knn.lam < grid["lambda"][-1] or grid["lambda"][-1] + 0.1 > LAMBDA_LIMIT
    assert inside_k and inside_lam
    assert set(losses) == {(k, lam) for k in grid["k"] for lam in grid["lambda"]}


def test_a_flat_edge_stops_the_widening_and_the_smallest_as_good_pair_is_chosen(
    trained, monkeypatch
):
    """The loss falls by ever less as k doubles (far neighbours weigh nothing): the grid stops
    where doubling gains under `GAIN_TOLERANCE`, and the pair chosen lies inside it."""
    model, data, _ = trained
    knn = KNNLM(model, build_datastore(model, data[:800], 16))
    asked = []

    def losses(data, window, ks, lams, batch_size):  # flat in k past 4; best λ 0.2
        asked.append(list(ks))
        return {(k, lam): 1.0 + 0.1 / min(k, 4) + 1e-6 / k + (lam - 0.2) ** 2
                for k in ks for lam in lams}  # fmt: skip

    monkeypatch.setattr(knn, "_grid_losses", losses)
    knn.tune(data[800:], 16, ks=(1, 2), lams=(0.0, 0.1, 0.2, 0.3))
    assert knn.grid["k"] == [1, 2, 4, 8] and asked[-1] == [1, 2, 4, 8]  # 8 gains nothing
    assert (knn.k, knn.lam) == (4, 0.2)  # the smallest k as good as the best: inside the grid
    assert chosen_pair({(8, 0.2): 1.0, (4, 0.2): 1.00005, (2, 0.2): 1.01}) == (4, 0.2)


def test_recall_is_checked_on_held_out_contexts_at_the_chosen_k(trained, monkeypatch):
    from lifelong.lm import knn_lm

    model, data, _ = trained
    memory = build_datastore(model, data[:600], 16)
    knn = KNNLM(model, memory, k=8)
    asked = []
    original = EpisodicMemory.recall

    def spy(self, queries, k):
        asked.append((queries.copy(), k))
        return original(self, queries, k)

    monkeypatch.setattr(EpisodicMemory, "recall", spy)
    monkeypatch.setattr(knn_lm, "RECALL_QUERIES", 40)
    found = knn_lm.held_out_recall(knn, data[600:], 16, batch_size=4)
    assert found == {"k": 8, "queries": 40, "recall": 1.0, "se": 0.0}  # exact search: all
    queries, k = asked[0]
    assert k == 8 and queries.shape == (40, memory.key_dim)
    held = [keys_and_logits(model, x)[0].reshape(-1, memory.key_dim)
            for x, _, _ in whole_windows(data[600:], 16, 4)]  # fmt: skip
    held = {tuple(row) for row in torch.cat(held).numpy()}
    assert all(tuple(q) in held for q in queries)  # the held-out text's contexts
