"""The trainable model (encoder + head) and the loss it trains by.

The model reads a `lifelong.batch.Batch` (rows grouped by example); the task kind that makes
batches (`lifelong.tasks`) also supplies the model's loss.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

import torch
from torch import nn

from lifelong._deprecated import deprecated_alias
from lifelong.batch import Batch
from lifelong.encoders.base import Encoder, reads_token_types
from lifelong.encoders.segments import drain_auxiliary
from lifelong.heads import reads_pooled_only

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
        kind: Supplies the training loss (a task kind; default: mean cross-entropy over rows).
        task: Deprecated name of ``kind``.

    Raises:
        ValueError: The task kind's rows carry token-type ids (its ``token_types``) and the
            encoder has no segment embeddings to read them (`reads_token_types`).

    """

    runs_from_stages: ClassVar[bool] = True
    """Called on a stage's hidden states (``start``), it runs only the stages above: the cost
    meter counts those stages' and the head's calls, not the whole model (`lifelong.cost`)."""

    def __init__(
        self,
        encoder: Encoder,
        head: nn.Module,
        *,
        kind: Loss | None = None,
        task: Loss | None = None,
    ) -> None:
        super().__init__()
        if task is not None:
            deprecated_alias("Classifier(task=...)", "Classifier(kind=...)")
            kind = task if kind is None else kind
        if getattr(kind, "token_types", False) and not reads_token_types(encoder):
            raise ValueError(
                f"the {getattr(kind, 'name', type(kind).__name__)} task kind gives its rows "
                f"token-type ids, but the encoder {_encoder_name(encoder)} has no segment "
                "embeddings to read them; build the kind with TaskSettings(token_types=False)"
            )
        self.encoder = encoder
        self.head = head
        self.kind: Loss = kind if kind is not None else RowLoss()

    @property
    def task(self) -> Loss:
        """Deprecated alias of `kind` ("task" names a stream's task; this is its kind)."""
        deprecated_alias("Classifier.task", "Classifier.kind")
        return self.kind

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
        return self.kind.loss(logits, batch)

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
        return self.kind.loss_units(batch)


def _encoder_name(encoder: nn.Module) -> str:
    return repr(getattr(encoder, "name", "") or type(encoder).__name__)
