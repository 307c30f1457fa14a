"""A-GEM: averaged gradient episodic memory (Chaudhry et al., 2019), without task identifiers.

Each update's gradient g is checked against a reference gradient g_ref computed on a batch of
episodic memories; if they conflict (g · g_ref < 0), g is projected onto the half-space where
the memory loss does not increase:  g ← g − (g · g_ref / g_ref · g_ref) g_ref.
``project="replay_steps"`` (the default) checks only the updates on which sparse replay would
fire (every R_I examples, with floor(r * R_I) memories), as both papers' A-GEM baselines do
(de Masson d'Autume et al., 2019, §4.2; Holla et al.'s ``models/cls_agem.py`` projects only when
``(iter + 1) % replay_freq == 0``); ``project="every_step"`` checks every update against
``memory_batch`` random memories, as Chaudhry et al.'s original A-GEM. Like ``cls_agem.py``,
no update is clipped by default.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.replay import (
    ClipOptions,
    ReplayOptions,
    ReplaySchedule,
    SparseReplay,
    WriteOptions,
)
from lifelong.model import Classifier
from lifelong.options import PositiveInt, Range, option_group
from lifelong.state import Counters, ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.training import accumulate


@option_group
class AGEMOptions(ReplayOptions, WriteOptions, ClipOptions):
    """When to project, and on how many memories (plus replay rate, writes and clipping)."""

    project: Literal["every_step", "replay_steps"] = "replay_steps"  # cls_agem.py
    memory_batch: PositiveInt = 32  # memory examples behind g_ref with project="every_step"
    max_grad_norm: Annotated[float, Range(min=0)] = 0.0  # cls_agem.py never clips


def project_gradient(g: torch.Tensor, g_ref: torch.Tensor) -> torch.Tensor:
    """A-GEM's projection of a flat gradient ``g`` against a reference gradient ``g_ref``.

    Returns ``g`` when ``g · g_ref >= 0``, otherwise ``g − (g · g_ref / g_ref · g_ref) g_ref``,
    whose dot product with ``g_ref`` is zero.
    """
    dot = torch.dot(g, g_ref)
    if dot >= 0:
        return g
    # dot < 0 implies g_ref != 0; rescaling it first keeps g_ref · g_ref from underflowing to 0
    r = g_ref / g_ref.abs().max()
    return g - (torch.dot(g, r) / torch.dot(r, r)) * r


def flat_gradient(
    model: Classifier, batches: list[Batch], scaler: torch.amp.GradScaler | None = None
) -> torch.Tensor:
    """The gradient of the mean loss over ``batches`` as one flat vector (model in train mode).

    With an active ``scaler`` (fp16) the gradient is left multiplied by its scale: the
    projection is linear in g and invariant to scaling g_ref, so projecting scaled gradients
    and unscaling afterwards (`Trainer.apply`) is the same update.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    model.zero_grad(set_to_none=True)
    accumulate(model, batches, scaler=scaler)
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
    )


def assign_gradient(model: Classifier, g: torch.Tensor) -> None:
    """Write a flat gradient back into the parameters' ``.grad``."""
    offset = 0
    for p in (p for p in model.parameters() if p.requires_grad):
        p.grad = g[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()


class AGEM(StrategyHooks):
    """Gradient projection against episodic memories; memory writes as in MbPA++.

    Args:
        context: Model, task kind and optimiser settings.
        options: Projection schedule, memory batch and write probability.

    """

    name: ClassVar[str] = "agem"
    description: ClassVar[str] = "A-GEM: project gradients that would increase the memory loss"
    Options = AGEMOptions

    def __init__(self, context: StrategyContext, options: AGEMOptions | None = None) -> None:
        self.options = options or AGEMOptions()
        self.model = context.model
        self.trainer = context.build_trainer(self.options.max_grad_norm)
        o = self.options
        self.replay = SparseReplay(
            context,
            ReplaySchedule.from_options(o),
            chunk=o.replay_chunk,
            grad_norm=o.max_grad_norm,
            write_prob=o.write_prob,
            keyed=False,
        )
        self.counts = Counters(projections=0)  # updates whose gradient was actually projected
        self.resumable = ResumableParts(
            trainer=self.trainer, replay=self.replay, counts=self.counts
        )

    def observe(self, batch: Batch) -> dict[str, float]:
        """One (possibly projected) update on the batch, then write it to memory."""
        scaler = self.trainer.scaler
        g = flat_gradient(self.model, [batch], scaler)
        due = self.replay.due(batch) > 0
        if len(self.replay.memory) and (self.options.project == "every_step" or due):
            g_ref = flat_gradient(self.model, self._reference_batches(), scaler)
            projected = project_gradient(g, g_ref)
            self.counts.projections += int(projected is not g)
            g = projected
        assign_gradient(self.model, g)
        self.trainer.apply()
        self.replay.write(batch)
        return {"projections": float(self.counts.projections)}

    def _reference_batches(self) -> list[Batch]:
        if self.options.project == "replay_steps":
            return self.replay.replay_batches()
        slots = self.replay.memory.sample(self.options.memory_batch).slots
        return [self.replay.writer.batch(slots)]

    def predict(self, batch: Batch) -> torch.Tensor:
        """Row scores of the current model."""
        return self.trainer.predict(batch)

    def report(self) -> dict[str, float]:
        """Examples in memory, write rate, replays and projected updates."""
        return {**self.replay.report(), "projections": self.counts.projections}
