import copy

import pytest
import torch
from torch.func import functional_call

from lifelong import registry
from lifelong.encoders.base import attention_implementation
from lifelong.strategies.maml_er import MAMLER, MAMLEROptions
from lifelong.strategy import StrategyContext
from tests.conftest import tiny_classifier, toy_stream

# b = 4, m = 2, R_I = 8: R_F = ceil((8 / 4 + 1) / 3) = 1, every episode queries 4 memories
SMALL = {"support_batches": 2, "replay_every": 8, "replay_ratio": 0.5, "inner_lr": 0.5}


def stream_batches(kind, n=6, task=0, size=4):
    train = toy_stream(n_train=n * size).tasks[task].train
    return [kind(list(train[i : i + size])) for i in range(0, len(train), size)]


def build(task, seed=0, **overrides):
    context = StrategyContext(tiny_classifier(seed=seed), task, lr=1e-3, batch_size=4)
    return registry.build("maml-er", context, {**SMALL, **overrides})


def snapshot(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def same_weights(module, before):
    return all(torch.equal(p, before[n]) for n, p in module.named_parameters())


def rows(batch):
    """Each row's real token ids, as tuples."""
    return {
        tuple(ids[mask.bool()].tolist()) for ids, mask in zip(batch.input_ids, batch.attention_mask)
    }


def test_maml_er_is_registered_with_the_reference_defaults():
    assert "maml-er" in registry.names() and registry.get("maml-er") is MAMLER
    assert registry.describe()["maml-er"]
    o = MAMLEROptions()
    assert (o.support_batches, o.inner_lr, o.replay_every, o.replay_ratio) == (5, 1e-3, 9600, 0.01)
    assert o.first_order and o.meta_test and o.write_prob == 1.0
    assert o.max_grad_norm == 0.0  # cls_maml.py never clips
    with pytest.raises(ValueError, match="inner_lr"):
        MAMLEROptions(inner_lr=0.0)


@pytest.mark.parametrize("first_order", [True, False])
def test_inner_loop_adapts_encoder_and_head_and_leaves_the_module_alone(task, first_order):
    strategy = build(task, first_order=first_order)
    before = snapshot(strategy.model)
    adapted = strategy.inner_loop(stream_batches(task, n=2))
    assert same_weights(strategy.model, before)
    assert set(adapted) == {n for n, p in strategy.model.named_parameters() if p.requires_grad}
    changed = [k for k, v in adapted.items() if not torch.equal(v.detach(), before[k])]
    assert any(k.startswith("encoder.") for k in changed)
    assert any(k.startswith("head.") for k in changed)
    assert all(v.requires_grad != first_order for v in adapted.values())


def reference_meta_gradient(model, support, query, lr, create_graph):
    """MAML's meta-gradient by plain autograd: W' = W − α∇L_s(W) per support batch."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    weights = [p for n, p in model.named_parameters() if p.requires_grad]
    params = list(weights)
    for batch in support:
        logits = functional_call(
            model, dict(zip(names, params)), (batch.input_ids, batch.attention_mask)
        )
        grads = torch.autograd.grad(
            model.criterion(logits, batch), params, create_graph=create_graph
        )
        params = [p - lr * g for p, g in zip(params, grads)]
    logits = functional_call(
        model, dict(zip(names, params)), (query.input_ids, query.attention_mask)
    )
    grads = torch.autograd.grad(model.criterion(logits, query), weights, allow_unused=True)
    return {n: g for n, g in zip(names, grads) if g is not None}


def outer_gradient(strategy, support, query):
    with strategy._double_backward():
        strategy.outer_gradient(strategy.inner_loop(support), [query])
    return {n: p.grad for n, p in strategy.model.named_parameters() if p.grad is not None}


def test_first_and_second_order_outer_gradients_differ_and_match_autograd(task):
    batches = stream_batches(task, n=3)
    support, query = batches[:2], batches[2]
    grads = {}
    for first_order in (True, False):
        strategy = build(task, first_order=first_order)
        strategy.model.eval()  # no dropout: the same function in every pass
        grads[first_order] = outer_gradient(strategy, support, query)
        with attention_implementation(strategy.model.encoder, "eager"):
            expected = reference_meta_gradient(
                strategy.model, support, query, SMALL["inner_lr"], create_graph=not first_order
            )
        assert grads[first_order].keys() == expected.keys()
        for n, g in expected.items():
            torch.testing.assert_close(grads[first_order][n], g, rtol=1e-4, atol=1e-6)
    first = torch.cat([g.reshape(-1) for g in grads[True].values()])
    second = torch.cat([g.reshape(-1) for g in grads[False].values()])
    assert torch.isfinite(second).all() and first.norm() > 0
    assert (second - first).norm() > 1e-3 * first.norm()


@pytest.mark.parametrize("first_order", [True, False])
def test_replay_episodes_query_memory_and_write_after_the_episode(task, first_order):
    strategy = build(task, first_order=first_order)
    assert strategy.buffer.replay_every_episodes == 1 and strategy.replay.schedule.size == 4
    queries = []
    outer = strategy.outer_gradient
    strategy.outer_gradient = lambda adapted, query, scale=1.0: (
        queries.append(query) or outer(adapted, query, scale)
    )
    before = snapshot(strategy.model)
    data = stream_batches(task, n=4)
    for i, batch in enumerate(data):
        strategy.observe(batch)
        assert len(strategy.replay.memory) == 4 * (i + 1 if i % 2 else i)  # after each episode
    # episode 1: memory empty, its last stream batch is the query; episode 2 replays memory
    assert strategy.replay.schedule.replays == 1
    assert rows(queries[0][0]) == rows(data[1])
    replayed = set().union(*(rows(chunk) for chunk in queries[1]))
    assert len(replayed) == 4 and replayed <= rows(data[0]) | rows(data[1])
    assert not same_weights(strategy.model, before)
    assert all(torch.isfinite(p).all() for p in strategy.model.parameters())


def test_meta_test_draws_with_replacement_and_changes_nothing(task):
    strategy = build(task)
    for batch in stream_batches(task, n=2):  # one episode: 8 examples in memory
        strategy.observe(batch)
    assert len(strategy.replay.memory) == 8
    weights = snapshot(strategy.model)
    grads = {n: p.grad.clone() for n, p in strategy.model.named_parameters()}
    optimizer = copy.deepcopy(strategy.trainer.optimizer.state_dict())
    memory_state = copy.deepcopy(strategy.replay.memory.rng.bit_generator.state)
    drawn = []
    read = strategy.replay.writer.batch
    strategy.replay.writer.batch = lambda slots: drawn.append(slots) or read(slots)
    test = task(list(toy_stream().tasks[0].test))
    plain = strategy.trainer.predict(test)
    strategy.model.train()
    scores = strategy.predict_set([test])[0]
    assert strategy.model.training  # the mode is restored
    # m = 2 batches of b = 4, every draw uniform over the 8 stored examples
    assert len(drawn) == 2 and all(len(s) == 4 for s in drawn)
    assert strategy.counts.meta_tests == 1
    assert not torch.allclose(scores, plain)  # the adapted weights predicted
    assert same_weights(strategy.model, weights)
    assert all(torch.equal(p.grad, grads[n]) for n, p in strategy.model.named_parameters())
    after = strategy.trainer.optimizer.state_dict()
    assert after["param_groups"] == optimizer["param_groups"]
    for key, state in optimizer["state"].items():
        for name, value in state.items():
            assert torch.equal(after["state"][key][name], value)
    assert strategy.replay.memory.rng.bit_generator.state == memory_state


def test_meta_test_draws_more_than_memory_holds_with_replacement(task):
    strategy = build(task, support_batches=3)
    for batch in stream_batches(task, n=4):  # m = 3, R_F = 1: one episode, 3 support + replay
        strategy.observe(batch)
    assert len(strategy.replay.memory) == 12
    strategy.meta = strategy.meta._replace(support_batches=8)  # m = 8 memory batches: 32 draws
    drawn = []
    read = strategy.replay.writer.batch
    strategy.replay.writer.batch = lambda slots: drawn.append(slots) or read(slots)
    strategy.predict(task(list(toy_stream().tasks[0].test)))
    slots = [int(s) for row in drawn for s in row]
    assert len(slots) == 32 and len(set(slots)) < 32 and set(slots) <= set(range(12))


def train(strategy, batches, evaluate_at=None, test=None):
    torch.manual_seed(0)  # the same dropout masks in every run
    for i, batch in enumerate(batches):
        if i == evaluate_at:
            strategy.predict_set([test])
        strategy.observe(batch)
    return snapshot(strategy.model)


def test_evaluation_has_no_effect_on_training(task):
    data = stream_batches(task, n=8)
    test = task(list(toy_stream().tasks[0].test))
    plain = train(build(task), data)
    evaluated = build(task)
    after = train(evaluated, data, evaluate_at=5, test=test)  # mid-episode, memory non-empty
    assert evaluated.counts.meta_tests == 1
    assert all(torch.equal(after[n], plain[n]) for n in plain)


@pytest.mark.parametrize("first_order", [True, False])
def test_state_round_trip_resumes_identically(task, first_order):
    data = stream_batches(task, n=9)
    test = task(list(toy_stream().tasks[1].test))
    first = build(task, first_order=first_order)
    train(first, data[:5])  # two episodes and a pending batch
    second = build(task, seed=1, first_order=first_order)
    second.load_state_dict(copy.deepcopy(first.state_dict()))
    assert len(second.buffer.pending) == 1
    expected, resumed = train(first, data[5:]), train(second, data[5:])
    assert all(torch.equal(resumed[n], expected[n]) for n in expected)
    assert second.report() == first.report()
    torch.testing.assert_close(second.predict_set([test])[0], first.predict_set([test])[0])
