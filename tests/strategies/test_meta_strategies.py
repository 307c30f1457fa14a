import dataclasses

import numpy as np
import pytest
import torch

from lifelong import registry
from lifelong.encoders.base import attention_implementation
from lifelong.episodes import EpisodeBuffer
from lifelong.learner import evaluate, evaluate_all
from lifelong.model import Batch
from lifelong.replay import ReplaySchedule
from lifelong.strategy import StrategyContext
from strategies.anml_er import ANMLER
from strategies.meta_mbpa import MetaMbPAOptions
from strategies.oml_er import OMLER, OMLEROptions
from tests.conftest import tiny_classifier, toy_stream

META = ["meta-mbpa", "oml-er", "anml-er"]
SMALL = {
    # beta 1e-3: the toy inputs differ by one word, so their keys are close under beta = 10
    "meta-mbpa": {
        "k": 3,
        "write_rate": 1.0,
        "beta": 1e-3,
        "steps": 2,
        "replay_every": 8,
        "replay_ratio": 0.25,
    },
    "oml-er": {"support_batches": 2, "replay_every": 8, "replay_ratio": 0.5, "inner_lr": 0.1},
    "anml-er": {"support_batches": 2, "replay_every": 8, "replay_ratio": 0.5, "inner_lr": 0.1},
}


def stream_batches(kind, n=6, task=0, size=4):
    train = toy_stream(n_train=n * size).tasks[task].train
    return [kind(list(train[i : i + size])) for i in range(0, len(train), size)]


def replay_frequency(every, batch_size, support_batches):
    return ReplaySchedule(every, 0.01).episodes_between_replays(batch_size, support_batches)


def build(name, task, **overrides):
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    return registry.build(name, context, {**SMALL[name], **overrides}), context


def snapshot(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def encoder_grads(model):
    return [p.grad for n, p in model.named_parameters() if n.startswith("encoder.")]


def test_meta_strategies_are_registered_with_descriptions():
    described = registry.describe()
    assert all(described.get(name) for name in META)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("meta-mbpa", {}),
        ("meta-mbpa", {"first_order": True}),
        ("meta-mbpa", {"meta_scope": "head"}),
        ("oml-er", {}),
        ("anml-er", {}),
    ],
)
def test_outer_updates_reach_the_encoder(name, overrides, task):
    strategy, context = build(name, task, **overrides)
    before = snapshot(context.model.encoder)
    for batch in stream_batches(task):
        strategy.observe(batch)
    grads = encoder_grads(context.model)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    after = snapshot(context.model.encoder)
    assert any(not torch.equal(before[n], after[n]) for n in before)


def filled_meta_mbpa(task, **overrides):
    strategy, context = build("meta-mbpa", task, **overrides)
    for batch in stream_batches(task, n=2):
        strategy.writer.write(batch)
    assert len(strategy.memory) >= 3
    return strategy, context


def meta_gradient(strategy, example, first_order):
    strategy.options = dataclasses.replace(strategy.options, first_order=first_order)
    params = [p for n, p in strategy.model.named_parameters() if n.startswith("encoder.")]
    neighbours = strategy.neighbours(example)
    with attention_implementation(strategy.model.encoder, "eager"):
        if strategy.meta_scope.name == "head":
            loss = strategy.head_meta_loss(example, neighbours)
        else:
            loss = strategy.meta_loss(example, neighbours[0])
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])


@pytest.mark.parametrize("scope", ["all", "top1", "head"])
def test_second_and_first_order_meta_gradients_differ_and_are_finite(task, scope):
    strategy, context = filled_meta_mbpa(task, meta_lr=0.5, meta_scope=scope)
    context.model.eval()
    example = stream_batches(task, task=1)[0].examples_at([0])
    second = meta_gradient(strategy, example, first_order=False)
    first = meta_gradient(strategy, example, first_order=True)
    assert torch.isfinite(second).all() and torch.isfinite(first).all()
    assert first.norm() > 0
    assert (second - first).norm() > 1e-4 * first.norm()


