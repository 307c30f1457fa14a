import numpy as np
import pytest

from lifelong.learner import run_stream
from lifelong.strategies.seq import Seq
from lifelong.strategy import StrategyContext
from lifelong.training import seed_everything
from tests.conftest import tiny_classifier, toy_stream


class Recorder(Seq):
    """Seq that records what the loop hands it."""

    def __init__(self, context):
        super().__init__(context)
        self.events = []

    def observe(self, batch):
        self.events.append(("observe", len(batch)))
        return super().observe(batch)

    def on_task_start(self, i):
        self.events.append(("start", i))

    def on_task_end(self, i):
        self.events.append(("end", i))


def run_once(task, seed=0, n_train=16, batch_size=4):
    seed_everything(seed)
    stream = toy_stream(n_train=n_train)
    ctx = StrategyContext(tiny_classifier(seed=seed), task, lr=3e-3)
    strategy = Recorder(ctx)
    result = run_stream(stream, strategy, task, batch_size=batch_size, seed=seed, progress=False)
    return result, strategy


def test_loop_shape_hooks_and_one_pass(task):
    result, strategy = run_once(task)
    assert result.accuracy.shape == (2, 2) and result.before.shape == (2,)
    assert result.task_names == ("task0", "task1")
    starts = [e for e in strategy.events if e[0] != "observe"]
    assert starts == [("start", 0), ("end", 0), ("start", 1), ("end", 1)]
    # one pass: 16 examples per task in batches of 4
    assert sum(n for kind, n in strategy.events if kind == "observe") == 32


def test_loop_is_deterministic_on_cpu(task):
    a, _ = run_once(task, seed=3)
    b, _ = run_once(task, seed=3)
    np.testing.assert_array_equal(a.accuracy, b.accuracy)
    np.testing.assert_array_equal(a.before, b.before)


def test_learning_happens_on_the_toy_stream(task):
    result, _ = run_once(task, n_train=64, batch_size=8)
    # each task is learnt when it is trained (a word gives the label away)
    assert result.accuracy[0, 0] >= 90 and result.accuracy[1, 1] >= 90
    assert result.before.max() <= 60


def test_pooled_metric_weights_each_task_by_its_test_set(task):
    from lifelong.experiment.runs import run_metrics
    from lifelong.learner import StreamResult

    R = np.array([[90.0, 0.0, 0.0], [80.0, 70.0, 10.0], [60.0, 50.0, 40.0]])
    result = StreamResult(("a", "b", "c"), R, np.zeros(3), test_sizes=np.array([10, 30, 60]))
    assert result.pooled() == (60 * 10 + 50 * 30 + 40 * 60) / 100  # 45.0, not the mean 50.0
    assert result.pooled(0) == 9.0
    stream = toy_stream(n_train=8, n_test=4)
    metrics = run_metrics(result, Seq(StrategyContext(tiny_classifier(), task)), 1.0, stream=stream)
    assert metrics["pooled_accuracy"] == 45.0 and metrics["average_accuracy"] == 50.0
    assert metrics["tasks"][0] == {"name": "task0", "labels": 2, "train": 8, "test": 4}


def test_a_joint_learner_has_no_transfer_or_forgetting(task):
    from lifelong.experiment.runs import format_report, run_metrics
    from lifelong.learner import StreamResult
    from lifelong.strategies.mtl import MTL

    R = np.array([[50.0, 40.0], [70.0, 60.0]])
    result = StreamResult(("a", "b"), R, np.zeros(2), test_sizes=np.array([10, 10]))
    context = StrategyContext(tiny_classifier(), task)
    sequential = run_metrics(result, Seq(context), 1.0)
    assert sequential["bwt"] == 20.0 and "joint_training" not in sequential
    joint = run_metrics(result, MTL(context), 1.0)
    assert joint["average_accuracy"] == 65.0 and joint["joint_training"] is True
    assert [joint[k] for k in ("bwt", "fwt", "forgetting", "forgetting_any")] == [None] * 4
    assert "joint training: every row has seen every task" in format_report(result, joint)


def test_the_learner_records_the_test_set_sizes(task):
    result, _ = run_once(task)
    assert result.test_sizes.tolist() == [8, 8]
    assert result.pooled() == result.accuracy[-1].mean()


