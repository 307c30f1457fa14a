"""MTL-cumulative: a curriculum — joint, multi-epoch training on all data seen so far.

Not the papers' MTL (that is `strategies.mtl`: joint i.i.d. training on every task from the
start). This variant deliberately breaks the one-pass rule: ``observe`` only stores the stream's
examples, and at the end of each task the model trains for ``epochs`` shuffled epochs on
*everything seen so far*. Row i of the accuracy matrix is therefore a model trained jointly on
tasks 0..i, and the last row is a jointly trained model. It uses the loop's ``on_task_end``
hook.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.mechanisms.replay import ClipOptions
from lifelong.memory import EpisodicMemory
from lifelong.options import PositiveInt, option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks


@option_group
class MTLCumulativeOptions(ClipOptions):
    """Joint-training settings."""

    epochs: PositiveInt = 2  # passes over all data seen so far, at the end of every task


class MTLCumulative(StrategyHooks):
    """Stores the stream and trains jointly, shuffled, for several epochs at each task end.

    Args:
        context: Model, task kind, optimiser settings and batch size.
        options: Epochs per joint training and the gradient clip.

    """

    name: ClassVar[str] = "mtl-cumulative"
    description: ClassVar[str] = (
        "curriculum: joint shuffled epochs on all seen data at each task end"
    )
    Options = MTLCumulativeOptions

    def __init__(
        self, context: StrategyContext, options: MTLCumulativeOptions | None = None
    ) -> None:
        self.options = options or MTLCumulativeOptions()
        self.kind, self.batch_size = context.kind, context.batch_size
        self.trainer = context.build_trainer(self.options.max_grad_norm)
        self.rng = np.random.default_rng(context.seed)
        self.seen = EpisodicMemory(0, seed=context.seed)  # every example; never searched
        self.resumable = ResumableParts(trainer=self.trainer, seen=self.seen, rng=self.rng)

    def observe(self, batch: Batch) -> dict[str, float]:
        """Store the batch's examples; training happens in `on_task_end`."""
        examples = batch.examples.only(self.kind.stored_fields)
        self.seen.write(examples)
        return {}

    def on_task_end(self, task_index: int) -> None:
        """Train ``epochs`` shuffled epochs on every example stored so far."""
        for _ in range(self.options.epochs):
            order = self.rng.permutation(len(self.seen))
            for s in range(0, len(order), self.batch_size):
                batch = self.kind.rows(self.seen.get(order[s : s + self.batch_size]).examples)
                self.trainer.step(batch)

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)