def test_meta_mbpa_inner_step_never_modifies_the_model(task):
    strategy, context = filled_meta_mbpa(task, meta_lr=0.5)
    before = snapshot(context.model)
    example = stream_batches(task, task=1)[0].examples_at([0])
    strategy.meta_loss(example, strategy.neighbours(example)[0])
    assert all(torch.equal(p, before[n]) for n, p in context.model.named_parameters())


@pytest.mark.parametrize("name", ["oml-er", "anml-er"])
def test_episode_inner_loops_never_modify_the_module(name, task):
    strategy, context = build(name, task)
    before = snapshot(strategy.net)
    adapted = strategy.inner_loop(stream_batches(task, n=2))
    assert all(torch.equal(p, before[n]) for n, p in strategy.net.named_parameters())
    changed = [k for k, v in adapted.items() if not torch.equal(v, before[k])]
    assert changed and all(k.endswith(("weight", "bias")) for k in changed)
    if name == "anml-er":  # the whole prediction network adapts, the gate does not
        assert any(".encoder." in k for k in changed)
        assert not any(k.startswith("neuromodulator.") for k in adapted)


def test_replay_frequency_and_size_follow_the_formulas():
    # R_F = ceil((R_I / b + 1) / (m + 1)); text classification: ceil(601 / 6) = 101, 96 examples
    assert replay_frequency(9_600, 16, 5) == 101
    assert ReplaySchedule(9_600, 0.01).size == 96
    assert replay_frequency(1_600, 4, 5) == 67  # FewRel: ceil(401 / 6)
    assert replay_frequency(100, 16, 5) == 2  # ceil(7.25 / 6)
    with pytest.raises(ValueError):
        replay_frequency(100, 0, 5)


def tagged(i):
    return Batch(
        torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.long), torch.tensor([i])
    )


def test_episode_layout_support_then_query_and_every_rf_th_a_replay_query():
    buffer = EpisodeBuffer(support_batches=5, replay_every_episodes=3)
    episodes = [e for e in (buffer.add(tagged(i)) for i in range(41)) if e is not None]
    ids = [
        ([int(b.labels) for b in e.support], e.query and int(e.query.labels), e.replay)
        for e in episodes
    ]
    assert ids[0] == ([0, 1, 2, 3, 4], 5, False)
    assert ids[1] == ([6, 7, 8, 9, 10], 11, False)
    assert ids[2] == ([12, 13, 14, 15, 16], None, True)  # episode 3 = R_F: query from memory
    assert ids[3] == ([17, 18, 19, 20, 21], 22, False)
    assert [e.replay for e in episodes] == [(i + 1) % 3 == 0 for i in range(len(episodes))]
    leftover = buffer.flush()
    assert leftover is not None and buffer.pending == []
    assert [int(b.labels) for b in leftover.stream_batches] == list(
        range(sum(len(e.stream_batches) for e in episodes), 41)
    )


def test_oml_er_replays_memory_on_schedule_and_writes_every_example(task):
    options = OMLEROptions(support_batches=2, replay_every=8, replay_ratio=0.5)
    context = StrategyContext(tiny_classifier(), task, lr=1e-3, batch_size=4)
    strategy = OMLER(context, options)
    assert strategy.buffer.replay_every_episodes == replay_frequency(8, 4, 2) == 1
    assert strategy.replay.schedule.size == 4
    data = stream_batches(task, n=7)
    for batch in data:
        strategy.observe(batch)
    # every episode is a replay episode (R_F = 1): 2 stream batches each, the first has no memory
    assert strategy.buffer.episodes == 3 and strategy.replay.schedule.replays == 2
    strategy.on_eval_start()  # the seventh batch is learnt before evaluation
    assert len(strategy.replay.memory) == 7 * 4