def test_prefetched_items_come_in_order_and_errors_reach_the_consumer():
    import threading

    import pytest

    from lifelong.learner import prefetched

    for depth in (0, 1, 3):
        assert list(prefetched(iter(range(20)), depth)) == list(range(20))

    def failing():
        yield 1
        raise RuntimeError("bad row 2")

    with pytest.raises(RuntimeError, match="bad row 2"):
        list(prefetched(failing(), 2))
    early = prefetched(iter(range(1000)), 2)
    assert next(early) == 0
    early.close()  # the consumer stops: so does the producer
    assert not any(t.name == "lifelong-prefetch" for t in threading.enumerate())


def test_a_consumer_that_stops_while_the_queue_is_full_does_not_wait_for_the_producer():
    """The producer is blocked on its last message (the queue full) when the consumer stops."""
    import threading
    import time

    from lifelong.learner import prefetched

    made = prefetched(iter([0, 1]), 1)
    assert next(made) == 0
    time.sleep(0.3)  # the producer has queued 1 and waits to queue its end
    closer = threading.Thread(target=made.close)
    closer.start()
    closer.join(timeout=5)
    assert not closer.is_alive()


def test_prefetching_training_batches_changes_no_result(task):
    from lifelong.runtime import Runtime

    results = []
    for prefetch in (0, 2):
        seed_everything(0)
        ctx = StrategyContext(tiny_classifier(seed=0), task, lr=3e-3)
        results.append(
            run_stream(
                toy_stream(n_train=16),
                Seq(ctx),
                task,
                batch_size=4,
                progress=False,
                prefetch=prefetch,
                runtime=Runtime.resolve("cpu", "fp32"),
            )  # fmt: skip
        )
    np.testing.assert_array_equal(results[0].accuracy, results[1].accuracy)


def test_evaluation_batches_are_length_sorted_and_score_as_in_stream_order(task, stream, tokenizer):
    from lifelong.learner import evaluate_metrics, length_sorted
    from lifelong.tasks.cache import TokenCache, kind_identity
    from lifelong.tasks.prepared import prepare
    from lifelong.tasks.settings import TaskSettings

    cache = TokenCache(task, kind_identity(task, tokenizer, TaskSettings()), None)
    cache.prepare_stream(stream)
    cached = prepare(task, cache=cache)
    test = stream.tasks[0].test
    ordered = length_sorted(test, cached)
    lengths = [len(task.encode([e])["tokens"][0]) for e in ordered]
    assert sorted(lengths) == lengths and sorted(map(id, ordered)) == sorted(map(id, test))
    assert length_sorted(test, task) is test  # a kind without lengths: the order as given
    strategy = Seq(StrategyContext(tiny_classifier(seed=0), task, lr=3e-3))
    by_length = evaluate_metrics(strategy, test, cached, batch_size=3, progress=False)
    as_given = evaluate_metrics(strategy, test, task, batch_size=3, progress=False)
    assert by_length.keys() == as_given.keys()
    for name in by_length:
        assert abs(by_length[name] - as_given[name]) < 1e-9


def test_the_eval_batch_size_and_prefetch_follow_the_device():
    import torch

    from lifelong.experiment.cli import build_parser, config_from_args
    from lifelong.runtime import CPU, Runtime

    gpu = Runtime(torch.device("cuda", 0), "bf16")  # nothing runs on it: a description
    assert CPU.eval_batch_size("auto") == 64 and gpu.eval_batch_size("auto") == 512
    assert gpu.eval_batch_size(48) == 48
    assert CPU.prefetch == 0 and gpu.prefetch == 2
    for flag, value in (("auto", "auto"), ("16", 16)):
        args = build_parser().parse_args(["run", "--eval-batch-size", flag])
        assert config_from_args(args).training.eval_batch_size == value


def test_an_object_without_the_hooks_is_refused_by_the_learner(task):
    from lifelong.learner import evaluate_all

    class PredictOnly:
        def predict(self, batch):
            return batch.input_ids.new_zeros((len(batch), 2)).float()

    with pytest.raises(TypeError, match="PredictOnly lacks the learner's hooks on_stream_start"):
        evaluate_all(PredictOnly(), toy_stream(n_train=4, n_test=2), task)
