"""The frozen key network that turns inputs into memory keys."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from lifelong.batch import Batch


class KeyEncoder:
    """A frozen copy of a pre-trained encoder whose raw [CLS] vector is the memory key.

    The key is the last layer's hidden state at [CLS] (or at ``position``), not the pooler's
    output, as EM-in-LLL's ``memory.py`` reads it (``outputs[0][:, 0, :]``).

    One key per example: the task kind gives one key row per example (`TaskKind.key_rows`), with
    its token-type ids when the kind's rows have them (QA: the first window's).

    MbPA++ keeps the key network fixed so that keys do not drift as the example encoder learns;
    this class copies the encoder it is given at construction and never updates the copy.

    Args:
        encoder: The pre-trained encoder (copied; the original stays trainable).
        batch_size: Rows per forward pass when encoding many inputs.
        position: Key on this token's vector instead of [CLS]'s (QA keys on the first question
            token, position 1, as MbPA++ does, §3).

    """

    def __init__(
        self, encoder: nn.Module, batch_size: int = 64, position: int | None = None
    ) -> None:
        self.encoder = copy.deepcopy(encoder).eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        self.batch_size = batch_size
        self.position = 0 if position is None else position
        self.dim: int = encoder.hidden_size

    @torch.no_grad()
    def __call__(self, batch: Batch) -> np.ndarray:
        """Return keys of shape (b, dim), float32."""
        keys = []
        for start in range(0, len(batch), self.batch_size):
            part = slice(start, start + self.batch_size)
            encoded = self.encoder(*(x[part] for x in batch.inputs()))  # token types too, if any
            vectors = encoded.hidden[:, self.position]  # (b, d)
            keys.append(vectors.float().cpu().numpy())  # (b, d)
        return np.concatenate(keys).astype(np.float32)
