"""SEQ*: warm-up then a frozen encoder, frozen rows of old classes, a cosine head, all logits."""

import torch

from lifelong import registry
from lifelong.heads import CosineHead
from lifelong.learner import run_stream
from lifelong.strategy import StrategyContext
from lifelong.streams.core import batches
from lifelong.training import seed_everything
from tests.conftest import tiny_classifier, toy_stream


def build(task, **options):
    seed_everything(0)
    context = StrategyContext(tiny_classifier(kind=task), task, lr=1e-3, batch_size=4, seed=0)
    return registry.build("seq-star", context, options)


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_the_encoder_trains_during_the_warm_up_then_never(task):
    stream = toy_stream(n_train=16, n_test=4)  # 4 mini-batches a task; warm-up: ceil(1.5) = 2
    strategy = build(task)
    strategy.on_stream_start(stream)
    strategy.on_task_start(0)
    assert isinstance(strategy.model.head, CosineHead)
    chunks = list(batches(stream.tasks[0].train, 4, shuffle=True, seed=0))
    before = snapshot(strategy.model.encoder)
    for chunk in chunks[:2]:
        strategy.observe(task(chunk))
    warmed = snapshot(strategy.model.encoder)
    assert any(not torch.equal(before[k], warmed[k]) for k in before)  # trained in the warm-up
    for chunk in chunks[2:]:
        strategy.observe(task(chunk))
    assert all(torch.equal(warmed[k], v) for k, v in snapshot(strategy.model.encoder).items())


def test_old_classes_rows_are_frozen_and_future_ones_pushed_down(task):
    stream = toy_stream(n_train=16, n_test=4)  # task 0: labels 0, 1; task 1: labels 2, 3
    strategy = build(task)
    strategy.on_stream_start(stream)
    weight = strategy.model.head.weight
    start = weight.detach().clone()
    strategy.on_task_start(0)
    for chunk in batches(stream.tasks[0].train, 4, shuffle=True, seed=0):
        strategy.observe(task(chunk))
    after_first = weight.detach().clone()
    assert not torch.equal(after_first[2:], start[2:])  # P: unseen classes' rows trained too
    strategy.on_task_start(1)
    for chunk in batches(stream.tasks[1].train, 4, shuffle=True, seed=1):
        strategy.observe(task(chunk))
    assert torch.equal(weight[:2], after_first[:2])  # FixC: task 0's rows exactly as they were
    assert not torch.equal(weight[2:], after_first[2:])


def test_without_freezing_old_classes_their_rows_move(task):
    stream = toy_stream(n_train=16, n_test=4)
    strategy = build(task, freeze_old_classes=False, classifier="linear")
    strategy.on_stream_start(stream)
    strategy.on_task_start(0)
    for chunk in batches(stream.tasks[0].train, 4, shuffle=True, seed=0):
        strategy.observe(task(chunk))
    first = strategy.model.head.linear.weight.detach().clone()
    strategy.on_task_start(1)
    for chunk in batches(stream.tasks[1].train, 4, shuffle=True, seed=1):
        strategy.observe(task(chunk))
    assert not torch.equal(strategy.model.head.linear.weight[:2], first[:2])


def test_predictions_are_among_the_classes_seen_so_far(task):
    stream = toy_stream(n_train=16, n_test=4)
    strategy = build(task)
    result = run_stream(stream, strategy, task, batch_size=4, eval_batch_size=4, progress=False)
    assert result.accuracy[0, 1] == 0.0  # after task 0, task 1's classes cannot be predicted
    test = task(stream.tasks[1].test)
    strategy.seen = [{0, 1}]
    assert set(strategy.predict(test).argmax(-1).tolist()) <= {0, 1}
