"""ER (Chaudhry et al., 2019): each step on the stream mini-batch joined with a memory one."""

import numpy as np
import torch

from lifelong.memory import ExampleRecords
from lifelong.strategies.er import ER, EROptions
from tests.conftest import toy_stream


def test_records_concat_keeps_the_order_and_refuses_other_fields():
    a = ExampleRecords.build(tokens=[[1, 2], [3]], label=[[0], [1]])
    b = ExampleRecords.build(tokens=[[4]], label=[[2]])
    joined = ExampleRecords.concat(a, b)
    assert [t.tolist() for t in joined["tokens"]] == [[1, 2], [3], [4]]
    assert [y.tolist() for y in joined["label"]] == [[0], [1], [2]]
    try:
        ExampleRecords.concat(a, a.only(["tokens"]))
    except ValueError as err:
        assert "different fields" in str(err)
    else:
        raise AssertionError("joined records of different fields")


def test_each_step_is_on_the_stream_batch_then_a_memory_batch_of_its_size(context, task):
    """Algorithm 1: step t trains on B_t and |B_t| examples drawn from M, then offers B_t."""
    strategy = ER(context, EROptions(memory_size=6))
    seen = []
    step = strategy.trainer.step

    def spy(batch):
        seen.append(batch)
        return step(batch)

    strategy.trainer.step = spy
    train = toy_stream(n_train=16).tasks[0].train
    batches = [task(list(train[i : i + 4])) for i in range(0, 16, 4)]
    for batch in batches:
        assert np.isfinite(strategy.observe(batch)["loss"])
    assert [b.num_examples for b in seen] == [4, 8, 8, 8]  # memory empty at the first step
    for batch, trained in zip(batches[1:], seen[1:]):
        stream_part = trained.examples.select(range(4))["label"]
        assert [y.tolist() for y in stream_part] == [y.tolist() for y in batch.examples["label"]]
    # the reservoir: full at 6 of the 16 examples offered, each kept with probability 6/16
    assert len(strategy.writer.memory) == 6 and strategy.writer.offered == 16
    assert strategy.report()["replayed_examples"] == 12
    assert strategy.report()["memory_examples"] == 6


def test_the_memory_batch_size_is_an_option_and_resume_restores_everything(context, task):
    strategy = ER(context, EROptions(memory_size=100, memory_batch_size=2))
    train = toy_stream(n_train=16).tasks[0].train
    for i in range(0, 8, 4):
        strategy.observe(task(list(train[i : i + 4])))
    state = strategy.state_dict()
    again = ER(context, EROptions(memory_size=100, memory_batch_size=2))
    again.load_state_dict(state)
    assert again.counts.replayed == strategy.counts.replayed == 2
    assert len(again.writer.memory) == 8
    batch = task(list(train[8:12]))
    assert strategy.joined(batch).num_examples == 6
    torch.testing.assert_close(
        again.predict(batch), strategy.predict(batch)
    )  # same weights after the restore