@pytest.mark.parametrize("name", META)
def test_adaptation_runs_once_per_test_set(name, task):
    strategy, _ = build(name, task)
    for batch in stream_batches(task):
        strategy.observe(batch)
    stream = toy_stream(n_test=12)
    accuracy = evaluate(strategy, stream.tasks[0].test, task, batch_size=4, progress=False)
    assert 0.0 <= accuracy <= 100.0
    counter = "coarse_adaptations" if name == "meta-mbpa" else "meta_tests"
    assert getattr(strategy.counts, counter) == 1  # three batches, one adaptation
    evaluate_all(strategy, stream, task, batch_size=4, progress=False)
    assert getattr(strategy.counts, counter) == 3
    assert strategy.report()[counter] == 3


@pytest.mark.parametrize("name", META)
def test_predict_never_changes_the_weights(name, task):
    strategy, _ = build(name, task)
    for batch in stream_batches(task):
        strategy.observe(batch)
    strategy.on_eval_start() if hasattr(strategy, "on_eval_start") else None
    module = getattr(strategy, "net", strategy.model)
    before = snapshot(module)
    scores = strategy.predict(task(list(toy_stream().tasks[0].test)))
    assert scores.shape == (8, 4) and torch.isfinite(scores).all()
    assert all(torch.equal(p, before[n]) for n, p in module.named_parameters())


def test_coarse_pool_weights_memories_by_how_many_test_inputs_retrieved_them(task):
    strategy, _ = filled_meta_mbpa(task, k=2)
    test = [task(list(toy_stream().tasks[0].test))]
    slots, weights = strategy.pool(test)
    keys = strategy.writer.keys(test[0].examples)
    retrieved = strategy.memory.nearest(keys, 2)[1].reshape(-1)
    assert sorted(slots.tolist()) == sorted(set(retrieved.tolist()))
    expected = np.array([(retrieved == s).sum() for s in slots]) / len(retrieved)
    np.testing.assert_allclose(weights, expected)


def test_meta_mbpa_replays_its_memories_without_their_own_slot(task):
    strategy, _ = filled_meta_mbpa(task)
    slots = np.arange(len(strategy.memory))
    rows = strategy.neighbours(strategy.writer.batch(slots), own_slots=slots)
    assert all(
        own not in row and len(row) == min(3, len(slots) - 1) for own, row in zip(slots, rows)
    )


def test_meta_mbpa_state_round_trip(task):
    strategy, _ = filled_meta_mbpa(task)
    strategy.observe(stream_batches(task)[0])
    again, _ = build("meta-mbpa", task)
    again.load_state_dict(strategy.state_dict())
    assert len(again.memory) == len(strategy.memory)
    assert again.replay.schedule.seen == strategy.replay.schedule.seen
    assert again.memory.policy == strategy.memory.policy


def test_anml_er_gate_is_in_unit_interval_and_its_encoder_frozen(task):
    strategy, _ = build("anml-er", task)
    assert isinstance(strategy, ANMLER)
    batch = stream_batches(task)[0]
    gate = strategy.net.neuromodulator(batch.input_ids, batch.attention_mask)
    assert gate.shape == (4, strategy.model.encoder.hidden_size)
    assert ((gate >= 0) & (gate <= 1)).all()
    frozen = strategy.net.neuromodulator.encoder
    assert not any(p.requires_grad for p in frozen.parameters())
    optimised = {
        id(p) for group in strategy.trainer.optimizer.param_groups for p in group["params"]
    }
    assert not any(id(p) in optimised for p in frozen.parameters())
    assert all(id(p) in optimised for p in strategy.net.neuromodulator.gate.parameters())


def test_meta_mbpa_options_are_validated():
    with pytest.raises(ValueError):
        MetaMbPAOptions(k=0)


@pytest.mark.parametrize("name", ["oml-er", "anml-er"])
def test_outer_lr_overrides_the_run_lr_and_is_validated(name, task):
    default, _ = build(name, task)
    assert [g["lr"] for g in default.trainer.optimizer.param_groups] == [1e-3]
    custom, _ = build(name, task, outer_lr=2e-4)
    assert [g["lr"] for g in custom.trainer.optimizer.param_groups] == [2e-4]
    with pytest.raises(ValueError, match="outer_lr"):
        OMLEROptions(outer_lr=-1.0)
