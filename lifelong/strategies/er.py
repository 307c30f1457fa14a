"""ER: dense experience replay from a small reservoir memory (Chaudhry et al., 2019).

"On Tiny Episodic Memories in Continual Learning" (Chaudhry, Rohrbach, Elhoseiny, Ajanthan,
Dokania, Torr and Ranzato, 2019), §4 and Algorithm 1 ("ER-Reservoir"): every update is one step
on the stream mini-batch joined with a mini-batch drawn uniformly from memory (one loss, the mean
over the joined examples), and the stream mini-batch is then offered to a reservoir memory of
``memory_size`` examples, which holds a uniform sample of everything seen. Where the papers of
MbPA++ replay sparsely (1% of the stream, every 10,000 examples), ER replays at every step:
twice the examples forwarded and backpropagated per stream example, from far less memory.

Defaults: a memory mini-batch as large as the stream's (Algorithm 1 samples "a batch of the same
size", 10 and 10 in §5), and a memory of 200 examples, Avalanche's ``ReplayPlugin(mem_size=200)``
(the budget's ``avalanche:replay`` row), no gradient clipping (Algorithm 1 takes a plain SGD
step). The reservoir memory is the paper's; Avalanche's plugin keeps an experience-balanced
buffer filled at each experience's end instead, which the README's comparison says.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.replay import episodic_writer
from lifelong.memory import ExampleRecords
from lifelong.memory.policies import ReservoirWrite
from lifelong.options import Range, StandsFor, option_group
from lifelong.state import Counters, ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks


@option_group
class EROptions:
    """Memory size, memory mini-batch and clipping of ER (Chaudhry et al., 2019, Alg. 1).

    Attributes:
        memory_size: Examples the reservoir holds (M; default Avalanche's ``mem_size`` 200).
        memory_batch_size: Memory examples joined to each stream mini-batch (``None``: as many
            as the stream mini-batch holds, Algorithm 1's equal batches).
        max_grad_norm: Clip of each update's gradient norm (0: none, as Algorithm 1).

    """

    memory_size: Annotated[int, Range(min=1)] = 200  # Avalanche ReplayPlugin(mem_size=200)
    # Alg. 1: as many as the stream's mini-batch
    memory_batch_size: Annotated[int, Range(min=1), StandsFor("batch_size")] | None = None
    max_grad_norm: Annotated[float, Range(min=0)] = 0.0  # Alg. 1: a plain step


class ER(StrategyHooks):
    """Experience replay: each update on a stream mini-batch joined with a memory mini-batch.

    Args:
        context: Model, task kind and optimiser settings.
        options: Memory size and memory mini-batch (default: M = 200, the stream's batch size).

    """

    name: ClassVar[str] = "er"
    description: ClassVar[str] = (
        "dense experience replay: a reservoir memory mini-batch joined to every stream batch"
    )
    Options = EROptions

    def __init__(self, context: StrategyContext, options: EROptions | None = None) -> None:
        self.options = options or EROptions()
        self.trainer = context.build_trainer(self.options.max_grad_norm)
        policy = ReservoirWrite(self.options.memory_size)
        self.writer = episodic_writer(context, policy=policy, keyed=False)
        self.counts = Counters(replayed=0)  # memory examples joined to stream batches
        self.resumable = ResumableParts(
            trainer=self.trainer, writer=self.writer, counts=self.counts
        )

    def joined(self, batch: Batch) -> Batch:
        """The stream mini-batch followed by a uniform memory mini-batch.

        The stream mini-batch alone while memory is empty (the first step).
        """
        memory = self.writer.memory
        if not len(memory) or batch.examples is None:
            return batch
        size = self.options.memory_batch_size or batch.num_examples
        stored = memory.sample(size).examples
        self.counts.replayed += len(stored)
        stream = batch.examples.only(self.writer.kind.stored_fields)
        return self.writer.kind.rows(ExampleRecords.concat(stream, stored))

    def observe(self, batch: Batch) -> dict[str, float]:
        """One step on the joined batch, then offer the stream mini-batch to the reservoir."""
        loss = self.trainer.step(self.joined(batch))
        self.writer.write(batch)
        return {"loss": loss}

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)

    def report(self) -> dict[str, float]:
        """Examples in memory, write rate and memory examples replayed."""
        return {**self.writer.report(), "replayed_examples": self.counts.replayed}
