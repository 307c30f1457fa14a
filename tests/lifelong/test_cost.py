"""What a run costs (`lifelong.cost`): counts against hand counts, FLOPs by the stated rule."""

import math

import pytest
import torch
from torch import nn
from torch.func import grad, vmap

from lifelong import cost
from lifelong.learner import length_sorted, run_stream
from lifelong.memory import EpisodicMemory
from lifelong.strategies.mbpa_plus_plus import MbPAPlusPlus, MbPAPlusPlusOptions
from lifelong.strategies.oml_er import OMLER, OMLEROptions
from lifelong.strategies.replay import Replay, ReplayStrategyOptions
from lifelong.strategies.seq import Seq
from lifelong.streams.core import batches
from tests.conftest import records, toy_stream

BATCH, EVAL_BATCH = 4, 64


def padded_tokens(kind, chunks) -> int:
    """Token positions of the batches ``kind`` makes of ``chunks`` (padded, as computed)."""
    return sum(kind(list(chunk)).input_ids.numel() for chunk in chunks)


def hand_train(stream, kind, seed: int = 0) -> tuple[int, int]:
    """Rows and padded tokens of one pass over every task, shuffled as the learner does."""
    rows = tokens = 0
    for i, task in enumerate(stream.tasks):
        chunks = list(batches(task.train, BATCH, shuffle=True, seed=seed + i))
        rows += len(task.train)
        tokens += padded_tokens(kind, chunks)
    return rows, tokens


def hand_evaluation(stream, kind) -> tuple[int, int]:
    """Rows and padded tokens of one evaluation of every test set (length-sorted batches)."""
    rows = tokens = 0
    for task in stream.tasks:
        rows += len(task.test)
        tokens += padded_tokens(kind, batches(length_sorted(task.test, kind), EVAL_BATCH))
    return rows, tokens


def run(strategy, stream, kind):
    return run_stream(
        stream, strategy, kind, batch_size=BATCH, eval_batch_size=EVAL_BATCH, progress=False
    )


def model_parameters(context) -> int:
    return cost.non_embedding_parameters(context.model)[0]


def test_rows_and_tokens_of_ids_hidden_states_pooled_vectors_and_vmapped_inputs():
    assert cost.rows_and_tokens(torch.zeros(3, 7, dtype=torch.long)) == (3, 21)
    assert cost.rows_and_tokens(torch.zeros(3, 7, 16)) == (3, 21)
    assert cost.rows_and_tokens(torch.zeros(5, 16)) == (5, 5)
    seen = []
    vmap(lambda x: seen.append(cost.rows_and_tokens(x)) or x.sum())(torch.zeros(4, 3, 16))
    assert seen == [(12, 12)]  # 4 examples of (3, 16) each: every row counted


def test_only_the_outermost_call_counts_and_a_forward_with_gradients_is_backpropagated():
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 8), nn.Linear(8, 2))
    meter = cost.CostMeter()
    ids = torch.zeros(2, 5, dtype=torch.long)
    with cost.metering(meter):
        with meter.phase("train"):
            model(ids).sum().backward()
        with meter.phase("evaluate"), torch.no_grad():
            model(ids)
        model(ids)  # outside every phase: not counted
    n = 8 * 8 + 8 + 8 * 2 + 2  # the linear layers: the embedding table is not counted
    assert cost.non_embedding_parameters(model) == (n, n)
    train, evaluate = meter.phases["train"], meter.phases["evaluate"]
    assert (train.forward_rows, train.forward_tokens, train.backward_rows) == (2, 10, 2)
    assert train.flops == 6 * n * 10
    assert (evaluate.forward_rows, evaluate.backward_rows, evaluate.flops) == (2, 0, 2 * n * 10)


def test_training_while_evaluating_is_adaptation_and_phases_time_apart():
    layer = nn.Linear(4, 4)
    meter = cost.CostMeter()
    with cost.metering(meter), meter.phase("evaluate"):
        layer(torch.zeros(3, 4)).sum().backward()  # a gradient at test time: adaptation
        with meter.phase("adapt"):
            pass
    assert meter.phases["adapt"].flops == 6 * 20 * 3 and meter.phases["evaluate"].flops == 0
    assert meter.phases["evaluate"].seconds >= 0 and meter.phases["adapt"].seconds >= 0
    with pytest.raises(ValueError, match="unknown cost phase 'test'"):
        with meter.phase("test"):
            pass


def test_a_vmapped_gradient_counts_every_example_forward_and_backward():
    head = nn.Linear(8, 3)
    params = dict(head.named_parameters())
    meter = cost.CostMeter()

    def loss(p, x):
        return torch.func.functional_call(head, p, (x,)).sum()

    with cost.metering(meter), meter.phase("train"):
        vmap(lambda x: grad(loss)(params, x), in_dims=0)(torch.zeros(5, 2, 8))
    train = meter.phases["train"]
    assert train.flops == 6 * (8 * 3 + 3) * 10  # 5 examples of 2 rows, forward and backward


def test_the_meter_resumes_from_its_dict():
    meter = cost.CostMeter({"train": {"forward_rows": 7, "flops": 3.0, "seconds": 1.5}})
    assert meter.phases["train"].forward_rows == 7
    assert cost.CostMeter(meter.to_dict()).to_dict() == meter.to_dict()
    summary = meter.summary()
    assert summary["total_flops"] == 3.0 and "Kaplan" in summary["rule"]


