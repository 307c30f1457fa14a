"""Text classification: one row per example, a linear head over the merged label space.

The record of an example is its token ids (``[CLS] text [SEP]``, or ``[CLS] text [SEP] pair
[SEP]``, cut to ``max_length``) and its label; the row is the record itself, and so is the key
row: MbPA++ keys memory by the key network's [CLS] vector (de Masson d'Autume et al., 2019, §3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from lifelong.batch import Batch
from lifelong.heads import ClassificationHead
from lifelong.memory.records import ExampleRecords
from lifelong.model import task_loss
from lifelong.tasks.base import Settings, TaskSettings, pad_rows

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase as Tokenizer

    from lifelong.streams.core import Example


class Classification:
    """The text-classification task kind (accuracy over argmax labels).

    Args:
        tokenizer: A Hugging Face tokenizer.
        labels: The merged label space's names (its size is the head's).
        settings: ``max_length`` is read.

    """

    name: ClassVar[str] = "classification"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    stored_fields: ClassVar[tuple[str, ...]] = ("tokens", "label")

    def __init__(self, tokenizer: Tokenizer, labels: Sequence[str] = (), settings: Settings = None):
        settings = settings or TaskSettings()
        self.tokenizer = tokenizer
        self.num_labels = len(labels)
        self.max_length = settings.max_length
        self.pad_id: int = tokenizer.pad_token_id or 0
        self.key_position: int | None = None  # the pooled [CLS] vector
        self.token_types = False  # single-segment rows: the encoder reads segment 0 throughout

    def __call__(self, examples: Sequence[Example]) -> Batch:
        """Rows of ``examples``."""
        return self.rows(self.encode(examples))

    def encode(self, examples: Sequence[Example]) -> ExampleRecords:
        """Token ids (with special tokens, cut to ``max_length``) and label of each example."""
        texts = [e.text for e in examples]
        pairs = [e.text_pair for e in examples]
        enc = self.tokenizer(
            texts,
            pairs if any(p is not None for p in pairs) else None,
            truncation=True,
            max_length=self.max_length,
        )
        return ExampleRecords.build(tokens=enc["input_ids"], label=[[e.label] for e in examples])

    def rows(self, records: ExampleRecords) -> Batch:
        """One padded row per example."""
        ids, mask = pad_rows(records["tokens"], self.pad_id)
        labels = torch.as_tensor(np.concatenate(records["label"]), dtype=torch.long)  # (n,)
        return Batch(ids, mask, labels, examples=records)

    def key_rows(self, records: ExampleRecords) -> Batch:
        """The rows themselves (keyed at [CLS])."""
        return self.rows(records)

    def head(self, hidden_size: int) -> ClassificationHead:
        """A linear head over the pooled vector, one output per label."""
        return ClassificationHead(hidden_size, self.num_labels)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean cross-entropy over the batch."""
        return task_loss(logits, batch.labels)

    def loss_units(self, batch: Batch) -> int:
        """Examples (= rows)."""
        return len(batch)

    def example_losses(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Cross-entropy of each example, (n,)."""
        return task_loss(logits, batch.labels, reduction="none")

    def lengths(self, examples: Sequence[Example]) -> np.ndarray | None:
        """``None``: lengths are known only once tokenised (`TaskKind.lengths`)."""
        return None

    def score(
        self, scores: torch.Tensor, batch: Batch, examples: Sequence[Example]
    ) -> dict[str, float]:
        """Correct argmax labels among the batch's examples."""
        return {"accuracy": float((scores.argmax(dim=-1) == batch.labels).sum())}
