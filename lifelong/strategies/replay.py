"""REPLAY: sparse experience replay from episodic memory (de Masson d'Autume et al., 2019).

Every ``replay_every`` (R_I) new examples, ``floor(replay_ratio * R_I)`` examples are drawn
uniformly from memory and the model takes one update on them. The paper's rate is 100 replayed
per 10,000 new (R_I = 10,000, r = 0.01; §4.2). Every example is offered to memory through the
write policy (``write_prob = 1``: all of them, as in the paper). Examples, not rows, are counted
and stored: a FewRel sentence replays with all its candidates, a QA question with all its
context windows.

The update follows Holla et al.'s REPLAY baseline (``models/cls_replay.py``,
``models/rel_replay.py``), the public code of the papers' REPLAY rows: the replay loss is the sum
of the mean losses of its ⌊r·R_I / b⌋ mini-batches of b, the replay update's gradient is clipped
at 25 (FewRel: 10), and the ordinary updates are not clipped.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.replay import (
    ClipOptions,
    ReplayClipOptions,
    ReplayLossOptions,
    ReplayOptions,
    ReplaySchedule,
    SparseReplay,
    WriteOptions,
    paper_replay_clip,
)
from lifelong.options import Range, option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks


@option_group
class ReplayStrategyOptions(
    ReplayOptions, ReplayLossOptions, ReplayClipOptions, WriteOptions, ClipOptions
):
    """Replay rate (R_I, r), write probability and gradient clips (Holla et al.'s by default).

    ``replay_grad_norm=None`` here means Holla et al.'s clip for the stream kind (25, FewRel 10:
    `lifelong.mechanisms.replay.paper_replay_clip`); ``max_grad_norm`` clips the ordinary updates
    (0: none, as ``cls_replay.py``).
    """

    replay_mode: Literal["mean", "sum_batches"] = "sum_batches"  # cls_replay.py sums batches
    replay_grad_norm: Annotated[float, Range(min=0)] | None = None  # None: 25, FewRel 10
    max_grad_norm: Annotated[float, Range(min=0)] = 0.0  # cls_replay.py: no clip on stream steps


class Replay(StrategyHooks):
    """Sparse experience replay: fine-tuning plus one update on memory samples every R_I examples.

    Args:
        context: Model, task kind and optimiser settings.
        options: Replay rate (default: the paper's 1%, every 10,000 examples).

    """

    name: ClassVar[str] = "replay"
    description: ClassVar[str] = "sparse experience replay: floor(r*R_I) memory examples every R_I"
    Options = ReplayStrategyOptions

    def __init__(
        self, context: StrategyContext, options: ReplayStrategyOptions | None = None
    ) -> None:
        options = options or ReplayStrategyOptions()
        if options.replay_grad_norm is None:
            clip = paper_replay_clip(context.kind.name)
            options = dataclasses.replace(options, replay_grad_norm=clip)
        self.trainer = context.build_trainer(options.max_grad_norm)
        self.replay = SparseReplay(
            context,
            ReplaySchedule.from_options(options),
            chunk=options.replay_chunk,
            mode=options.replay_mode,
            grad_norm=options.replay_grad_norm,  # Holla et al.'s, set above when not given
            write_prob=options.write_prob,
            keyed=False,  # uniform samples only: no keys
        )
        self.resumable = ResumableParts(trainer=self.trainer, replay=self.replay)

    def observe(self, batch: Batch) -> dict[str, float]:
        """Update on the batch, replay if R_I examples have passed, then write the batch.

        The batch is written after the replay, as ``cls_replay.py`` does, so a replay never
        draws the examples just trained on; a replay due while memory is still empty is skipped.
        """
        stats = {"loss": self.trainer.step(batch)}
        for _ in range(self.replay.due(batch)):  # one update on floor(r * R_I) memories
            if len(self.replay.memory):
                stats["replay_loss"] = self.replay.update(self.trainer)
        self.replay.write(batch)
        return stats

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)

    def report(self) -> dict[str, float]:
        """Examples in memory, write rate and replays taken."""
        return self.replay.report()
