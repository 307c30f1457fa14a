"""Episodic writes and sparse experience replay, shared by every strategy that uses memory.

`episodic_writer` builds a strategy's `lifelong.memory.EpisodicWriter` (every stream example
offered to an `EpisodicMemory` keyed by a frozen copy of the pre-trained encoder; a memory
value is one whole example, which the task kind expands into rows when it is read).
`ReplaySchedule` is the one replay schedule of every strategy that replays: de Masson d'Autume
et al. (2019, §3.2 and §4.2): every R_I new *examples*, ⌊r·R_I⌋ *examples* drawn uniformly
from memory (the paper: 100 per 10,000). `SparseReplay` puts the two together.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np

from lifelong.batch import Batch
from lifelong.memory import EpisodicMemory, EpisodicWriter, WritePolicy
from lifelong.options import PositiveFloat, PositiveInt, Probability, Range, option_group
from lifelong.strategy import StrategyContext
from lifelong.training import Trainer, train_step


@option_group
class ReplayOptions:
    """Sparse experience replay (de Masson d'Autume et al., 2019, §4.2: 1% replay)."""

    replay_every: PositiveInt = 10_000  # R_I: new stream examples between two replays
    replay_ratio: PositiveFloat = 0.01  # r: each replay draws ⌊r·R_I⌋ memory examples
    replay_chunk: PositiveInt = 64  # examples per forward pass inside one replay update


@option_group
class ReplayLossOptions:
    """How a replay's loss is formed from its ⌊r·R_I⌋ examples."""

    # "mean" over the examples, one update (MbPA++: EM-in-LLL train.py), or "sum_batches", the
    # sum of the mean losses of its ⌊r·R_I / b⌋ mini-batches of b (Holla et al.: cls_replay.py,
    # rel_replay.py; the replay query of cls_oml.py / cls_anml.py / cls_maml.py)
    replay_mode: Literal["mean", "sum_batches"] = "mean"


@option_group
class ReplayClipOptions:
    """The clip of a replay update's gradient, apart from the other updates'."""

    # None: the strategy's max_grad_norm, the clip of every update (EM-in-LLL clips every update
    # at 1); 0: none
    replay_grad_norm: Annotated[float, Range(min=0)] | None = None


@option_group
class WriteOptions:
    """Which stream examples are written to episodic memory."""

    write_prob: Probability = 1.0  # p_write: each example's write probability (MbPA++: 1)


@option_group
class ClipOptions:
    """Gradient clipping of a strategy's updates.

    The default, 1 on every update, is EM-in-LLL's (``train.py`` ``update_parameters``); the
    strategies of Holla et al.'s papers (seq, replay, A-GEM, MTL, OML-ER, ANML-ER, MAML-ER)
    override it with their code's (no clip, but REPLAY's replay update).
    """

    max_grad_norm: Annotated[float, Range(min=0)] = 1.0  # clip the update's norm (0 = none)


def replay_clip(replay_grad_norm: float | None, max_grad_norm: float) -> float:
    """The clip of a replay update: its own (`ReplayClipOptions`), else every update's."""
    return max_grad_norm if replay_grad_norm is None else replay_grad_norm


def paper_replay_clip(kind: str) -> float:
    """Holla et al.'s clip of the replay update: 25 (``cls_replay.py``), 10 for FewRel.

    FewRel's 10 is ``rel_replay.py``'s; their other updates are never clipped.
    """
    return 10.0 if kind == "relation" else 25.0


class ReplaySchedule:
    """When to replay and how much: every R_I examples, ⌊r·R_I⌋ examples (counts examples).

    Args:
        every: R_I.
        ratio: r.

    """

    def __init__(self, every: int, ratio: float) -> None:
        if every < 1 or not ratio > 0:
            raise ValueError(f"need R_I >= 1 and r > 0, got R_I={every}, r={ratio}")
        self.every, self.ratio = every, ratio
        self.seen = 0  # stream examples counted so far
        self.replays = 0  # replays taken so far

    @classmethod
    def from_options(cls, options: ReplayOptions) -> ReplaySchedule:
        """The schedule of ``options.replay_every`` / ``options.replay_ratio``."""
        return cls(options.replay_every, options.replay_ratio)

    @property
    def size(self) -> int:
        """⌊r·R_I⌋ examples per replay (at least 1)."""
        return max(1, math.floor(self.ratio * self.every))

    def due(self, examples: int) -> int:
        """Count ``examples`` new stream examples; return how many replays are now due."""
        before = self.seen // self.every
        self.seen += examples
        return self.seen // self.every - before

    def episodes_between_replays(self, batch_size: int, support_batches: int) -> int:
        """R_F = ⌈(R_I / b + 1) / (m + 1)⌉ (Holla et al., 2020, §3.3): replay about every R_I.

        An episode consumes m + 1 stream batches of b examples, so replaying every R_F-th
        episode replays about once per R_I stream examples.

        Raises:
            ValueError: A non-positive b or m.

        """
        if min(batch_size, support_batches) < 1:
            raise ValueError(f"need b, m >= 1, got b={batch_size}, m={support_batches}")
        return math.ceil((self.every / batch_size + 1) / (support_batches + 1))

    def state_dict(self) -> dict[str, int]:
        """Examples counted and replays taken."""
        return {"seen": self.seen, "replays": self.replays}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore what `state_dict` returned."""
        self.seen, self.replays = int(state["seen"]), int(state["replays"])


def episodic_writer(
    context: StrategyContext,
    write_prob: float = 1.0,
    *,
    policy: WritePolicy | None = None,
    keyed: bool = True,
) -> EpisodicWriter:
    """The `EpisodicWriter` of a strategy: its task kind, model encoder, seed, device and search.

    Args:
        context: The strategy's context (build this before training starts: the key network
            is a copy of the model's pre-trained encoder).
        write_prob: Probability of writing each example (1 = all of them, as in MbPA++).
        policy: Any other write policy (e.g. `DiversityWrite`); overrides ``write_prob``.
        keyed: Whether examples are keyed (False: a memory that is only sampled).

    """
    return EpisodicWriter(
        context.kind,
        context.model.encoder if keyed else None,
        write_prob=write_prob,
        policy=policy,
        seed=context.seed,
        device=context.runtime.device,
        index=context.memory_index,
    )


class SparseReplay:
    """Writes every batch to episodic memory and says when, and on what, to replay.

    Call `write` and then `due` once per stream batch; for each replay due, take one update on
    `replay_batches` (chunks of a single replay batch of ⌊r·R_I⌋ examples).

    Args:
        context: As for `episodic_writer`.
        schedule: When and how much (R_I, r: `ReplaySchedule.from_options`).
        chunk: Examples per forward pass inside one replay update (``replay_chunk``).
        mode: How a replay's loss is formed (``replay_mode``, `ReplayLossOptions`).
        grad_norm: The replay update's own clip (0: none; `replay_clip`).
        write_prob: Write probability (ignored with ``writer``).
        writer: A writer of one's own (e.g. with a diversity policy).
        keyed: Whether the memory keys its examples (ignored with ``writer``): False for a
            strategy that never searches it (see `EpisodicWriter`).

    """

    def __init__(
        self,
        context: StrategyContext,
        schedule: ReplaySchedule,
        *,
        chunk: int = 64,
        mode: Literal["mean", "sum_batches"] = "mean",
        grad_norm: float = 0.0,
        write_prob: float = 1.0,
        writer: EpisodicWriter | None = None,
        keyed: bool = True,
    ) -> None:
        self.schedule, self.chunk, self.mode, self.grad_norm = schedule, chunk, mode, grad_norm
        self.writer = writer or episodic_writer(context, write_prob, keyed=keyed)
        self.batch_size = context.batch_size

    @property
    def memory(self) -> EpisodicMemory:
        """The episodic memory replayed from."""
        return self.writer.memory

    def write(self, batch: Batch) -> None:
        """Offer the batch's examples to memory."""
        self.writer.write(batch)

    def due(self, batch: Batch) -> int:
        """Count the batch's examples; return how many replays are now due."""
        return self.schedule.due(batch.num_examples)

    def sample(self) -> np.ndarray:
        """Slots of one replay: ⌊r·R_I⌋ distinct memory examples, uniformly (counted)."""
        self.schedule.replays += 1
        return self.memory.sample(self.schedule.size).slots

    def replay_batches(self, slots: np.ndarray | None = None) -> list[Batch]:
        """One replay's examples as rows, in chunks of ``replay_chunk`` examples."""
        slots = self.sample() if slots is None else slots
        return [
            self.writer.batch(slots[i : i + self.chunk]) for i in range(0, len(slots), self.chunk)
        ]

    def loss_scale(self, examples: int) -> float:
        """The factor on a replay's mean loss: 1 (``"mean"``), or its mini-batches of b.

        ``"sum_batches"`` sums the mean losses of ⌊n / b⌋ mini-batches of b (Holla et al.'s
        ``replay_steps = int(replay_every * replay_rate / mini_batch_size)``), which equals n / b
        times the mean over the n examples when the loss averages over examples.
        """
        if self.mode == "mean":
            return 1.0
        return max(1.0, float(examples // self.batch_size))

    def update(self, trainer: Trainer) -> float:
        """One replay update of ``trainer``'s model on a fresh replay sample; its mean loss.

        The loss is scaled by `loss_scale` and the gradient clipped at ``grad_norm`` (this
        update's own clip), whatever the trainer clips its other updates at.
        """
        slots = self.sample()
        batches = self.replay_batches(slots)
        return train_step(
            trainer.model,
            trainer.optimizer,
            batches,
            max_grad_norm=self.grad_norm,
            scale=self.loss_scale(len(slots)),
            scaler=trainer.scaler,
        )

    def report(self) -> dict[str, float]:
        """The memory's report and the number of replays."""
        return {**self.writer.report(), "replays": self.schedule.replays}

    def state_dict(self) -> dict[str, Any]:
        """Memory and schedule."""
        return {"writer": self.writer.state_dict(), "schedule": self.schedule.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore memory and schedule."""
        self.writer.load_state_dict(state["writer"])
        self.schedule.load_state_dict(state["schedule"])
