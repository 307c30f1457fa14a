"""A first-task warm-up of the whole model, then a frozen encoder (SEQ*'s W + FixB).

Zheng et al. (2024, "Learn or Recall?", ACL; reference ``models/SEQ.py`` L152-155, L179-184)
fine-tune the whole model on the first task for a while, then freeze the encoder for the rest of
the stream; `lifelong.strategies.seq_star` does so within one pass, warming up on the first
``warmup_fraction`` (3/8, the reference's 3 of 8 epochs) of the first task's mini-batches.
McDonald et al.'s RanPAC (NeurIPS 2023, §3.4, "Phase 1") likewise adapts the pre-trained model
on the first task only, before its training-free phase. `FirstTaskWarmup` is that warm-up for
the prototype baselines (NCM, RanPAC): it trains the model (encoder and the task kind's head,
AdamW at the run's learning rate, as SEQ's updates) on the warm-up batches, keeps those batches'
examples, freezes the encoder when the warm-up ends and hands the kept batches back, so that
the baseline adds their features as seen by the encoder it will keep.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lifelong.batch import Batch
from lifelong.memory import ExampleRecords
from lifelong.options import Probability, option_group
from lifelong.state import Counters
from lifelong.strategy import StrategyContext
from lifelong.streams.core import TaskStream


@option_group
class WarmupOptions:
    """How much of the first task warms the encoder up before it is frozen.

    Attributes:
        warmup_fraction: The first task's mini-batches trained with the whole model before the
            encoder is frozen (0: none, the pre-trained encoder as it is; SEQ*'s 0.375, its
            reference's 3 warm-up epochs of 8).

    """

    warmup_fraction: Probability = 0.0  # 0: none; SEQ* (models/SEQ.py): 0.375


class FirstTaskWarmup:
    """Trains the whole model on the first task's first mini-batches, then freezes the encoder.

    Args:
        context: Model, task kind, learning rate and batch size.
        fraction: ``warmup_fraction`` (0: no warm-up).

    """

    def __init__(self, context: StrategyContext, fraction: float) -> None:
        self.model, self.kind = context.model, context.kind
        self.fraction, self.batch_size = fraction, context.batch_size
        self.trainer = context.build_trainer(0.0) if fraction > 0 else None
        self.counts = Counters(steps=0, warmup_steps=0, frozen=int(fraction == 0))
        self.held: list[ExampleRecords] = []  # the warm-up batches' examples

    @property
    def active(self) -> bool:
        """Whether the next mini-batch is a warm-up step."""
        return not self.counts.frozen

    def on_stream_start(self, stream: TaskStream) -> None:
        """Size the warm-up on the first task's mini-batches (on a resume too)."""
        if self.fraction > 0:
            first = -(-len(stream.tasks[0].train) // self.batch_size)
            self.counts.warmup_steps = max(1, math.ceil(self.fraction * first))

    def observe(self, batch: Batch) -> float:
        """One update of the whole model on the batch; freeze the encoder once it is the last.

        Raises:
            RuntimeError: The warm-up is over (check `active` first).

        """
        if self.trainer is None or not self.active:
            raise RuntimeError("the warm-up is over: the encoder is frozen")
        loss = self.trainer.step(batch)
        if batch.examples is not None:
            self.held.append(batch.examples.only(self.kind.stored_fields))
        self.counts.steps += 1
        if self.counts.steps >= self.counts.warmup_steps:
            self._freeze()
        return loss

    def feed(self, batch: Batch, add: Callable[[Batch], None]) -> dict[str, float]:
        """A prototype baseline's observe: warm up on the batch, or ``add`` it.

        During the warm-up the batch trains the model and is kept; when the encoder freezes,
        every kept batch is added (with the encoder it will keep). After it, the batch is added.

        Returns:
            The warm-up step's loss, or nothing (no update).

        """
        if not self.active:
            add(batch)
            return {}
        loss = self.observe(batch)
        for kept in self.release():  # empty until the encoder is frozen
            add(kept)
        return {"loss": loss}

    def release(self) -> list[Batch]:
        """The warm-up batches, as rows again, once the encoder is frozen (then forgotten)."""
        if self.active:
            return []
        out = [self.kind.rows(records) for records in self.held]
        self.held = []
        return out

    def _freeze(self) -> None:
        for p in self.model.encoder.parameters():
            p.requires_grad_(False)
        self.counts.frozen = 1

    def state_dict(self) -> dict[str, Any]:
        """The trainer (if any), the counters and the kept examples."""
        trainer = None if self.trainer is None else self.trainer.state_dict()
        return {"trainer": trainer, "counts": self.counts.state_dict(), "held": self.held}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (the encoder frozen again if it was)."""
        if self.trainer is not None and state["trainer"] is not None:
            self.trainer.load_state_dict(state["trainer"])
        self.counts.load_state_dict(state["counts"])
        self.held = list(state["held"])
        if self.counts.frozen and self.fraction > 0:
            self._freeze()

    def held_bytes(self) -> int:
        """Bytes of the warm-up examples kept until the encoder is frozen."""
        return sum(records.held_bytes() for records in self.held)
