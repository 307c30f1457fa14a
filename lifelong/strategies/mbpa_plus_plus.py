"""MbPA++ (de Masson d'Autume et al., 2019): sparse replay in training, local adaptation at test.

Training writes every example to episodic memory and, every R_I examples, takes one update on
floor(r * R_I) uniformly sampled memory examples (1% in the paper, §4.2). At test time each
input is predicted with weights adapted for L steps to its K nearest memories (K = 32, L = 30,
λ = 1e-3). ``mbpa++-rand`` retrieves K random memories instead of the nearest ones: the paper's
ablation showing that retrieval by the key network matters.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch

from lifelong.batch import Batch
from lifelong.mechanisms.adaptation import AdaptationOptions
from lifelong.mechanisms.replay import (
    ClipOptions,
    ReplayClipOptions,
    ReplayLossOptions,
    ReplayOptions,
    ReplaySchedule,
    SparseReplay,
    WriteOptions,
    replay_clip,
)
from lifelong.options import option_group
from lifelong.state import ResumableParts
from lifelong.strategies.mbpa import MbPA
from lifelong.strategy import StrategyContext, StrategyHooks
from lifelong.training import HeadDropoutOptions, TaskOptimizerOptions


@option_group
class MbPAPlusPlusOptions(
    ReplayOptions,
    ReplayLossOptions,
    ReplayClipOptions,
    AdaptationOptions,
    WriteOptions,
    ClipOptions,
    TaskOptimizerOptions,
    HeadDropoutOptions,
):
    """Sparse replay (R_I, r), local adaptation (K, L, λ, ...), writes, clips, optimiser.

    Replay and clipping default to EM-in-LLL's (``train.py``): one update on the mean loss of
    the replayed examples, every update clipped at norm 1.
    """


@option_group
class MbPAPlusPlusRandOptions(MbPAPlusPlusOptions):
    """MbPA++ options with random retrieval."""

    retrieval: Literal["nearest", "random"] = "random"  # K random memories, not the nearest


class MbPAPlusPlus(StrategyHooks):
    """Sparse experience replay while training, kNN local adaptation while predicting.

    Args:
        context: Model, task kind and optimiser settings.
        options: Replay rate, local-adaptation settings and the optional per-task optimiser
            (`TaskOptimizerOptions`: EM-in-LLL's fresh AdamW and linear schedule per task).

    """

    name: ClassVar[str] = "mbpa++"
    description: ClassVar[str] = "sparse replay (1%) + local adaptation on K nearest memories"
    Options = MbPAPlusPlusOptions

    def __init__(
        self, context: StrategyContext, options: MbPAPlusPlusOptions | None = None
    ) -> None:
        options = options or self.Options()
        keyed = options.retrieval == "nearest"  # random retrieval (mbpa++-rand) never searches
        self.replay = SparseReplay(
            context,
            ReplaySchedule.from_options(options),
            chunk=options.replay_chunk,
            mode=options.replay_mode,
            grad_norm=replay_clip(options.replay_grad_norm, options.max_grad_norm),
            write_prob=options.write_prob,
            keyed=keyed,
        )
        self.mbpa = MbPA(context, options, writer=self.replay.writer)  # MbPA, plus the replay
        self.trainer, self.adapter = self.mbpa.trainer, self.mbpa.adapter
        self.resumable = ResumableParts(**self.mbpa.local.resumable_parts(), replay=self.replay)

    def on_task_start(self, task: int) -> None:
        """With ``optimizer_per_task``: a fresh optimiser and schedule (EM-in-LLL)."""
        self.mbpa.on_task_start(task)

    def observe(self, batch: Batch) -> dict[str, float]:
        """MbPA's update and write, then a replay when R_I examples have passed."""
        losses = self.mbpa.observe(batch)
        for _ in range(self.replay.due(batch)):  # replay_mode and replay_grad_norm apply
            self.mbpa.local.training.advance()  # replay updates count in EM-in-LLL's schedule
            losses["replay_loss"] = self.replay.update(self.trainer)
            self.mbpa.local.weights_changed()
        return losses

    def predict(self, batch: Batch) -> torch.Tensor:
        """The locally adapted row scores; the base weights stay untouched."""
        return self.mbpa.predict(batch)

    def report(self) -> dict[str, float]:
        """Examples in memory, write rate and replays."""
        return self.replay.report()


class MbPAPlusPlusRand(MbPAPlusPlus):
    """MbPA++ with K random memories for local adaptation (the paper's MbPA++_rand)."""

    name: ClassVar[str] = "mbpa++-rand"
    description: ClassVar[str] = "MbPA++ with K random (not nearest) memories for adaptation"
    Options = MbPAPlusPlusRandOptions
