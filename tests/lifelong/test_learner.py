import numpy as np

from lifelong.learner import run_stream
from lifelong.strategy import StrategyContext
from lifelong.training import seed_everything
from strategies.seq import Seq
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
    metrics = run_metrics(result, Recorder, 1.0, stream=stream)
    assert metrics["pooled_accuracy"] == 45.0 and metrics["average_accuracy"] == 50.0
    assert metrics["tasks"][0] == {"name": "task0", "labels": 2, "train": 8, "test": 4}


def test_the_learner_records_the_test_set_sizes(task):
    result, _ = run_once(task)
    assert result.test_sizes.tolist() == [8, 8]
    assert result.pooled() == result.accuracy[-1].mean()
