"""A tokenised mini-batch: rows (what the encoder reads) grouped by example.

A `Batch` holds *rows* grouped by *example* (what the stream, the memory and every counter
count): a text-classification example is one row, a FewRel sentence one row per candidate
relation, a QA question one row per context window. Task kinds make batches
(`lifelong.tasks`); the model (`lifelong.model.Classifier`) reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from lifelong.memory.records import ExampleRecords


@dataclass
class Batch:
    """A tokenised mini-batch: rows grouped by example.

    Attributes:
        input_ids: Token ids of the rows, shape (n, t), right-padded.
        attention_mask: 1 for real tokens, 0 for padding, shape (n, t).
        labels: Per row: the label in the merged label space (n,); for relation extraction 1
            for the gold (sentence, relation) row and 0 for a negative candidate; for QA the
            (start, end) token positions of the answer in the window, (n, 2).
        groups: The example of each row, shape (n,), rows of an example contiguous and examples
            in order; ``None`` when every example is one row.
        examples: The batch's examples in the compact form episodic memory stores (one record
            per example), when the batch was made by a task kind.
        offsets: QA: the character span (start, end) in its context of every token, (n, t, 2),
            (-1, -1) off the context; used to decode answers.
        token_type_ids: BERT's segment ids, (n, t): 0 for ``[CLS] first [SEP]``, 1 for ``second
            [SEP]``, 0 on padding (Devlin et al., 2019, §3; the tokenizer's
            ``token_type_ids``); ``None`` when the rows are single segments or the task kind
            leaves them out (the encoder then reads segment 0 everywhere).

    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    groups: torch.Tensor | None = None
    examples: ExampleRecords | None = None
    offsets: torch.Tensor | None = None
    token_type_ids: torch.Tensor | None = None

    def __len__(self) -> int:
        """The number of rows (see `num_examples` for examples)."""
        return int(self.labels.shape[0])

    @property
    def num_rows(self) -> int:
        """Rows in the batch."""
        return len(self)

    @property
    def num_examples(self) -> int:
        """Examples in the batch: what replay schedules, write rates and memories count."""
        if self.examples is not None:
            return len(self.examples)
        if self.groups is not None:
            return int(self.host_groups().max()) + 1 if len(self) else 0
        return len(self)

    def host_groups(self) -> np.ndarray:
        """`row_groups` as a host array (n,): copied from the device once per batch, then kept.

        Row selection by example (`example_rows`, `examples_at`) reads it, so selecting the
        rows of K neighbours costs one device-to-host copy, not K.
        """
        if self.groups is None:
            return np.arange(len(self))
        return self._host("groups", self.groups)

    def host_lengths(self) -> np.ndarray:
        """Real tokens of every row as a host array (n,) (one copy per batch, then kept)."""
        return self._host("lengths", self.attention_mask, lambda m: m.sum(dim=1))

    def _host(self, name: str, tensor: torch.Tensor, derive: Any = None) -> np.ndarray:
        # keyed by the tensor itself: a field replaced or reassigned is copied again
        cached = self.__dict__.get(f"_host_{name}")
        if cached is None or cached[0] is not tensor:
            value = tensor if derive is None else derive(tensor)
            # tolist, not numpy(): inside a torch.func transform the tensor is a wrapper
            # without storage, which numpy() cannot read (one copy either way)
            cached = (tensor, np.asarray(value.tolist(), dtype=np.int64))
            self.__dict__[f"_host_{name}"] = cached
        return cached[1]

    @property
    def row_groups(self) -> torch.Tensor:
        """The example of each row, shape (n,) (``arange(n)`` when rows are examples)."""
        if self.groups is not None:
            return self.groups
        return torch.arange(len(self), device=self.labels.device)

    def inputs(self) -> tuple[torch.Tensor, ...]:
        """The model's positional inputs: ``(input_ids, attention_mask[, token_type_ids])``.

        Call the model as ``model(*batch.inputs())`` so the token types reach the encoder
        whenever the rows have them.
        """
        if self.token_type_ids is None:
            return self.input_ids, self.attention_mask
        return self.input_ids, self.attention_mask, self.token_type_ids

    TENSORS = ("input_ids", "attention_mask", "labels", "groups", "offsets", "token_type_ids")
    """The batch's tensor fields (the others are host data)."""

    def map_tensors(self, fn: Any) -> Batch:
        """A copy with ``fn`` applied to every tensor field (``None`` fields stay ``None``)."""
        return replace(
            self,
            **{f: None if getattr(self, f) is None else fn(getattr(self, f)) for f in self.TENSORS},
        )

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Batch:
        """Move every tensor to ``device`` (asynchronously from pinned memory if asked)."""
        return self.map_tensors(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """A copy in page-locked host memory, which a GPU copies from without the CPU."""
        return self.map_tensors(lambda t: t.pin_memory())

    def record_stream(self, stream: Any) -> None:
        """Tell the CUDA allocator that ``stream`` uses this batch's device tensors."""
        for name in self.TENSORS:
            if (tensor := getattr(self, name)) is not None:
                tensor.record_stream(stream)

    def select(self, indices: Sequence[int] | np.ndarray, *, trim: bool = True) -> Batch:
        """The rows ``indices`` (groups and token types kept, records dropped).

        With ``trim`` they are cut to their longest row; without, they keep the batch's width
        (to line up with token vectors already computed on the whole batch).
        """
        indices = np.asarray(indices, dtype=np.int64)
        idx = torch.as_tensor(indices, device=self.input_ids.device)
        mask = self.attention_mask[idx]
        width = int(self.host_lengths()[indices].max()) if len(idx) else 0
        width = width if trim else mask.shape[1]
        return Batch(
            self.input_ids[idx, :width],
            mask[:, :width],
            self.labels[idx],
            None if self.groups is None else self.groups[idx],
            offsets=None if self.offsets is None else self.offsets[idx, :width],
            token_type_ids=(
                None if self.token_type_ids is None else self.token_type_ids[idx, :width]
            ),
        )

    def example_rows(self, example: int) -> np.ndarray:
        """Row indices of one example (from `host_groups`: no device sync after the first)."""
        if self.groups is None:
            return np.array([example], dtype=np.int64)
        return np.flatnonzero(self.host_groups() == example)

    def examples_at(self, indices: Sequence[int] | np.ndarray, *, trim: bool = True) -> Batch:
        """The rows of the examples ``indices`` (in that order), groups renumbered 0..

        ``trim`` as for `select`.
        """
        indices = [int(i) for i in np.asarray(indices).reshape(-1)]
        rows = [self.example_rows(i) for i in indices]
        part = self.select(np.concatenate(rows) if rows else np.zeros(0, np.int64), trim=trim)
        part.groups = (
            None
            if self.groups is None
            else torch.cat(
                [
                    torch.full((len(r),), g, dtype=torch.long, device=self.groups.device)
                    for g, r in enumerate(rows)
                ]
            )
        )
        part.examples = None if self.examples is None else self.examples.select(indices)
        return part
