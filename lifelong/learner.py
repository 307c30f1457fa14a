"""The learner loop: one pass over a task stream, evaluation of every task after every task."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from lifelong import cost
from lifelong.metrics import pooled_accuracy
from lifelong.runtime import CPU, Runtime
from lifelong.strategy import Strategy, require_hooks
from lifelong.streams.core import Example, TaskStream, batches
from lifelong.tasks import TaskKind

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

T = TypeVar("T")


class DivergenceError(RuntimeError):
    """Training diverged: a loss or a prediction score is not finite (nan or inf).

    Raised by the learner at the first non-finite training statistic (naming the task and the
    mini-batch) or evaluation score (naming the evaluation and the test set), and before a
    checkpoint would save non-finite weights, so the last checkpoint on disk is a good one.
    """


def check_finite_stats(stats: Mapping[str, Any], task: str, step: int) -> None:
    """Raise `DivergenceError` if a numeric statistic of mini-batch ``step`` is not finite.

    Args:
        stats: What the strategy's ``observe`` returned (``loss``, ``replay_loss``, ...).
        task: The task being trained (its name and position), for the message.
        step: The mini-batch's index within the task (0-based).

    """
    bad = {
        k: v
        for k, v in stats.items()
        if isinstance(v, int | float | np.number) and not np.isfinite(float(v))
    }
    if bad:
        raise DivergenceError(
            f"training diverged: non-finite {', '.join(f'{k} = {v}' for k, v in bad.items())} "
            f"at task {task}, mini-batch {step + 1}; lower the learning rate (lr, or the "
            f"strategy's own rates) or clip the gradients (max_grad_norm)"
        )


@dataclass
class StreamPosition:
    """Where a run is in its stream.

    Attributes:
        task: Index of the task being trained; ``len(stream)`` once every task is done.
        step: Mini-batches of that task already observed (0 = the task has not started).
        before: The untrained scores b, shape (T,); None until they are measured.
        rows: The finished rows of the matrix R, one (T,) array per trained task.
        metric: Name of R's metric (``"accuracy"``, or ``"f1"`` for QA).
        secondary: Rows of the other metrics (QA: exact match), the untrained row first.
        seconds: Wall-clock seconds the run had spent training and evaluating when this
            position was saved, over every process that worked on it (a resumed run's
            ``metrics.json`` ``seconds`` adds its own to it).
        cpu_seconds: The same in CPU seconds of the run's processes (all their threads,
            `time.process_time`); None when an earlier process did not count them (a
            checkpoint written before they were counted).
        updates: Updates the strategy took on each finished task: mini-batches whose
            ``observe`` returned statistics, plus the updates ``on_task_end`` reported; None
            where a checkpoint written before they were counted leaves it unknown.
        task_updates: The same so far on the task being trained.
        cost: What the run has computed so far, per phase (`lifelong.cost.CostMeter.to_dict`);
            None where a checkpoint written before costs were counted leaves it unknown.
        probing: Rows of the probing matrix (`lifelong.probing.LinearProbe`), the untrained
            one first; empty when the run does not probe.

    """

    task: int = 0
    step: int = 0
    before: np.ndarray | None = None
    rows: list[np.ndarray] = field(default_factory=list)
    metric: str = "accuracy"
    secondary: dict[str, list[np.ndarray]] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float | None = 0.0
    updates: list[int | None] = field(default_factory=list)
    task_updates: int | None = 0
    cost: dict[str, dict[str, float]] | None = field(default_factory=dict)
    probing: list[np.ndarray] = field(default_factory=list)

    def global_step(self, stream: TaskStream, batch_size: int) -> int:
        """Training mini-batches observed before this position, over the whole stream."""
        done = sum(-(-len(t.train) // batch_size) for t in stream.tasks[: self.task])
        return done + self.step

    @property
    def evaluations(self) -> int:
        """Evaluations done: the untrained one (if measured) and one per finished task."""
        return (self.before is not None) + len(self.rows)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (lists of floats), for checkpoint files."""
        return {
            "task": self.task,
            "step": self.step,
            "before": None if self.before is None else self.before.tolist(),
            "rows": [r.tolist() for r in self.rows],
            "metric": self.metric,
            "secondary": {k: [r.tolist() for r in v] for k, v in self.secondary.items()},
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "updates": list(self.updates),
            "task_updates": self.task_updates,
            "cost": self.cost,
            "probing": [r.tolist() for r in self.probing],
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> StreamPosition:
        """Inverse of `to_dict`."""
        before = values["before"]
        return cls(
            task=int(values["task"]),
            step=int(values["step"]),
            before=None if before is None else np.asarray(before, dtype=float),
            rows=[np.asarray(r, dtype=float) for r in values["rows"]],
            metric=str(values.get("metric", "accuracy")),
            secondary={
                k: [np.asarray(r, dtype=float) for r in v]
                for k, v in dict(values.get("secondary", {})).items()
            },
            seconds=float(values.get("seconds", 0.0)),
            cpu_seconds=None if (cpu := values.get("cpu_seconds")) is None else float(cpu),
            updates=list(values.get("updates", [None] * len(values["rows"]))),
            task_updates=values.get("task_updates", 0 if int(values["step"]) == 0 else None),
            probing=[np.asarray(r, dtype=float) for r in values.get("probing", [])],
            cost=values.get(
                "cost", {} if int(values["task"]) == 0 and values["before"] is None else None
            ),
        )


class Checkpointer(Protocol):
    """Saves a run's state (`lifelong.experiment.checkpoint.Checkpointer` is one)."""

    def due(self, steps_done: int) -> bool:
        """Whether a mid-task checkpoint is due after ``steps_done`` mini-batches of a task."""
        ...

    def save(self, strategy: Strategy, position: StreamPosition) -> None:
        """Write the checkpoint now."""
        ...


class StreamListener(Protocol):
    """Told what the learner does, as it does it (experiment trackers: `Trackers`)."""

    def on_step(self, task: int, step: int, global_step: int, stats: Mapping[str, float]) -> None:
        """Mini-batch ``step`` of task ``task`` was observed (``global_step``: over the stream)."""

    def on_evaluation(self, trained: int, rows: Mapping[str, np.ndarray]) -> None:
        """Every task was scored after ``trained`` tasks: one (T,) row per metric."""


@dataclass
class StreamResult:
    """Scores of one run over a stream (percent).

    Attributes:
        task_names: The tasks in training order.
        accuracy: R[i, j], the main metric (accuracy; F1 for QA) on task j after training on
            tasks 0..i, shape (T, T).
        before: b[j], the main metric on task j of the untrained model, shape (T,).
        metric: Name of the main metric: ``"accuracy"`` or ``"f1"``.
        secondary: Other metrics (QA: ``"exact_match"``), each (T + 1, T): the untrained row
            first, then one row per trained task.
        test_sizes: Test examples of each task, shape (T,) (for the pooled metric).
        updates: Updates the strategy took on each task (`StreamPosition.updates`; None where
            unknown), or None.
        cost: What the run computed, per phase (`lifelong.cost.CostMeter.summary`), or None
            (not counted: a run resumed from a checkpoint written before costs were counted).
        probing: The probing matrix P (T + 1, T), the untrained row first
            (`lifelong.probing`), or None when the run did not probe.

    """

    task_names: tuple[str, ...]
    accuracy: np.ndarray
    before: np.ndarray
    metric: str = "accuracy"
    secondary: dict[str, np.ndarray] = field(default_factory=dict)
    test_sizes: np.ndarray | None = None
    updates: tuple[int | None, ...] | None = None
    cost: dict[str, Any] | None = None
    probing: np.ndarray | None = None

    def pooled(self, row: int = -1) -> float | None:
        """The main metric over the union of every task's test set, after training row ``row``.

        Each task's score weighted by its test-set size (`lifelong.metrics.pooled_accuracy`):
        the one number Holla et al. (2020) report for FewRel. ``None`` without sizes or rows.
        """
        if not len(self.accuracy):
            return None
        return pooled_accuracy(self.accuracy, self.test_sizes, row)

    def to_frame(self, metric: str | None = None) -> pd.DataFrame:
        """The matrix as a table: the untrained row (``before``), then one row per task.

        Args:
            metric: ``None`` for the main metric (R); a secondary one by name
                (``"exact_match"``), whose rows already start with the untrained one.

        """
        import pandas as pd

        if metric is None or metric == self.metric:
            rows = np.vstack([self.before[None, :], self.accuracy])
        else:
            rows = self.secondary[metric]
        index = ["before"] + [f"after {n}" for n in self.task_names[: len(rows) - 1]]
        return pd.DataFrame(rows, index=index, columns=list(self.task_names))

    def __repr__(self) -> str:
        """One line: the tasks, the metric and its final average (not the matrices)."""
        final = f"{self.accuracy[-1].mean():.1f}" if len(self.accuracy) else "-"
        return (
            f"StreamResult({len(self.task_names)} tasks: {' -> '.join(self.task_names)}; "
            f"final average {self.metric} {final}; .to_frame() for the matrix)"
        )


def evaluate_metrics(
    strategy: Strategy,
    examples: Sequence[Example],
    kind: TaskKind,
    *,
    batch_size: int = 64,
    desc: str = "eval",
    progress: bool = True,
) -> dict[str, float]:
    """Scores (percent) of the strategy's predictions on ``examples`` (one test set).

    The task kind names the metrics, the main one first (the one in the matrix R): accuracy for
    classification and relation extraction (per sentence), F1 and exact match for QA (SQuAD 1.1,
    max over gold answers, mean over questions).

    A strategy that adapts once per test set (Meta-MbPA's coarse adaptation, OML-ER's meta-test)
    returns scores from ``predict_set(batches)`` for the whole set at once; any other (its
    ``predict_set`` returns ``None``) is asked ``predict(batch)`` batch by batch.

    Batches are length-aware when the kind knows its examples' lengths (a run's token-cached
    kind, `lifelong.tasks.prepared.PreparedKind.lengths`): examples are sorted by length before
    they are cut into batches, so each batch pads to little more than its own examples. The
    scores are summed over examples, and every prediction depends on its own example only
    (local adaptation is per example), so the order changes no metric.
    """
    require_hooks(strategy)  # a few getattr calls: cheap enough for every test set
    ordered = length_sorted(examples, kind)
    chunks, test, predictions = _predictions(strategy, ordered, kind, batch_size, desc, progress)
    totals = dict.fromkeys(kind.metrics, 0.0)
    for scores, batch, chunk in zip(predictions, test, chunks, strict=True):
        for name, value in kind.score(scores, batch, chunk).items():
            totals[name] += value
    return {name: 100.0 * value / len(examples) for name, value in totals.items()}


def _predictions(
    strategy: Strategy,
    examples: Sequence[Example],
    kind: TaskKind,
    batch_size: int,
    desc: str,
    progress: bool,
) -> tuple[list[list[Example]], list[Any], list[Any]]:
    """The strategy's scores on ``examples`` (already in evaluation order), batch by batch.

    Returns:
        The chunks of examples, their batches and the scores of each batch.

    Raises:
        DivergenceError: A score is not finite.

    """
    bar = tqdm(total=len(examples), desc=desc, unit="ex", leave=False, disable=not progress)
    chunks = list(batches(examples, batch_size))
    test = [kind(chunk) for chunk in chunks]
    predictions = strategy.predict_set(test)
    if predictions is not None:
        bar.update(len(examples))
    else:
        predictions = []
        for batch, chunk in zip(test, chunks):
            predictions.append(strategy.predict(batch))
            bar.update(len(chunk))
    bar.close()
    _check_finite_scores(predictions, desc)
    return chunks, test, predictions


def predict_labels(
    strategy: Strategy, examples: Sequence[Example], kind: TaskKind, *, batch_size: int = 64
) -> np.ndarray:
    """The label ids a classification strategy predicts for ``examples``, in their order.

    As an evaluation predicts them: the evaluation hooks around one set (`on_eval_sets`), the
    strategy's test-time behaviour included (MbPA++'s local adaptation, a meta-learner's
    meta-test), batches cut after sorting by length.

    Raises:
        ValueError: The kind's scores are not one row of label scores per example (QA).

    """
    require_hooks(strategy)
    sizes = kind.lengths(examples)
    order = np.arange(len(examples)) if sizes is None else np.argsort(sizes, kind="stable")
    ordered = [examples[i] for i in order]  # as `length_sorted` orders them
    strategy.on_eval_start()
    strategy.on_eval_sets([examples])
    _, _, predictions = _predictions(strategy, ordered, kind, batch_size, "predict", False)
    strategy.on_eval_end()
    if not all(isinstance(p, torch.Tensor) and p.dim() == 2 for p in predictions):
        raise ValueError("predict_labels needs one row of label scores per example")
    scores = torch.cat(predictions)  # (n, labels), in `ordered`'s order
    if scores.shape[0] != len(examples):
        raise ValueError("predict_labels needs one row of label scores per example")
    labels = np.empty(len(examples), dtype=np.int64)
    labels[order] = scores.argmax(dim=-1).cpu().numpy()
    return labels


def _check_finite_scores(predictions: Sequence[Any], desc: str) -> None:
    """Raise `DivergenceError` if any prediction score is nan or inf (one host sync per set)."""
    flags = [~torch.isfinite(s).all() for s in predictions if isinstance(s, torch.Tensor)]
    if flags and bool(torch.stack(flags).any()):
        raise DivergenceError(
            f"{desc}: the model's scores are not finite (nan or inf): training or local "
            "adaptation diverged; lower the learning rate (lr, adapt_lr, inner_lr)"
        )


def length_sorted(examples: Sequence[Example], kind: TaskKind) -> Sequence[Example]:
    """``examples`` shortest first (stable) when ``kind`` knows their lengths, else as given."""
    sizes = kind.lengths(examples)
    if sizes is None:
        return examples
    return [examples[i] for i in np.argsort(sizes, kind="stable")]


def prefetched(items: Iterable[T], depth: int) -> Iterator[T]:
    """``items`` made up to ``depth`` ahead by a background thread (``depth`` 0: inline).

    The training loop makes its next mini-batches (records, padding, the copy to the device)
    while the accelerator computes the current one. The items come in order; an error in the
    thread is raised here; closing the generator early stops the thread.
    """
    if depth <= 0:
        yield from items
        return
    slots: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(message: tuple[str, Any]) -> bool:
        """Queue a message unless the consumer stops first (then never block on a full queue)."""
        while not stop.is_set():
            try:
                slots.put(message, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer(("item", item)):
                    return
            offer(("done", None))
        except BaseException as err:  # handed to the consumer, raised there
            offer(("error", err))

    thread = threading.Thread(target=produce, name="lifelong-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            tag, value = slots.get()
            if tag == "done":
                return
            if tag == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def evaluate(strategy: Strategy, examples: Sequence[Example], kind: TaskKind, **kw: Any) -> float:
    """The main metric (accuracy, or F1 for QA; percent) on one test set.

    Keyword arguments are those of `evaluate_metrics`.
    """
    return evaluate_metrics(strategy, examples, kind, **kw)[kind.metrics[0]]


def evaluate_all_metrics(
    strategy: Strategy, stream: TaskStream, kind: TaskKind, **kw: Any
) -> dict[str, np.ndarray]:
    """Every metric on every task's test set, each shape (T,), calling the evaluation hooks.

    Keyword arguments (``batch_size``, ``progress``) are those of `evaluate_metrics`.
    """
    require_hooks(strategy)
    return _all_metrics(strategy, stream, kind, **kw)


def _all_metrics(
    strategy: Strategy, stream: TaskStream, kind: TaskKind, **kw: Any
) -> dict[str, np.ndarray]:
    """`evaluate_all_metrics` of a strategy whose hooks are already checked."""
    strategy.on_eval_start()
    strategy.on_eval_sets([task.test for task in stream])  # every test set, up front
    per_task = [
        evaluate_metrics(strategy, task.test, kind, desc=f"eval {task.name}", **kw)
        for task in stream
    ]
    strategy.on_eval_end()
    return {name: np.array([m[name] for m in per_task]) for name in per_task[0]}


def evaluate_all(strategy: Strategy, stream: TaskStream, kind: TaskKind, **kw: Any) -> np.ndarray:
    """The main metric on every task's test set, shape (T,) (see `evaluate_all_metrics`)."""
    return evaluate_all_metrics(strategy, stream, kind, **kw)[kind.metrics[0]]


def run_stream(
    stream: TaskStream,
    strategy: Strategy,
    kind: TaskKind,
    *,
    batch_size: int = 16,
    eval_batch_size: int = 64,
    seed: int = 0,
    progress: bool = True,
    checkpointer: Checkpointer | None = None,
    start: StreamPosition | None = None,
    runtime: Runtime = CPU,
    prefetch: int = 0,
    listener: StreamListener | None = None,
    probe: Callable[[int], np.ndarray] | None = None,
) -> StreamResult:
    """Train ``strategy`` on one pass over the stream and score every task after every task.

    Training examples are shuffled within each task (seeded) and given to ``strategy.observe``
    in mini-batches that carry no task identifier. The optional hooks ``on_task_start(i)`` and
    ``on_task_end(i)`` tell strategies that need them where the boundaries are (a strategy
    that trains at the task's end returns its per-update statistics from ``on_task_end``);
    ``on_stream_start(stream)`` hands the whole stream to a strategy that is not continual on
    purpose (MTL's joint training), before training starts or resumes.

    Args:
        stream: The tasks in training order.
        strategy: The continual-learning strategy.
        kind: The task kind: turns examples into batches and scores predictions.
        batch_size: Training mini-batch size, in examples.
        eval_batch_size: Evaluation batch size.
        seed: Seed of the within-task shuffles.
        progress: Show tqdm progress bars.
        checkpointer: Writes checkpoints after the untrained evaluation, at every task
            boundary (after the task's evaluation) and whenever ``checkpointer.due``.
        start: Resume from this position (a checkpoint's); the strategy and the random
            states must already be restored from the same checkpoint.
        runtime: The run's device and precision: training and evaluation (every strategy
            call and hook) run inside its autocast; the model and the task kind's batches
            must already be on its device (`lifelong.tasks.prepared.on_device`).
        prefetch: Training mini-batches made ahead in a background thread (`prefetched`;
            0: none). Runs on a GPU use 2 so that the device never waits for batches.
        listener: Told every mini-batch's statistics and every evaluation's scores
            (`lifelong.experiment.trackers.Trackers`).
        probe: Called after every evaluation with the tasks trained so far, returns a row of
            the probing matrix (`lifelong.probing.LinearProbe.row`); outside the cost meter.

    Returns:
        The accuracy matrix R and the untrained accuracies b.

    """
    require_hooks(strategy)
    position = start or StreamPosition()
    meter = cost.CostMeter(position.cost)
    with cost.metering(meter):
        _run_tasks(
            stream,
            strategy,
            kind,
            position,
            meter,
            batch_size=batch_size,
            eval_batch_size=eval_batch_size,
            seed=seed,
            progress=progress,
            checkpointer=checkpointer,
            runtime=runtime,
            prefetch=prefetch,
            listener=listener,
            probe=probe,
        )
    T = len(stream)
    R = np.vstack(position.rows) if position.rows else np.zeros((0, T))
    secondary = {name: np.vstack(rows) for name, rows in position.secondary.items()}
    sizes = np.array([len(task.test) for task in stream])
    updates = tuple(position.updates)
    spent = None if position.cost is None else meter.summary()
    probing = np.vstack(position.probing) if probe is not None and position.probing else None
    return StreamResult(
        stream.task_names,
        R,
        position.before,
        position.metric,
        secondary,
        sizes,
        updates,
        spent,
        probing,
    )


def _run_tasks(
    stream: TaskStream,
    strategy: Strategy,
    kind: TaskKind,
    position: StreamPosition,
    meter: cost.CostMeter,
    *,
    batch_size: int,
    eval_batch_size: int,
    seed: int,
    progress: bool,
    checkpointer: Checkpointer | None,
    runtime: Runtime,
    prefetch: int,
    listener: StreamListener | None,
    probe: Callable[[int], np.ndarray] | None = None,
) -> None:
    """`run_stream`'s loop: evaluate untrained, then train and evaluate each task in turn."""
    T = len(stream)
    with runtime.autocast():
        strategy.on_stream_start(stream)  # on a resume too: rebuild, not reset

    def evaluate_now(trained: int) -> np.ndarray:
        with runtime.autocast(), meter.phase("evaluate"):
            rows = _all_metrics(  # hooks checked once, above
                strategy, stream, kind, batch_size=eval_batch_size, progress=progress
            )
        if listener is not None:
            listener.on_evaluation(trained, rows)
        names = list(rows)
        position.metric = names[0]
        for name in names[1:]:
            position.secondary.setdefault(name, []).append(rows[name])
        return rows[names[0]]

    def probed(trained: int) -> None:
        if probe is None:
            return
        while len(position.probing) < trained:  # probing turned on when the run resumed
            position.probing.append(np.full(T, np.nan))
        with runtime.autocast():
            position.probing.append(probe(trained))

    metered = _MeteredCheckpointer(checkpointer, meter)  # every save carries the counts

    def save() -> None:
        metered.save(strategy, position)

    if position.before is None:
        position.before = evaluate_now(0)
        log.info("before training: %s", _fmt(stream.task_names, position.before))
        probed(0)
        save()
    for i in range(position.task, T):
        with runtime.autocast(), meter.phase("train"):
            _train_task(
                stream,
                i,
                strategy,
                kind,
                position,
                batch_size,
                seed,
                progress,
                metered,
                prefetch,
                listener,
            )
            trained = strategy.on_task_end(i)
        position.updates.append(_count(position.task_updates, trained))
        position.task_updates = 0
        _report_task_end_steps(trained, stream, i, batch_size, listener)
        row = evaluate_now(i + 1)
        log.info("after %s: %s", stream.tasks[i].name, _fmt(stream.task_names, row))
        position.rows.append(row)
        position.task, position.step = i + 1, 0
        probed(i + 1)
        save()


@dataclass
class _MeteredCheckpointer:
    """A checkpointer whose saves carry the cost counted so far (`StreamPosition.cost`)."""

    inner: Checkpointer | None
    meter: cost.CostMeter

    def due(self, steps_done: int) -> bool:
        return self.inner is not None and self.inner.due(steps_done)

    def save(self, strategy: Strategy, position: StreamPosition) -> None:
        if self.inner is None:
            return
        if position.cost is not None:  # None: an earlier process did not count (unknown)
            position.cost = self.meter.to_dict()
        self.inner.save(strategy, position)


def _count(observed: int | None, trained: Any) -> int | None:
    """A task's updates: those ``observe`` took and those ``on_task_end`` reported."""
    if observed is None:
        return None
    return observed + (len(trained) if isinstance(trained, list) else 0)


def _train_task(
    stream: TaskStream,
    i: int,
    strategy: Strategy,
    kind: TaskKind,
    position: StreamPosition,
    batch_size: int,
    seed: int,
    progress: bool,
    checkpointer: Checkpointer | None,
    prefetch: int = 0,
    listener: StreamListener | None = None,
) -> None:
    """Observe task ``i``'s mini-batches from ``position.step`` on (the skipped ones were seen)."""
    task, T, done = stream.tasks[i], len(stream), position.step
    offset = position.global_step(stream, batch_size) - done  # earlier tasks' mini-batches
    if done == 0:
        strategy.on_task_start(i)
    else:
        log.info("resuming %s after %d mini-batches", task.name, done)
    bar = tqdm(
        total=len(task.train),
        initial=min(done * batch_size, len(task.train)),
        desc=f"train {task.name} ({i + 1}/{T})",
        unit="ex",
        disable=not progress,
    )
    chunks = list(batches(task.train, batch_size, shuffle=True, seed=seed + i))
    with closing(prefetched((kind(chunk) for chunk in chunks[done:]), prefetch)) as made:
        for step, batch in enumerate(made, start=done):
            stats = strategy.observe(batch)
            bar.update(batch.num_examples)
            position.step = step + 1
            if listener is not None and stats:
                listener.on_step(i, step, offset + step, stats)  # a nan is recorded as nan
            if stats:
                check_finite_stats(stats, f"{i + 1}/{T} ({task.name})", step)
                if position.task_updates is not None:
                    position.task_updates += 1
            if stats:
                bar.set_postfix({k: f"{v:.3f}" for k, v in stats.items()}, refresh=False)
                if step % 50 == 0:
                    log.debug("task %s step %d: %s", task.name, step, stats)
            if checkpointer is not None and checkpointer.due(position.step):
                checkpointer.save(strategy, position)
    bar.close()


def _report_task_end_steps(
    trained: Any,
    stream: TaskStream,
    task: int,
    batch_size: int,
    listener: StreamListener | None,
) -> None:
    """Statistics of updates a strategy took at the task's end (a list, one dict per update).

    A strategy that trains on a whole task at once (`lifelong.integrations.avalanche`: the
    Avalanche templates train each experience in ``on_task_end``) returns its per-update
    statistics there; they reach the trackers at the task's mini-batch steps, as if observed,
    and a non-finite loss fails the run as in ``observe``.
    """
    if not isinstance(trained, list) or not trained:
        return
    offset = StreamPosition(task=task).global_step(stream, batch_size)
    where = f"{task + 1}/{len(stream)} ({stream.tasks[task].name})"
    for step, stats in enumerate(trained):
        if listener is not None:
            listener.on_step(task, step, offset + step, stats)
        check_finite_stats(stats, where, step)


def _fmt(names: Sequence[str], row: np.ndarray) -> str:
    return ", ".join(f"{n} {a:.1f}" for n, a in zip(names, row))
