"""The trainable model (encoder + head) and the tokenised batches it reads.

A `Batch` holds *rows* (what the encoder reads) grouped by *example* (what the stream, the
memory and every counter count): a text-classification example is one row, a FewRel sentence
one row per candidate relation, a QA question one row per context window. The task kind that
makes batches (`lifelong.tasks`) also supplies the model's loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from lifelong.encoders.base import Encoder, reads_token_types
from lifelong.encoders.segments import drain_auxiliary
from lifelong.heads import reads_pooled_only
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


PADDING_SCORE = -1e4
"""Token score of a padding position: out of every span softmax and every decoded span."""


def task_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy per row for label and span heads.

    Args:
        logits: (n, num_labels) from a classification head, or (n, t, 2) start/end scores
            from a span head.
        labels: (n,) label ids, or (n, 2) start/end token positions.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (one loss per row).

    Returns:
        The loss; for spans the mean of the start and end cross-entropies (BERT's SQuAD loss).

    """
    if labels.dim() == 1:
        return nn.functional.cross_entropy(logits, labels, reduction=reduction)
    start = nn.functional.cross_entropy(logits[..., 0], labels[:, 0], reduction=reduction)
    end = nn.functional.cross_entropy(logits[..., 1], labels[:, 1], reduction=reduction)
    return (start + end) / 2


class Loss(Protocol):
    """What the model needs of a task kind to train: its loss and the loss's units."""

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The training loss over the rows of ``batch``."""
        ...

    def loss_units(self, batch: Batch) -> int:
        """How many terms `loss` averages over."""
        ...


class RowLoss:
    """The default loss: mean cross-entropy over rows (`task_loss`)."""

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean cross-entropy over the rows."""
        return task_loss(logits, batch.labels)

    def loss_units(self, batch: Batch) -> int:
        """Rows."""
        return len(batch)


class Classifier(nn.Module):
    """Encoder + head: the "example encoder" and "task decoder" of MbPA++.

    Args:
        encoder: Any module following the `Encoder` interface.
        head: Maps the encoder output to logits.
        task: Supplies the training loss (a task kind; default: mean cross-entropy over rows).

    Raises:
        ValueError: The task kind's rows carry token-type ids (its ``token_types``) and the
            encoder has no segment embeddings to read them (`reads_token_types`).

    """

    def __init__(self, encoder: Encoder, head: nn.Module, *, task: Loss | None = None) -> None:
        super().__init__()
        if getattr(task, "token_types", False) and not reads_token_types(encoder):
            raise ValueError(
                f"the {getattr(task, 'name', type(task).__name__)} task kind gives its rows "
                f"token-type ids, but the encoder {_encoder_name(encoder)} has no segment "
                "embeddings to read them; build the kind with TaskSettings(token_types=False)"
            )
        self.encoder = encoder
        self.head = head
        self.task: Loss = task if task is not None else RowLoss()

    def forward(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        *,
        start: int | None = None,
        packed: bool = False,
    ) -> torch.Tensor:
        """Return logits: (n, num_labels) from a label head, (n, t, 2) from a span head.

        Call it as ``model(*batch.inputs())`` (`Batch.inputs`).

        Args:
            x: Token ids (n, t); or, with ``start``, the representation at that stage of the
                encoder (see `HFEncoder.run_stages`).
            attention_mask: 1 for tokens, 0 for padding, shape (n, t).
            token_type_ids: Segment ids (n, t) for encoders that read them (BERT's SQuAD
                inputs); passed on only when given. With ``start`` past stage 0 the
                representation already holds them and they are not read.
            start: ``None`` for the plain forward pass from token ids.
            packed: With ``start``, run the encoder layers on the real tokens only (same
                result, less compute on padded batches; see `HFEncoder.run_stages`); a head
                that reads only the pooled vector (``reads_tokens`` False) then also has the
                last layer computed at the pooled position alone (``pooled_only``).

        Raises:
            ValueError: Token types for an encoder without segment embeddings.

        """
        types: dict[str, torch.Tensor] = {}
        if token_type_ids is not None:
            if not reads_token_types(self.encoder):
                raise ValueError(
                    f"token_type_ids given, but the encoder {_encoder_name(self.encoder)} "
                    "has no segment embeddings to read them"
                )
            types = {"token_type_ids": token_type_ids}
        if start is None:
            return self.head(self.encoder(x, attention_mask, **types))
        pooled_only = packed and reads_pooled_only(self.head)
        output = self.encoder.resume(
            x, attention_mask, start, packed=packed, pooled_only=pooled_only, **types
        )
        return self.head(output)

    def criterion(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The task's training loss of ``logits`` computed on ``batch``'s rows."""
        return self.task.loss(logits, batch)

    def loss(self, batch: Batch) -> torch.Tensor:
        """The task's training loss on the batch, plus the encoder's own regulariser if any.

        A memory encoder's regulariser (the Compressive Transformer's attention-reconstruction
        loss, the ∞-former's KL: `lifelong.encoders.segments.drain_auxiliary`) is what its
        paper trains it with; encoders without one (MiniLM, BERT) add nothing.
        """
        drain_auxiliary(self.encoder)  # nothing left from a forward whose loss was not used
        loss = self.criterion(self(*batch.inputs()), batch)
        regulariser = drain_auxiliary(self.encoder)
        return loss if regulariser is None else loss + regulariser

    def loss_units(self, batch: Batch) -> int:
        """How many terms the loss averages over on ``batch`` (rows or examples)."""
        return self.task.loss_units(batch)


def _encoder_name(encoder: nn.Module) -> str:
    return repr(getattr(encoder, "name", "") or type(encoder).__name__)
