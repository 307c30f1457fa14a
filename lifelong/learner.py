"""The learner loop: one pass over a task stream, evaluation of every task after every task."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from lifelong.model import Collator
from lifelong.strategy import Strategy
from streams.core import Example, TaskStream, batches

log = logging.getLogger(__name__)


@dataclass
class StreamResult:
    """Accuracies of one run over a stream (percent).

    Attributes:
        task_names: The tasks in training order.
        accuracy: R[i, j], the accuracy on task j after training on tasks 0..i, shape (T, T).
        before: b[j], the accuracy on task j of the untrained model, shape (T,).

    """

    task_names: tuple[str, ...]
    accuracy: np.ndarray
    before: np.ndarray


def evaluate(
    strategy: Strategy,
    examples: Sequence[Example],
    collator: Collator,
    *,
    batch_size: int = 64,
    desc: str = "eval",
    progress: bool = True,
) -> float:
    """Accuracy (percent) of the strategy's predictions on ``examples`` (one test set).

    A strategy that adapts once per test set (Meta-MbPA's coarse adaptation, OML-ER's meta-test)
    defines ``predict_set(batches) -> list of label tensors`` and gets the whole set at once;
    any other is asked ``predict(batch)`` batch by batch.
    """
    bar = tqdm(total=len(examples), desc=desc, unit="ex", leave=False, disable=not progress)
    test = [collator(chunk) for chunk in batches(examples, batch_size)]
    predict_set = getattr(strategy, "predict_set", None)
    if callable(predict_set):
        predictions = predict_set(test)
        bar.update(len(examples))
    else:
        predictions = []
        for batch in test:
            predictions.append(strategy.predict(batch))
            bar.update(len(batch))
    bar.close()
    correct = sum(int((p == b.labels).sum()) for p, b in zip(predictions, test, strict=True))
    return 100.0 * correct / len(examples)


def evaluate_all(
    strategy: Strategy,
    stream: TaskStream,
    collator: Collator,
    *,
    batch_size: int = 64,
    progress: bool = True,
) -> np.ndarray:
    """Accuracy on every task's test set, shape (T,), calling the optional eval hooks."""
    _hook(strategy, "on_eval_start")
    row = np.array(
        [
            evaluate(
                strategy,
                task.test,
                collator,
                batch_size=batch_size,
                desc=f"eval {task.name}",
                progress=progress,
            )
            for task in stream
        ]
    )
    _hook(strategy, "on_eval_end")
    return row


def run_stream(
    stream: TaskStream,
    strategy: Strategy,
    collator: Collator,
    *,
    batch_size: int = 16,
    eval_batch_size: int = 64,
    seed: int = 0,
    progress: bool = True,
) -> StreamResult:
    """Train ``strategy`` on one pass over the stream and score every task after every task.

    Training examples are shuffled within each task (seeded) and given to ``strategy.observe``
    in mini-batches that carry no task identifier. The optional hooks ``on_task_start(i)`` and
    ``on_task_end(i)`` tell strategies that need them where the boundaries are.

    Args:
        stream: The tasks in training order.
        strategy: The continual-learning strategy.
        collator: Tokenises examples.
        batch_size: Training mini-batch size.
        eval_batch_size: Evaluation batch size.
        seed: Seed of the within-task shuffles.
        progress: Show tqdm progress bars.

    Returns:
        The accuracy matrix R and the untrained accuracies b.

    """
    T = len(stream)
    before = evaluate_all(strategy, stream, collator, batch_size=eval_batch_size, progress=progress)
    log.info("before training: %s", _fmt(stream.task_names, before))
    R = np.zeros((T, T))
    for i, task in enumerate(stream):
        _hook(strategy, "on_task_start", i)
        bar = tqdm(
            total=len(task.train),
            desc=f"train {task.name} ({i + 1}/{T})",
            unit="ex",
            disable=not progress,
        )
        for step, chunk in enumerate(batches(task.train, batch_size, shuffle=True, seed=seed + i)):
            stats = strategy.observe(collator(chunk))
            bar.update(len(chunk))
            if stats:
                bar.set_postfix({k: f"{v:.3f}" for k, v in stats.items()}, refresh=False)
                if step % 50 == 0:
                    log.debug("task %s step %d: %s", task.name, step, stats)
        bar.close()
        _hook(strategy, "on_task_end", i)
        R[i] = evaluate_all(
            strategy, stream, collator, batch_size=eval_batch_size, progress=progress
        )
        log.info("after %s: %s", task.name, _fmt(stream.task_names, R[i]))
    return StreamResult(stream.task_names, R, before)


def _hook(strategy: Strategy, name: str, *args: int) -> None:
    hook = getattr(strategy, name, None)
    if callable(hook):
        hook(*args)


def _fmt(names: Sequence[str], row: np.ndarray) -> str:
    return ", ".join(f"{n} {a:.1f}" for n, a in zip(names, row))
