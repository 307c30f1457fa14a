"""REPLAY: sparse experience replay from episodic memory (de Masson d'Autume et al., 2019).

Every ``replay_every`` (R_I) new examples, ``floor(replay_ratio * R_I)`` examples are drawn
uniformly from memory and the model takes one update on them. The paper's rate is 100 replayed
per 10,000 new (R_I = 10,000, r = 0.01). Every example is offered to memory through the write
policy (``write_prob = 1``: all of them, as in the paper).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from lifelong.memory import EpisodicMemory, KeyEncoder, RandomWrite, WriteAll
from lifelong.model import Batch
from lifelong.strategy import StrategyContext
from lifelong.training import make_optimizer, predict_labels, train_step


@dataclass(frozen=True)
class ReplayOptions:
    """Options of sparse experience replay."""

    replay_every: int = 10_000  # R_I: new examples between two replay updates
    replay_ratio: float = 0.01  # r: floor(r * R_I) memory examples per replay update
    write_prob: float = 1.0  # probability of writing each example to memory (1 = all)
    replay_chunk: int = 64  # examples per forward pass inside the single replay update

    def __post_init__(self) -> None:
        if self.replay_every < 1:
            raise ValueError(f"replay_every must be >= 1, got {self.replay_every}")
        if not 0 < self.replay_ratio:
            raise ValueError(f"replay_ratio must be > 0, got {self.replay_ratio}")

    @property
    def replay_size(self) -> int:
        """floor(r * R_I), at least 1."""
        return max(1, math.floor(self.replay_ratio * self.replay_every))


class SparseReplay:
    """Writes every batch to episodic memory and replays from it at a fixed sparse rate.

    Shared by strategies that replay (REPLAY, MbPA++): call `after_batch` once per stream batch.

    Args:
        context: Supplies the model (its pre-trained encoder is copied as the key network).
        options: Replay rate and write probability.

    """

    def __init__(self, context: StrategyContext, options: ReplayOptions) -> None:
        self.options = options
        self.collator = context.collator
        self.key_encoder = KeyEncoder(context.model.encoder)
        policy = WriteAll() if options.write_prob >= 1.0 else RandomWrite(options.write_prob)
        self.memory = EpisodicMemory(self.key_encoder.dim, policy=policy, seed=context.seed)
        self.seen = 0
        self.replays = 0

    def write(self, batch: Batch) -> None:
        """Offer the batch to memory; keys are computed only for the examples written."""
        self.memory.write(
            batch.token_lists(),
            batch.labels.numpy(),
            lambda chosen: self.key_encoder(batch.select(chosen)),
        )

    def due(self, batch_size: int) -> int:
        """Count ``batch_size`` new examples; return how many replay updates are now due."""
        before = self.seen // self.options.replay_every
        self.seen += batch_size
        return self.seen // self.options.replay_every - before

    def replay_batches(self) -> list[Batch]:
        """One replay batch from memory, split in chunks for memory-bounded forward passes."""
        items = self.memory.sample(self.options.replay_size)
        chunk = self.options.replay_chunk
        return [
            self.collator.from_tokens(items.tokens[i : i + chunk], items.labels[i : i + chunk])
            for i in range(0, len(items.tokens), chunk)
        ]

    def state_dict(self) -> dict[str, Any]:
        """Memory (as bytes) and counters."""
        return {"memory": self.memory.to_bytes(), "seen": self.seen, "replays": self.replays}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore memory and counters."""
        self.memory = EpisodicMemory.from_bytes(state["memory"], key_dim=self.key_encoder.dim)
        self.seen, self.replays = int(state["seen"]), int(state["replays"])


class Replay:
    """Sparse experience replay: fine-tuning plus one update on memory samples every R_I examples.

    Args:
        context: Model, collator and optimiser settings.
        options: Replay rate (default: the paper's 1%, every 10,000 examples).

    """

    name: ClassVar[str] = "replay"
    description: ClassVar[str] = "sparse experience replay: floor(r*R_I) memory examples every R_I"
    Options = ReplayOptions

    def __init__(self, context: StrategyContext, options: ReplayOptions | None = None) -> None:
        self.model = context.model
        self.optimizer = make_optimizer(self.model, context.lr)
        self.replay = SparseReplay(context, options or ReplayOptions())

    def observe(self, batch: Batch) -> dict[str, float]:
        """Update on the batch, write it to memory, then replay if R_I examples have passed."""
        stats = {"loss": train_step(self.model, self.optimizer, batch)}
        self.replay.write(batch)
        for _ in range(self.replay.due(len(batch))):
            stats["replay_loss"] = train_step(
                self.model, self.optimizer, self.replay.replay_batches()
            )
            self.replay.replays += 1
        return stats

    def predict(self, batch: Batch) -> torch.Tensor:
        """Argmax labels of the current model."""
        return predict_labels(self.model, batch)

    def state_dict(self) -> dict[str, Any]:
        """Model, optimiser, memory and replay counters."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "replay": self.replay.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore everything `state_dict` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.load_state_dict(state["replay"])
