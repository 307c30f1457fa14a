"""The `Strategy` protocol and what a strategy is built from.

A strategy is a class with a ``name``, a one-line ``description``, an ``Options`` dataclass
(`lifelong.options`) and a constructor ``(context, options)``. The learner calls ``observe``
for every training mini-batch (no task identifier) and ``predict`` (row scores, e.g. logits)
for every evaluation batch. Hooks are optional: a strategy that needs task boundaries (e.g.
online EWC) defines ``on_task_start`` / ``on_task_end``; an upper bound that must see every
task from the start (MTL) defines ``on_stream_start(stream)``; one that must see the evaluation
phases defines ``on_eval_start`` / ``on_eval_end`` (and ``on_eval_sets(test_sets)``, which gets
every task's test examples before any is predicted: Meta-MbPA's coarse adaptation once for the
whole evaluation); one that adapts once per test set defines
``predict_set(batches)`` returning one score tensor per batch (the learner then hands it each
test set whole); one with end-of-run numbers (e.g. the examples its memory holds and its write
rate) defines ``report()``, whose dict lands in the run's ``metrics.json`` under ``"strategy"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from lifelong.runtime import CPU, Runtime

if TYPE_CHECKING:
    import torch

    from lifelong.model import Batch, Classifier
    from lifelong.tasks import TaskKind


@dataclass
class StrategyContext:
    """Everything a strategy is built from.

    Attributes:
        model: The trainable model (pre-trained encoder + fresh head), not yet trained.
        task: The task kind: makes rows from examples (``task(examples)``) and from stored
            records (``task.rows``), keys memory, scores predictions.
        lr: Learning rate of the main optimiser.
        batch_size: Training mini-batch size of the stream, in examples.
        seed: Run seed (strategies derive their own generators from it).
        runtime: The run's device and precision. The model is already there and the task
            kind's batches land there; a strategy that builds a module of its own (ANML-ER's
            neuromodulator) moves it to ``runtime.device``; tensors it makes go next to the
            tensors they meet.
        memory_index: The nearest-neighbour search of keyed episodic memories: the run
            config's ``memory_index`` (``auto``, ``torch``, ``Flat`` or a FAISS factory
            string; see `lifelong.memory.EpisodicMemory`), passed on by
            `lifelong.replay.EpisodicWriter`.

    """

    model: Classifier
    task: TaskKind
    lr: float = 3e-5
    batch_size: int = 16
    seed: int = 0
    runtime: Runtime = CPU
    memory_index: str = "auto"


@runtime_checkable
class Strategy(Protocol):
    """What the learner needs from a continual-learning strategy."""

    name: ClassVar[str]
    description: ClassVar[str]

    def observe(self, batch: Batch) -> dict[str, float]:
        """Learn from one training mini-batch; return scalars worth logging (e.g. loss)."""
        ...

    def predict(self, batch: Batch) -> torch.Tensor:
        """Scores for every row of an evaluation batch, leaving the model unchanged.

        Logits (n, num_labels) for classification, (n, 1) pair scores for relation
        extraction, (n, t, 2) start/end scores for QA; the task kind turns them into
        predictions and scores.
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights, optimiser, memory, counters."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        ...
