"""MbPA: memory-based parameter adaptation at test time only (Sprechmann et al., 2018).

Training is plain fine-tuning that also writes every example to episodic memory (keyed by the
frozen key network); at test time each input is predicted with weights locally adapted to its
K nearest memories (`lifelong.mechanisms.adaptation`). No replay: this is the "MbPA" row of MbPA++'s
tables (fixed key network variant, de Masson d'Autume et al., 2019, §4.2).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.adaptation import AdaptationOptions, MemoryAdaptation
from lifelong.mechanisms.replay import ClipOptions, WriteOptions, episodic_writer
from lifelong.memory import EpisodicWriter
from lifelong.options import option_group
from lifelong.state import ResumableParts
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.training import HeadDropoutOptions, TaskOptimizerOptions


@option_group
class MbPAOptions(
    AdaptationOptions, WriteOptions, ClipOptions, TaskOptimizerOptions, HeadDropoutOptions
):
    """Local adaptation (K, L, λ, step, momentum, scope, path, retrieval), writes, clip, optimiser.

    ``optimizer_per_task`` (off by default) uses the task boundaries of training (the learner's
    ``on_task_start``), as EM-in-LLL does; see `TaskOptimizerOptions`.
    """


class MbPA(StrategyHooks):
    """Fine-tune and memorise while training; adapt locally to nearest memories at test time.

    Args:
        context: Model, task kind and optimiser settings.
        options: K, L, λ, adaptation step size, scope and path; writes; clipping; the
            optional per-task optimiser.
        writer: The episodic writer to adapt from (default: one writing every example,
            keyed unless retrieval is random); MbPA++ passes its sparse replay's.

    """

    name: ClassVar[str] = "mbpa"
    description: ClassVar[str] = "local adaptation on K nearest memories at test time, no replay"
    Options = MbPAOptions

    def __init__(
        self,
        context: StrategyContext,
        options: MbPAOptions | None = None,
        *,
        writer: EpisodicWriter | None = None,
    ) -> None:
        options = options or MbPAOptions()
        if writer is None:
            keyed = options.retrieval == "nearest"  # random retrieval never searches
            writer = episodic_writer(context, options.write_prob, keyed=keyed)
        self.writer = writer
        self.local = MemoryAdaptation(
            context,
            writer,
            adaptation=options,
            schedule=options,
            max_grad_norm=options.max_grad_norm,
            head_dropout=options.head_dropout,
        )
        self.trainer, self.adapter = self.local.training.trainer, self.local.adapter
        self.resumable = ResumableParts(**self.local.resumable_parts(), writer=writer)

    def on_task_start(self, task: int) -> None:
        """With ``optimizer_per_task``: a fresh optimiser and schedule (EM-in-LLL)."""
        self.local.training.start_task()

    def observe(self, batch: Batch) -> dict[str, float]:
        """One update on the batch, then write it to memory."""
        stats = {"loss": self.local.training.step(batch)}
        self.writer.write(batch)
        self.local.weights_changed()
        return stats

    def predict(self, batch: Batch) -> torch.Tensor:
        """The locally adapted row scores; the base weights stay untouched."""
        return self.local.predict(batch)

    def report(self) -> dict[str, float]:
        """Examples in memory and write rate."""
        return self.writer.report()
