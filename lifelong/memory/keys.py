"""The frozen key network that turns inputs into memory keys."""

from __future__ import annotations

import copy
import hashlib
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

    On the CPU (`packs_keys`) a BERT-style encoder (`HFEncoder.packs`) is run packed, on the
    real tokens only, and when the key is [CLS]'s its last layer is computed at [CLS] alone (its
    keys and values still read every token: `HFEncoder.run_stages`, ``pooled_only``): the same
    key as the padded forward pass, up to float rounding (max |Δ| 1.4e-6 on MiniLM), for less
    compute (1.61x faster on 640 real test rows at 64 tokens:
    ``experiments/bench/evaluation.py``).

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
            vectors = self._vectors(*(x[part] for x in batch.inputs()))  # (b, d)
            keys.append(vectors.float().cpu().numpy())  # (b, d)
        return np.concatenate(keys).astype(np.float32)

    def _vectors(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The key position's final hidden state (b, d): packed where the encoder can be."""
        if not (packs_keys(ids.device) and getattr(self.encoder, "packs", False)):
            types = () if token_type_ids is None else (token_type_ids,)
            return self.encoder(ids, mask, *types).hidden[:, self.position]
        first_only = self.position == 0 and bool(mask[:, 0].bool().all())  # [CLS] is first
        hidden = self.encoder.run_stages(
            ids,
            mask,
            0,
            self.encoder.num_layers + 1,
            token_type_ids=token_type_ids,
            packed=True,
            pooled_only=first_only,
        )  # (b, t, d); zeros at padding (and past [CLS] with pooled_only)
        return hidden[:, self.position]


def packs_keys(device: torch.device) -> bool:
    """Whether the key network runs packed on ``device``: on the CPU only.

    Packing finds the real tokens with data-dependent shapes, which on a GPU makes the host wait
    for the device (5 more host syncs per Meta-MbPA step on FewRel, counted by the CUDA
    emulation tests), while the padded pass has none there and its padding costs little; the
    saving was measured on the CPU.
    """
    return torch.device(device).type == "cpu"


QUERY_CACHE_BYTES = 256 * 2**20
"""Most bytes of keys `QueryKeys` keeps (past it, further batches are keyed each time)."""


class QueryKeys:
    """The keys of query batches, each batch keyed once: the key network never changes.

    MbPA++ retrieves with the test inputs' keys at every evaluation (after each task: five
    times on a five-task stream), and the frozen key network gives the same keys each time:
    of the budget run's 7,500 key passes over test rows, 6,000 repeated an earlier one (issue
    67). A batch is recognised by a digest of its inputs (token ids, mask, token types), so the
    keys returned are the very array the first call computed, exactly what a new pass would
    give for the same batch.

    Args:
        encoder: The key network.
        limit_bytes: Most bytes of keys kept.

    """

    def __init__(self, encoder: KeyEncoder, limit_bytes: int = QUERY_CACHE_BYTES) -> None:
        self.encoder = encoder
        self.limit_bytes = limit_bytes
        self.cached: dict[bytes, np.ndarray] = {}
        self.held = 0  # bytes of keys kept
        self.hits = 0  # batches answered from the cache

    def __call__(self, batch: Batch) -> np.ndarray:
        """Keys (b, dim) of ``batch``'s rows; a copy, so callers may change it."""
        digest = batch_digest(batch)
        keys = self.cached.get(digest)
        if keys is not None:
            self.hits += 1
            return keys.copy()
        keys = self.encoder(batch)
        if self.held + keys.nbytes <= self.limit_bytes:
            self.cached[digest] = keys.copy()
            self.held += keys.nbytes
        return keys


def batch_digest(batch: Batch) -> bytes:
    """A digest of a batch's model inputs: their shapes, dtypes and values."""
    digest = hashlib.blake2b(digest_size=20)
    for tensor in batch.inputs():
        digest.update(f"{tuple(tensor.shape)}{tensor.dtype};".encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.digest()
