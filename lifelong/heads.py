"""Prediction heads on top of an encoder's output."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput


def reads_pooled_only(head: nn.Module) -> bool:
    """Whether ``head`` reads the pooled vector alone (its ``reads_tokens`` is False).

    Local adaptation then keeps only [CLS] in its caches and computes the last layer there
    only. A head that does not declare ``reads_tokens`` is taken to read every token.
    """
    return getattr(head, "reads_tokens", True) is False


class SpanHead(nn.Module):
    """Start and end scores for every token (BERT's SQuAD head): a linear layer over tokens.

    Args:
        hidden_size: Width of the encoder's token vectors.

    """

    reads_tokens: ClassVar[bool] = True  # local adaptation must keep every token's vector

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 2)

    def forward(self, encoded: EncoderOutput) -> torch.Tensor:
        """Return start/end logits of shape (b, t, 2)."""
        return self.linear(encoded.hidden)


class ClassificationHead(nn.Module):
    """A linear layer over the pooled vector, scoring every label of the merged label space.

    Args:
        hidden_size: Width of the encoder's pooled vector.
        num_labels: Size of the label space.
        dropout: Dropout on the pooled vector while training.

    """

    reads_tokens: ClassVar[bool] = False  # only the pooled vector: caches may keep [CLS] alone

    def __init__(self, hidden_size: int, num_labels: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, num_labels)

    def forward(self, encoded: EncoderOutput) -> torch.Tensor:
        """Return logits of shape (b, num_labels)."""
        return self.linear(self.dropout(encoded.pooled))


class CosineHead(nn.Module):
    """A cosine classifier: scaled cosine similarity of the pooled vector and each label's row.

    ``logits = scale · normalize(pooled) · normalize(W)ᵀ``, no bias: the ``CosineLinear`` of
    Zheng et al.'s SEQ* (2024; reference ``utils/classifier.py``), which has no scale. With 33
    labels and one pass over the data, unscaled cosines (in [−1, 1]) give a nearly flat
    softmax that cross-entropy moves slowly; ``scale`` (16 by default, as cosine classifiers
    are usually scaled) is our deviation, stated in the README.

    Args:
        hidden_size: Width of the encoder's pooled vector.
        num_labels: Size of the label space.
        scale: The factor on the cosines.

    """

    reads_tokens: ClassVar[bool] = False

    def __init__(self, hidden_size: int, num_labels: int, scale: float = 16.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_labels, hidden_size))
        nn.init.normal_(self.weight, std=hidden_size**-0.5)
        self.scale = scale

    def forward(self, encoded: EncoderOutput) -> torch.Tensor:
        """Return logits of shape (b, num_labels)."""
        x = nn.functional.normalize(encoded.pooled.float(), dim=-1)  # (b, d)
        w = nn.functional.normalize(self.weight.float(), dim=-1)  # (L, d)
        return self.scale * x @ w.T