def test_seq_counts_equal_hand_counts(context, task):
    stream = toy_stream()
    result = run(Seq(context), stream, task)
    train_rows, train_tokens = hand_train(stream, task)
    eval_rows, eval_tokens = hand_evaluation(stream, task)
    evaluations = len(stream) + 1  # the untrained one, then one after each task
    n = model_parameters(context)
    train, evaluate, adapt = (result.cost[p] for p in cost.PHASES)
    assert (train["forward_rows"], train["backward_rows"]) == (train_rows, train_rows)
    assert (train["forward_tokens"], train["backward_tokens"]) == (train_tokens, train_tokens)
    assert math.isclose(train["flops"], 6 * n * train_tokens, rel_tol=1e-3)
    assert evaluate["forward_rows"] == evaluations * eval_rows
    assert evaluate["forward_tokens"] == evaluations * eval_tokens
    assert evaluate["backward_rows"] == 0
    assert math.isclose(evaluate["flops"], 2 * n * evaluations * eval_tokens, rel_tol=1e-3)
    assert adapt["forward_rows"] == adapt["backward_rows"] == adapt["flops"] == 0


def test_replay_counts_the_stream_and_every_replayed_example(context, task):
    stream = toy_stream()
    options = ReplayStrategyOptions(replay_every=8, replay_ratio=0.5)  # 4 examples per replay
    strategy = Replay(context, options)
    result = run(strategy, stream, task)
    train_rows, _ = hand_train(stream, task)
    replays = strategy.report()["replays"]
    assert replays == 4  # after 8, 16, 24 and 32 of the 32 examples
    train = result.cost["train"]
    assert train["forward_rows"] == train["backward_rows"] == train_rows + 4 * replays
    n = model_parameters(context)
    assert math.isclose(train["flops"], 6 * n * train["forward_tokens"], rel_tol=1e-3)


def test_mbpa_plus_plus_counts_keys_and_local_adaptation_by_hand(context, task):
    """K >= memory: every stored example is a neighbour, so the cache holds all of them."""
    stream = toy_stream()
    k, steps = 64, 2
    options = MbPAPlusPlusOptions(
        replay_every=8, replay_ratio=0.5, adapt_scope="head", k=k, steps=steps
    )
    strategy = MbPAPlusPlus(context, options)
    result = run(strategy, stream, task)
    train_rows, _ = hand_train(stream, task)
    replays = strategy.report()["replays"]
    train, evaluate, adapt = (result.cost[p] for p in cost.PHASES)
    # stream steps and replays train; every stream example is keyed once (forward only)
    assert train["backward_rows"] == train_rows + 4 * replays
    assert train["forward_rows"] == 2 * train_rows + 4 * replays
    tests = sum(len(t.test) for t in stream.tasks)
    memory = [sum(len(t.train) for t in stream.tasks[: i + 1]) for i in range(len(stream))]
    assert evaluate["forward_rows"] == tests  # the untrained evaluation: no memory yet
    # each test input keyed once (the key network is frozen: later evaluations reuse its keys);
    # per evaluation, each test input carried to the head and each memory carried once
    assert adapt["forward_rows"] == tests + sum(tests + m for m in memory)
    # L steps on min(K, memory) neighbours each, then the adapted head predicts the input
    assert adapt["head_backward_rows"] == sum(tests * min(k, m) * steps for m in memory)
    assert adapt["head_forward_rows"] == adapt["head_backward_rows"] + len(memory) * tests
    assert adapt["backward_rows"] == 0  # the encoder is not adapted (head scope)


def test_oml_er_counts_support_query_and_meta_test_rows_by_hand(context, task):
    stream = toy_stream()
    m = 2
    options = OMLEROptions(support_batches=m, replay_every=8, replay_ratio=0.5)
    strategy = OMLER(context, options)
    result = run(strategy, stream, task)
    report = strategy.report()
    episodes, replayed = int(report["episodes"]), int(report["replay_episodes"])
    b = BATCH
    train, adapt = result.cost["train"], result.cost["adapt"]
    # every stream batch is support or a query; a replay episode queries 4 memories instead
    stream_queries = (episodes - replayed) * b
    support = sum(len(t.train) for t in stream.tasks) - stream_queries
    queries = stream_queries + replayed * 4
    assert train["head_backward_rows"] == train["head_forward_rows"] == support
    assert train["backward_rows"] == queries
    assert train["forward_rows"] == support + queries
    meta_tests = int(report["meta_tests"])  # m memory batches of b each
    assert adapt["forward_rows"] == adapt["head_backward_rows"] == meta_tests * m * b


def test_held_bytes_counts_memory_examples_and_keys_once():
    memory = EpisodicMemory(key_dim=4)
    keys = torch.zeros(3, 4).numpy()
    memory.write(records([[1, 2, 3], [4], [5, 6]], [0, 1, 0]), keys)
    tokens = 6 * 4  # int32 token ids
    labels = 3 * 4
    tables = 2 * (2 * 3 * 8)  # each field's start and length per slot (int64)
    assert memory.held_bytes() == 3 * 4 * 4 + tokens + labels + tables

    class Strategy:
        pass

    strategy = Strategy()
    strategy.parts = {"a": memory, "b": [memory]}  # one memory reached twice
    Strategy.__module__ = "lifelong.tests"
    assert cost.held_bytes(strategy) == memory.held_bytes()
    assert cost.held_bytes(nn.Linear(3, 3)) == 0  # a model is not memory


def test_a_module_frozen_mid_run_backpropagates_only_what_still_trains():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    meter = cost.CostMeter()
    x = torch.zeros(3, 4)
    with cost.metering(meter), meter.phase("train"):
        model(x).sum().backward()
        for p in model[0].parameters():  # a warm-up ends: the first layer is frozen
            p.requires_grad_(False)
        model(x).sum().backward()
    n, head = 4 * 4 + 4 + 4 * 2 + 2, 4 * 2 + 2
    assert meter.phases["train"].flops == 6 * n * 3 + (2 * n + 4 * head) * 3
