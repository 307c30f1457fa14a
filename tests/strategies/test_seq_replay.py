import numpy as np
import torch

from lifelong import registry
from lifelong.model import Batch
from strategies.replay import Replay, ReplayStrategyOptions
from strategies.seq import Seq
from tests.conftest import toy_stream


def first_batch(task, stream, n=4):
    return task(list(stream.tasks[0].train[:n]))


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def test_registry_finds_builtins_by_entry_point():
    assert {"seq", "replay"} <= set(registry.names())
    assert registry.get("seq") is Seq and registry.get("replay") is Replay
    assert "replay" in registry.describe()["replay"]


def test_seq_observe_updates_and_predict_does_not(context, task):
    strategy = Seq(context)
    batch = first_batch(task, toy_stream())
    before = params(context.model)
    strategy.predict(batch)
    assert all(torch.equal(a, b) for a, b in zip(before, context.model.parameters()))
    stats = strategy.observe(batch)
    assert np.isfinite(stats["loss"])
    assert any(not torch.equal(a, b) for a, b in zip(before, context.model.parameters()))


def test_replay_writes_everything_and_replays_at_the_rate(context, task):
    strategy = Replay(context, ReplayStrategyOptions(replay_every=8, replay_ratio=0.5))
    stream = toy_stream(n_train=16)
    calls = []
    original = strategy.replay.replay_batches

    def spy():
        out = original()
        calls.append(sum(len(b) for b in out))
        return out

    strategy.replay.replay_batches = spy
    for start in range(0, 16, 4):
        strategy.observe(task(list(stream.tasks[0].train[start : start + 4])))
    assert len(strategy.replay.memory) == 16
    # 16 examples, one replay every 8 -> 2 replays of floor(0.5 * 8) = 4 examples
    assert calls == [4, 4] and strategy.replay.schedule.replays == 2


def test_replay_memory_holds_token_ids_and_labels(context, task):
    strategy = Replay(context, ReplayStrategyOptions(replay_every=100))
    batch = first_batch(task, toy_stream())
    strategy.observe(batch)
    items = strategy.replay.memory.get(np.arange(4))
    assert items.examples.names == ("tokens", "label")
    rebuilt = task.rows(items.examples)
    assert torch.equal(rebuilt.input_ids, batch.input_ids)
    assert torch.equal(rebuilt.labels, batch.labels)


def test_replay_keys_come_from_frozen_pretrained_encoder(context, task):
    strategy = Replay(context, ReplayStrategyOptions(replay_every=100))
    batch = first_batch(task, toy_stream())
    keys_before = strategy.replay.writer.keys(batch.examples)
    for _ in range(3):
        strategy.observe(batch)
    np.testing.assert_allclose(strategy.replay.writer.keys(batch.examples), keys_before, atol=1e-6)


def test_replay_state_round_trip(context, task):
    strategy = Replay(context, ReplayStrategyOptions(replay_every=4, replay_ratio=0.5))
    batch = first_batch(task, toy_stream())
    strategy.observe(batch)
    state = strategy.state_dict()
    from lifelong.strategy import StrategyContext
    from tests.conftest import tiny_classifier

    fresh = Replay(
        StrategyContext(tiny_classifier(seed=1), task, lr=1e-3),
        ReplayStrategyOptions(replay_every=4, replay_ratio=0.5),
    )
    fresh.load_state_dict(state)
    assert len(fresh.replay.memory) == 4 and fresh.replay.schedule.seen == 4
    assert torch.equal(fresh.predict(batch), strategy.predict(batch))


def test_replay_chunks_make_one_update_equal_to_one_big_batch(task):
    from lifelong.training import train_step
    from tests.conftest import tiny_classifier

    stream = toy_stream()
    big = task(list(stream.tasks[0].train[:8]))
    halves = [
        Batch(big.input_ids[:4], big.attention_mask[:4], big.labels[:4]),
        Batch(big.input_ids[4:], big.attention_mask[4:], big.labels[4:]),
    ]
    a, b = tiny_classifier(), tiny_classifier()
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
    train_step(a, opt_a, big, max_grad_norm=None)
    train_step(b, opt_b, halves, max_grad_norm=None)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5)
