"""What every task kind provides: the `TaskKind` protocol and the settings kinds are built from.

A task kind is everything that differs between text classification, relation extraction
(lifelong FewRel) and extractive QA, in one object:

* ``encode(examples)`` — tokenise examples into compact `ExampleRecords`, one per example (what
  episodic memory stores);
* ``rows(records)`` — expand records into model rows (one per text; one per (sentence,
  candidate) pair; one per context window), with ``groups`` telling the example of each row;
  calling the kind on examples does both (it is the run's collator);
* ``key_rows(records)`` and ``key_position`` — where an example's memory key is read (once per
  example);
* ``head(hidden_size)`` — the prediction head the kind needs;
* ``loss``, ``loss_units`` and ``example_losses`` — the training loss over rows, the units it
  averages over (so chunks accumulate exactly), and one loss per example (for weighted pools);
* ``score(scores, batch, examples)`` — row scores to the summed per-example metrics, main
  metric first (accuracy; pooled accuracy over candidates; SQuAD F1 and exact match).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.memory.records import ExampleRecords
from lifelong.tasks.settings import TaskSettings

Settings = TaskSettings | None
"""A kind's settings argument (``None``: the kind's defaults)."""

if TYPE_CHECKING:
    from torch import nn

    from lifelong.streams.core import Example


@runtime_checkable
class TaskKind(Protocol):
    """One kind of task: how examples become rows, the head, the loss and the score."""

    name: ClassVar[str]
    metrics: ClassVar[tuple[str, ...]]  # names of `score`'s metrics, the main one first
    stored_fields: ClassVar[tuple[str, ...]]  # record fields episodic memory keeps
    key_position: int | None  # token of the key network's output that keys memory (None: pooled)
    pad_id: int
    token_types: bool  # whether `rows` carry token-type (segment) ids

    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Rows of ``examples`` (``rows(encode(examples))``): the run's collator."""
        ...

    def encode(self, examples: Sequence[Example]) -> ExampleRecords:
        """Tokenise examples into one compact record each."""
        ...

    def rows(self, records: ExampleRecords) -> Batch:
        """Model rows of ``records``, grouped by example, the records kept in the batch."""
        ...

    def key_rows(self, records: ExampleRecords) -> Batch:
        """One row per example for the key network (read at ``key_position``)."""
        ...

    def head(self, hidden_size: int) -> nn.Module:
        """A fresh prediction head for encoder vectors of width ``hidden_size``."""
        ...

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The training loss over the rows of ``batch`` (mean over `loss_units`)."""
        ...

    def loss_units(self, batch: Batch) -> int:
        """How many terms `loss` averages over (rows or examples)."""
        ...

    def example_losses(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """One loss per example of ``batch``, shape (num_examples,)."""
        ...

    def score(
        self, scores: torch.Tensor, batch: Batch, examples: Sequence[Example]
    ) -> dict[str, float]:
        """Per-example metrics summed over ``examples`` (fractions, not percent)."""
        ...

    def lengths(self, examples: Sequence[Example]) -> np.ndarray | None:
        """Tokens of each example, shape (n,), where known without tokenising; else ``None``.

        The learner sorts evaluation examples by it (length-aware batching). A plain kind
        returns ``None``; a run's token-cached kind (`lifelong.tasks.prepared.PreparedKind`)
        knows its prepared examples' lengths.
        """
        ...


def pad_rows(rows: Sequence[np.ndarray], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token rows into ids (n, t) and an attention mask (n, t)."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.from_numpy(np.asarray(row, dtype=np.int64))
        mask[i, : len(row)] = 1
    return ids, mask


def pad_types(types: Sequence[np.ndarray]) -> torch.Tensor:
    """Right-pad token-type rows into (n, t) with 0, BERT's segment of padding."""
    return pad_rows(types, 0)[0]


def group_mean(values: torch.Tensor, groups: torch.Tensor, n: int) -> torch.Tensor:
    """Mean of ``values`` (rows,) within each of ``n`` groups, shape (n,)."""
    sums = values.new_zeros(n).index_add(0, groups, values)
    counts = values.new_zeros(n).index_add(0, groups, torch.ones_like(values))
    return sums / counts.clamp(min=1)


class Tokens:
    """The special tokens of a BERT-style tokenizer, for rows built from stored token ids.

    Args:
        tokenizer: A Hugging Face tokenizer with ``cls_token_id`` and ``sep_token_id``.

    """

    def __init__(self, tokenizer: object) -> None:
        cls_id = getattr(tokenizer, "cls_token_id", None)
        sep_id = getattr(tokenizer, "sep_token_id", None)
        if cls_id is None or sep_id is None:
            raise ValueError(
                f"{type(tokenizer).__name__}: task kinds build rows as [CLS] ... [SEP] and need "
                "a tokenizer with cls and sep tokens (a BERT-style one)"
            )
        self.cls, self.sep = int(cls_id), int(sep_id)
        self.pad = int(getattr(tokenizer, "pad_token_id", None) or 0)

    def single(self, ids: np.ndarray, max_length: int) -> np.ndarray:
        """``[CLS] ids [SEP]``, ids cut to fit ``max_length``."""
        return np.concatenate([[self.cls], ids[: max(0, max_length - 2)], [self.sep]])

    def pair(
        self, first: np.ndarray, second: np.ndarray, max_length: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``[CLS] first [SEP] second [SEP]``, the first cut to fit (like ``"only_first"``).

        Returns:
            The row's token ids (t,) and its token types (t,): 0 up to and including the
            first [SEP], 1 after it, the ``token_type_ids`` a BERT tokenizer gives a pair.

        """
        room = max(0, max_length - 3 - len(second))
        first = first[:room]
        ids = np.concatenate([[self.cls], first, [self.sep], second, [self.sep]])
        types = np.zeros(len(ids), dtype=np.int64)
        types[len(first) + 2 :] = 1  # second [SEP]
        return ids, types
