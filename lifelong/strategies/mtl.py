"""MTL: the multi-task upper bound — joint i.i.d. training on every task from the start.

As in Holla et al.'s ``models/cls_baseline.py`` (``multi_task``: a ``ConcatDataset`` of every
task's training set, ``shuffle=True``, ``n_epochs`` = 1), the model trains on one shuffled pass
over the union of all tasks' training data, so its very first mini-batches already mix every
task. The strategy breaks the stream's rules on purpose: at the stream's start
(``on_stream_start``) it takes every task's training examples, and for each stream batch of n
examples it takes, instead of that batch, the next n examples of the joint shuffle (``epochs``
times over). The learner's rows therefore show the joint model after as many examples as the
stream has delivered; the last row is the usual MTL upper bound, a model trained on exactly one
joint pass (per epoch) over all the data.

The earlier cumulative curriculum (at each task end, joint epochs on everything seen so far) is
`strategies.mtl_cumulative` (``mtl-cumulative``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.mechanisms.replay import ClipOptions
from lifelong.memory.records import ExampleRecords
from lifelong.options import PositiveInt, Range, option_group
from lifelong.state import Counters, ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.streams.core import TaskStream


@option_group
class MTLOptions(ClipOptions):
    """Joint-training settings (Holla's ``cls_baseline.py``: one epoch, no clipping)."""

    epochs: PositiveInt = 1  # joint passes over all tasks' data (--n_epochs 1)
    max_grad_norm: Annotated[float, Range(min=0)] = 0.0  # cls_baseline.py never clips


class MTL(StrategyHooks):
    """Trains on a joint shuffle of every task's training data, from the first batch on.

    Args:
        context: Model, task kind, optimiser settings and the seed of the joint shuffle.
        options: Epochs and the gradient clip.

    """

    name: ClassVar[str] = "mtl"
    description: ClassVar[str] = "multi-task upper bound: joint i.i.d. training on all tasks"
    # every row has seen every task: BWT, FWT and forgetting mean nothing here (the papers
    # report MTL's accuracy alone: de Masson d'Autume et al., 2019, Table 1; Holla et al., 2020)
    joint_training: ClassVar[bool] = True
    Options = MTLOptions

    def __init__(self, context: StrategyContext, options: MTLOptions | None = None) -> None:
        self.options = options or MTLOptions()
        self.kind, self.seed = context.kind, context.seed
        self.trainer = context.build_trainer(self.options.max_grad_norm)
        self.counts = Counters(taken=0)  # examples of the joint shuffle trained on so far
        self.pool: ExampleRecords | None = None
        self.order = np.zeros(0, dtype=np.int64)
        self.resumable = ResumableParts(trainer=self.trainer, counts=self.counts)

    def on_stream_start(self, stream: TaskStream) -> None:
        """Encode every task's training examples and fix the joint shuffle (seeded).

        Called again on resume: the pool and the order are rebuilt identically, and training
        goes on from the number of examples already taken (part of the state).
        """
        examples = [example for task in stream for example in task.train]
        self.pool = self.kind.encode(examples).only(self.kind.stored_fields)
        rng = np.random.default_rng(self.seed)
        n = len(examples)
        self.order = np.concatenate([rng.permutation(n) for _ in range(self.options.epochs)])

    def observe(self, batch: Batch) -> dict[str, float]:
        """Train on the next examples of the joint shuffle, as many as the batch holds."""
        if self.pool is None:
            raise RuntimeError("mtl needs on_stream_start(stream) before observe (the learner's)")
        n = batch.num_examples
        stats: dict[str, float] = {}
        for _ in range(self.options.epochs):
            start = self.counts.taken
            slots = self.order[start : start + n]
            if not len(slots):
                break
            self.counts.taken += len(slots)
            stats["loss"] = self.trainer.step(self.kind.rows(self.pool.select(slots)))
        return stats

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)

    def report(self) -> dict[str, float]:
        """Examples of the joint shuffle trained on."""
        return {"joint_examples": self.counts.taken}
