"""A task kind as a run uses it: records from a token cache, batches on the run's device.

A run prepares its kind twice over: every split is tokenised once (`lifelong.tasks.cache.
TokenCache`) and every batch the kind makes lands on the run's device (the stream's
mini-batches, replay and meta-replay batches, nearest neighbours, episodes, coarse-adaptation
pools and key rows are all made by the kind: ``kind(examples)``, ``kind.rows(records)``,
``kind.key_rows(records)``). `PreparedKind` does both, and implements the `TaskKind` protocol
member by member: what it changes (``encode``, ``lengths``, ``rows``, ``key_rows`` and calling
it) and what it passes on to the wrapped kind, ``base``, are all written here. A member only one
kind has (QA's ``windows``, FewRel's ``relation_tokens``) is asked of `base_kind` explicitly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.memory.records import ExampleRecords
from lifelong.runtime import to_device

if TYPE_CHECKING:
    from torch import nn

    from lifelong.streams.core import Example
    from lifelong.tasks.base import TaskKind
    from lifelong.tasks.cache import TokenCache


@dataclasses.dataclass(frozen=True, eq=False)
class PreparedKind:
    """``base`` serving cached records and placing its batches on ``device``.

    Attributes:
        base: The task kind it prepares (never itself a `PreparedKind`).
        device: Where its batches go; ``None``: where the base kind makes them (the CPU).
        cache: Records of the stream's examples, tokenised once; ``None``: encode every time.

    """

    base: TaskKind
    device: torch.device | None = None
    cache: TokenCache | None = None

    def __post_init__(self) -> None:
        if isinstance(self.base, PreparedKind):
            raise TypeError("PreparedKind wraps a task kind, not a PreparedKind: use prepare()")

    # --- what preparing changes
    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Rows of ``examples`` (``rows(encode(examples))``), on the device."""
        return self.rows(self.encode(examples))

    def encode(self, examples: Sequence[Example]) -> ExampleRecords:
        """The examples' records: from the cache when all were prepared, else encoded now."""
        records = self.cache.lookup(examples) if self.cache is not None else None
        return records if records is not None else self.base.encode(examples)

    def rows(self, records: ExampleRecords) -> Batch:
        """Model rows of ``records``, on the device."""
        return self._place(self.base.rows(records))

    def key_rows(self, records: ExampleRecords) -> Batch:
        """Key-network rows of ``records``, on the device."""
        return self._place(self.base.key_rows(records))

    def lengths(self, examples: Sequence[Example]) -> np.ndarray | None:
        """Token ids in each example's cached record (all fields), (n,); else the base's answer.

        The learner orders evaluation batches by it (length-aware batching).
        """
        records = self.cache.lookup(examples) if self.cache is not None else None
        if records is None:
            return self.base.lengths(examples)
        return np.sum([[len(v) for v in records[name]] for name in records.names], axis=0)

    def _place(self, batch: Batch) -> Batch:
        return batch if self.device is None else to_device(batch, self.device)

    # --- what it passes on unchanged
    @property
    def name(self) -> str:  # type: ignore[override]
        """The base kind's name."""
        return self.base.name

    @property
    def metrics(self) -> tuple[str, ...]:  # type: ignore[override]
        """The base kind's metric names, the main one first."""
        return self.base.metrics

    @property
    def stored_fields(self) -> tuple[str, ...]:
        """The record fields episodic memory keeps."""
        return self.base.stored_fields

    @property
    def key_position(self) -> int | None:
        """The token whose key-network output keys memory (``None``: pooled)."""
        return self.base.key_position

    @property
    def pad_id(self) -> int:
        """The padding token id."""
        return self.base.pad_id

    @property
    def token_types(self) -> bool:
        """Whether the rows carry token-type (segment) ids."""
        return self.base.token_types

    def head(self, hidden_size: int) -> nn.Module:
        """The base kind's head."""
        return self.base.head(hidden_size)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The base kind's training loss."""
        return self.base.loss(logits, batch)

    def loss_units(self, batch: Batch) -> int:
        """The units the loss averages over."""
        return self.base.loss_units(batch)

    def example_losses(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """One loss per example, (n,)."""
        return self.base.example_losses(logits, batch)

    def score(
        self, scores: torch.Tensor, batch: Batch, examples: Sequence[Example]
    ) -> dict[str, float]:
        """The base kind's summed per-example metrics."""
        return self.base.score(scores, batch, examples)


def base_kind(kind: TaskKind) -> TaskKind:
    """The task kind itself, unprepared (for members only that kind has)."""
    return kind.base if isinstance(kind, PreparedKind) else kind


def prepare(
    kind: TaskKind,
    *,
    device: torch.device | None = None,
    cache: TokenCache | None = None,
) -> PreparedKind:
    """``kind`` prepared with a device and/or a cache.

    An already prepared kind keeps what it had and takes what is given (never wrapped twice).
    """
    if isinstance(kind, PreparedKind):
        return dataclasses.replace(
            kind, device=device or kind.device, cache=cache if cache is not None else kind.cache
        )
    return PreparedKind(kind, device=device, cache=cache)


def on_device(kind: TaskKind, device: torch.device) -> PreparedKind:
    """``kind`` whose batches land on ``device`` (`prepare`)."""
    return prepare(kind, device=device)
