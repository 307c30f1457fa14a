import numpy as np
import pytest
import torch

from lifelong import registry
from lifelong.batch import Batch
from lifelong.strategies.replay import Replay, ReplayStrategyOptions
from lifelong.strategies.seq import Seq
from lifelong.strategy import StrategyContext
from lifelong.tasks import TaskSettings, build_task
from tests.conftest import tiny_classifier, toy_stream


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

    def spy(slots=None):
        out = original(slots)
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


def test_memory_keys_come_from_frozen_pretrained_encoder(context, task):
    from lifelong import registry

    strategy = registry.build("mbpa++", context, {"replay_every": 100})  # keys: it searches
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


def replay_update_gradient(task, mode, chunk=64, batch_size=4):
    """The gradient the replay update of REPLAY applies, with its loss and the slots it drew."""
    context = StrategyContext(tiny_classifier(kind=task), task, lr=1e-3, batch_size=batch_size)
    options = ReplayStrategyOptions(
        replay_every=8, replay_ratio=1.0, replay_mode=mode, replay_grad_norm=0, replay_chunk=chunk
    )
    strategy = Replay(context, options)
    for start in range(0, 8, 4):
        strategy.replay.write(task(list(toy_stream(n_train=8).tasks[0].train[start : start + 4])))
    seen = {}
    step = strategy.trainer.optimizer.step
    strategy.trainer.optimizer.step = lambda: (
        seen.update(
            grads=[p.grad.clone() for p in context.model.parameters() if p.grad is not None]
        )
        or step()
    )
    strategy.replay.update(strategy.trainer)
    return seen["grads"]


def test_sum_batches_replays_the_sum_of_its_mini_batch_losses(task):
    # 8 memories, b = 4: Holla's loss is the sum of 2 mini-batch means = 2 x the mean over 8
    mean = replay_update_gradient(task, "mean")
    summed = replay_update_gradient(task, "sum_batches")
    assert all(torch.allclose(s, 2 * m, atol=1e-6) for s, m in zip(summed, mean))


def test_replay_defaults_are_holla_s_sum_and_clips_on_the_replay_update_only(task, tokenizer):
    options = ReplayStrategyOptions()
    assert options.replay_mode == "sum_batches" and options.max_grad_norm == 0.0
    replay = Replay(StrategyContext(tiny_classifier(kind=task), task), options)
    assert replay.trainer.max_grad_norm == 0.0 and replay.replay.grad_norm == 25.0
    fewrel = build_task("relation", tokenizer, ["a", "b"], TaskSettings(max_length=16))
    model = tiny_classifier(kind=fewrel)
    assert Replay(StrategyContext(model, fewrel), options).replay.grad_norm == 10.0


def test_replay_update_is_clipped_at_its_own_norm(task):
    context = StrategyContext(tiny_classifier(kind=task), task, lr=1e-3, batch_size=4)
    options = ReplayStrategyOptions(replay_every=4, replay_ratio=1.0, replay_grad_norm=1e-3)
    strategy = Replay(context, options)
    strategy.replay.write(task(list(toy_stream().tasks[0].train[:4])))
    norms = []
    step = strategy.trainer.optimizer.step
    params = [p for p in context.model.parameters() if p.requires_grad]
    strategy.trainer.optimizer.step = lambda: (
        norms.append(
            float(torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None])))
        )
        or step()
    )
    strategy.observe(task(list(toy_stream().tasks[0].train[4:8])))
    stream_norm, replay_norm = norms
    assert replay_norm == pytest.approx(1e-3, rel=1e-3) and stream_norm > 1e-2


def test_the_optimiser_decays_no_weight_by_default(context):
    from lifelong.training import make_optimizer

    assert make_optimizer(context.model, 1e-3).param_groups[0]["weight_decay"] == 0.0


def test_replay_never_draws_the_batch_it_just_trained_on(context, task):
    # Holla's cls_replay.py writes a batch to memory after that iteration's replay
    strategy = Replay(context, ReplayStrategyOptions(replay_every=8, replay_ratio=1.0))
    train = toy_stream(n_train=16).tasks[0].train
    drawn = []
    sample = strategy.replay.sample
    strategy.replay.sample = lambda: drawn.append(slots := sample()) or slots
    for start in range(0, 16, 4):
        strategy.observe(task(list(train[start : start + 4])))
    # replays after examples 8 and 16: memory held 4 and 12 examples, never the current batch
    first, second = (sorted(s.tolist()) for s in drawn)
    assert first == list(range(4)) and len(second) == 8 and max(second) < 12
    assert len(strategy.replay.memory) == 16
