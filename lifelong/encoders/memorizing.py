"""Memorizing Transformer (Wu et al., 2022): kNN attention over a key-value episodic memory.

One layer of an otherwise plain Transformer (by default the one below the top) is a
kNN-augmented attention layer. Per head, it keeps the (key, value) pairs of the previous segments
of the document in an external memory (FIFO-bounded at ``memory_size`` pairs per sample and
head). Each query retrieves its top-``k`` keys and attends over them; the same queries also
attend over the current segment as usual (causally when ``config.causal``). A learned per-head
gate ``g = sigmoid(b_g)`` mixes the two: ``out = g * memory + (1 - g) * local``.

As in the paper, queries and keys are L2-normalised along the head dimension (QK-norm, both for
the local attention and for the memory) and scaled by a learned per-head temperature, so the
scores are scaled cosine similarities and old and new keys have the same magnitude. The
memory is stored detached: no gradient flows into it, and the gradient of a segment's loss does
not reach earlier segments through it.

The search is the project's episodic memory (`lifelong.memory.EpisodicMemory`, one per sample
and head, keyed by the stored keys, ``index: auto``), which searches by L2 distance: each key
carries one more coordinate so that its nearest keys are those of largest inner product, the
paper's search (see `_store`). ``auto`` searches exactly while a store is small and
approximately beyond (an IVF index checked for recall), as the paper's approximate kNN.

Differences from the paper, all deliberate simplifications: absolute learned positions (the
shared `TokenEmbedding`) instead of T5 relative position biases for the local attention and no
Transformer-XL cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least, check_positive, check_segment_inputs
from lifelong.encoders.layers import (
    FeedForward,
    ModuleConfig,
    TokenEmbedding,
    TransformerLayer,
    attend,
    merge_heads,
    segment_mask,
    split_heads,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool
from lifelong.memory import EpisodicMemory, ExampleRecords

POSITION = "position"
"""The stores' value field: where the pair sits in `SampleMemory.keys` / ``values``."""


def _store(keys: torch.Tensor) -> EpisodicMemory:
    """An episodic memory holding ``keys`` (n, d_h) in order: slot i is position i.

    The memory searches by L2 distance; to find the keys of largest inner product exactly
    (whatever their norms), each key gets one more coordinate, √(M² − ‖k‖²) with M the
    largest norm, and each query a 0 there (`_search_queries`): then ‖q − k‖² = ‖q‖² + M² −
    2 q·k, smallest where q·k is largest (Bachrach et al., 2014). The module's keys are unit
    vectors, so the extra coordinate is 0 for them.
    """
    keys = keys.detach().float().cpu().numpy()  # (n, d_h)
    memory = EpisodicMemory(keys.shape[-1] + 1, device="cpu")
    if keys.shape[0]:
        norms = np.einsum("nd,nd->n", keys, keys)  # (n,)
        extra = np.sqrt(np.maximum(norms.max() - norms, 0.0))[:, None]  # (n, 1)
        positions = np.arange(keys.shape[0], dtype=np.int32)[:, None]
        memory.write(ExampleRecords.build(position=positions), np.hstack([keys, extra]))
    return memory


def _search_queries(queries: np.ndarray) -> np.ndarray:
    """Queries (t, d_h) with the 0 coordinate `_store`'s keys carry last: (t, d_h + 1)."""
    return np.ascontiguousarray(np.pad(queries, ((0, 0), (0, 1))), dtype=np.float32)


@dataclass(frozen=True, eq=False)
class SampleMemory:
    """The external memory of one sample: per head, its stored (key, value) pairs, oldest first.

    Immutable: `append` returns a new memory, so one memory can be read by several forward
    passes (e.g. two continuations of the same document).

    Attributes:
        keys: Stored keys (h, n, d_h), detached (L2-normalised by the module).
        values: Stored values (h, n, d_v), detached.
        stores: One episodic memory per head, holding ``keys[h]`` in slots ``0..n-1`` (the
            positions in ``keys`` and ``values``).

    """

    keys: torch.Tensor
    values: torch.Tensor
    stores: tuple[EpisodicMemory, ...]

    @classmethod
    def from_tensors(cls, keys: torch.Tensor, values: torch.Tensor) -> SampleMemory:
        """A memory holding ``keys`` (h, n, d_h) and ``values`` (h, n, d_v), oldest first."""
        keys, values = keys.detach(), values.detach()
        return cls(keys, values, tuple(_store(head) for head in keys))

    @classmethod
    def empty(
        cls,
        heads: int,
        head_size: int,
        *,
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> SampleMemory:
        """An empty memory for ``heads`` heads of width ``head_size``."""
        nothing = torch.zeros(heads, 0, head_size, device=device, dtype=dtype)  # (h, 0, d_h)
        return cls.from_tensors(nothing, nothing)

    @property
    def size(self) -> int:
        """Stored pairs per head."""
        return int(self.keys.shape[1])

    def append(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> SampleMemory:
        """The memory with ``keys`` (h, n, d_h) and ``values`` (h, n, d_v) appended.

        Only the newest ``capacity`` pairs are kept (FIFO: the oldest are evicted first). The
        stores are rebuilt from the kept keys, which keeps slots equal to positions.
        """
        if keys.shape[1] == 0:
            return self
        all_keys = torch.cat([self.keys, keys.detach()], dim=1)[:, -capacity:]  # (h, n', d_h)
        all_values = torch.cat([self.values, values.detach()], dim=1)[:, -capacity:]
        return SampleMemory.from_tensors(all_keys, all_values)


@dataclass(frozen=True, eq=False)
class KNNMemory:
    """The external memories of a batch, one `SampleMemory` per row.

    Attributes:
        samples: One memory per row of the batch.

    """

    samples: tuple[SampleMemory, ...]

    def __len__(self) -> int:
        return len(self.samples)

    def sizes(self) -> list[int]:
        """Stored pairs per head, for each row."""
        return [sample.size for sample in self.samples]

    def stores(self) -> list[tuple[EpisodicMemory, ...]]:
        """Per row, the per-head episodic memories."""
        return [sample.stores for sample in self.samples]

    def padded(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows' memories zero-padded to a common length.

        Returns:
            Keys (b, h, m, d_h), values (b, h, m, d_v) and the number of valid (leading)
            entries of each row, ``lengths`` (b,).

        """
        longest = max(self.sizes())
        keys = [F.pad(s.keys, (0, 0, 0, longest - s.size)) for s in self.samples]
        values = [F.pad(s.values, (0, 0, 0, longest - s.size)) for s in self.samples]
        lengths = torch.tensor(self.sizes(), device=self.samples[0].keys.device)  # (b,)
        return torch.stack(keys), torch.stack(values), lengths

    def write(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        attention_mask: torch.Tensor,
        capacity: int,
    ) -> KNNMemory:
        """Append a segment's real tokens' pairs to each row's memory (FIFO, ``capacity``).

        Args:
            keys: The segment's keys (b, h, t, d_h).
            values: The segment's values (b, h, t, d_v).
            attention_mask: (b, t), 1 = real token; padded positions are never written. A row
                with no real token keeps its memory object unchanged.
            capacity: Most pairs kept per row and head.

        Returns:
            The new memory (this one is left unchanged).

        """
        real = attention_mask.bool()  # (b, t)
        samples = tuple(
            sample.append(keys[i][:, real[i]], values[i][:, real[i]], capacity)
            for i, sample in enumerate(self.samples)
        )
        return KNNMemory(samples)


def dense_memory_attention(
    q: torch.Tensor,
    memory_keys: torch.Tensor,
    memory_values: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention of every query over every (allowed) memory entry: the dense reference.

    Args:
        q: Queries (b, h, t, d_h).
        memory_keys: Memory keys (b, h, m, d_h).
        memory_values: Memory values (b, h, m, d_v).
        mask: Boolean, broadcastable to (b, h, t, m), True where a query may read an entry. A
            query with no allowed entry gets zeros.
        scale: Score scale; ``1 / sqrt(d_h)`` by default.

    Returns:
        The attended values (b, h, t, d_v).

    """
    out, _ = attend(q, memory_keys, memory_values, mask, scale=scale)
    return out


def knn_search(q: torch.Tensor, stores: Sequence[Sequence[EpisodicMemory]], k: int) -> torch.Tensor:
    """Ids of the top-``k`` keys of every query, searched in the episodic memories.

    Args:
        q: Queries (b, h, t, d_h); the keys found are those of largest inner product
            (see `_store`).
        stores: Per row, one episodic memory per head.
        k: Neighbours per query.

    Returns:
        Ids (b, h, t, k) long on ``q``'s device, best first; -1 where a store holds fewer than
        ``k`` entries.

    """
    b, h, t, _ = q.shape
    if len(stores) != b or any(len(row) != h for row in stores):
        raise ValueError(f"stores must be {b} rows of {h} per-head memories")
    queries = q.detach().float().cpu().numpy()  # (b, h, t, d_h)
    ids = np.full((b, h, t, k), -1, dtype=np.int64)
    for i, row in enumerate(stores):
        for head, store in enumerate(row):
            if len(store):
                _, found = store.nearest(_search_queries(queries[i, head]), k)  # (t, <=k)
                ids[i, head, :, : found.shape[1]] = found
    return torch.from_numpy(ids).to(q.device)


def knn_memory_attention(
    q: torch.Tensor,
    memory_keys: torch.Tensor,
    memory_values: torch.Tensor,
    k: int,
    *,
    lengths: torch.Tensor | None = None,
    scale: float | None = None,
    stores: Sequence[Sequence[EpisodicMemory]] | None = None,
) -> torch.Tensor:
    """Attention of every query over its own top-``k`` memory entries by inner product.

    The neighbours are found in the episodic memories (`knn_search`); the scores over them are
    recomputed in torch, so the result is differentiable with respect to ``q`` (and the memory
    tensors). With ``k`` at least the memory size it equals `dense_memory_attention`.

    Args:
        q: Queries (b, h, t, d_h).
        memory_keys: Memory keys (b, h, m, d_h).
        memory_values: Memory values (b, h, m, d_v).
        k: Neighbours per query (``min(k, m)`` are used).
        lengths: Valid leading entries of each row's memory (b,); all ``m`` by default. A row
            with an empty memory gets zeros.
        scale: Score scale; ``1 / sqrt(d_h)`` by default.
        stores: Per row, one episodic memory per head holding that row's valid keys in slots
            equal to their positions; built from ``memory_keys`` when not given.

    Returns:
        The attended values (b, h, t, d_v).

    Raises:
        ValueError: If ``k`` is not positive or the shapes disagree.

    """
    if k < 1:
        raise ValueError(f"k must be a positive number of neighbours, got {k}")
    b, h, t, d_h = q.shape
    if memory_keys.shape[:2] != (b, h) or memory_keys.shape[-1] != d_h:
        raise ValueError(
            f"memory_keys must be ({b}, {h}, m, {d_h}), got {tuple(memory_keys.shape)}"
        )
    if memory_values.shape[:3] != memory_keys.shape[:3]:
        raise ValueError(
            f"memory_values must be {tuple(memory_keys.shape[:3])} + (d_v,), "
            f"got {tuple(memory_values.shape)}"
        )
    m = memory_keys.shape[2]
    if lengths is None:
        lengths = torch.full((b,), m, dtype=torch.long)
    if stores is None:
        stores = [
            [_store(memory_keys[i, head, : int(lengths[i])]) for head in range(h)] for i in range(b)
        ]
    if m == 0:
        return q.new_zeros(b, h, t, memory_values.shape[-1])
    ids = knn_search(q, stores, min(k, m))  # (b, h, t, k)
    found = ids >= 0  # (b, h, t, k)
    ids = ids.clamp(min=0)
    rows = torch.arange(b, device=q.device)[:, None, None, None]
    heads = torch.arange(h, device=q.device)[None, :, None, None]
    keys = memory_keys[rows, heads, ids]  # (b, h, t, k, d_h)
    values = memory_values[rows, heads, ids]  # (b, h, t, k, d_v)
    scale = 1.0 / math.sqrt(d_h) if scale is None else scale
    scores = torch.einsum("bhtd,bhtkd->bhtk", q, keys) * scale  # (b, h, t, k)
    scores = scores.masked_fill(~found, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1) * found  # rows with nothing found -> zeros
    return torch.einsum("bhtk,bhtkd->bhtd", weights, values)  # (b, h, t, d_v)


class KNNAugmentedAttention(nn.Module):
    """Multi-head attention over the segment and, per query, its top-k memory entries.

    Args:
        config: Module sizes (``d_model``, ``heads``, ``dropout``).
        k: Neighbours retrieved per query and head.
        initial_scale: Initial per-head temperature multiplying the cosine scores.
        initial_gate: Initial gate bias ``b_g`` (0 gives ``g = 0.5``).

    """

    def __init__(
        self, config: ModuleConfig, k: int, *, initial_scale: float, initial_gate: float
    ) -> None:
        super().__init__()
        self.heads = config.heads
        self.k = k
        d = config.d_model
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.output = nn.Linear(d, d)
        self.log_scale = nn.Parameter(torch.full((config.heads,), math.log(initial_scale)))
        self.gate_bias = nn.Parameter(torch.full((config.heads,), float(initial_gate)))
        self.dropout = nn.Dropout(config.dropout)

    def gate(self) -> torch.Tensor:
        """The per-head memory gate ``sigmoid(b_g)`` (h,)."""
        return torch.sigmoid(self.gate_bias)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, memory: KNNMemory
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Attend from the segment ``x`` (b, t, d) to itself and to ``memory``.

        Args:
            x: The segment's vectors (b, t, d).
            mask: Local attention mask, broadcastable to (b, h, t, t), True = may attend.
            memory: The previous segments' pairs (read only).

        Returns:
            The output (b, t, d), and the segment's normalised keys (b, h, t, d_h) and values
            (b, h, t, d_h), detached, for writing into the memory.

        """
        scale = self.log_scale.exp()[None, :, None, None]  # (1, h, 1, 1)
        q = F.normalize(split_heads(self.query(x), self.heads), dim=-1) * scale  # (b, h, t, d_h)
        keys = F.normalize(split_heads(self.key(x), self.heads), dim=-1)  # (b, h, t, d_h)
        values = split_heads(self.value(x), self.heads)  # (b, h, t, d_h)
        out, _ = attend(q, keys, values, mask, scale=1.0)  # (b, h, t, d_h)
        if max(memory.sizes()) > 0:
            out = self._mix_memory(q, out, memory)
        out = self.dropout(self.output(merge_heads(out)))  # (b, t, d)
        return out, keys.detach(), values.detach()

    def _mix_memory(self, q: torch.Tensor, local: torch.Tensor, memory: KNNMemory) -> torch.Tensor:
        """``g * memory + (1 - g) * local`` per head; rows with an empty memory keep ``local``."""
        memory_keys, memory_values, lengths = memory.padded()  # (b, h, m, d_h) x2, (b,)
        remembered = knn_memory_attention(
            q,
            memory_keys,
            memory_values,
            self.k,
            lengths=lengths,
            scale=1.0,
            stores=memory.stores(),
        )  # (b, h, t, d_h)
        has_memory = (lengths > 0).to(q.dtype)[:, None, None, None]  # (b, 1, 1, 1)
        gate = self.gate()[None, :, None, None] * has_memory  # (b, h, 1, 1)
        return gate * remembered + (1.0 - gate) * local


class KNNAugmentedLayer(nn.Module):
    """Post-LN layer (as `TransformerLayer`) whose self-attention also reads the kNN memory."""

    def __init__(
        self, config: ModuleConfig, k: int, *, initial_scale: float, initial_gate: float
    ) -> None:
        super().__init__()
        self.attention = KNNAugmentedAttention(
            config, k, initial_scale=initial_scale, initial_gate=initial_gate
        )
        self.norm1 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, memory: KNNMemory
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(b, t, d) -> (b, t, d), plus the keys and values to store (see the attention)."""
        attended, keys, values = self.attention(x, mask, memory)
        x = self.norm1(x + attended)
        return self.norm2(x + self.ffn(x)), keys, values


class MemorizingTransformer(SegmentEncoder):
    """A Transformer with one kNN-augmented attention layer over a per-document FAISS memory.

    The memory (`KNNMemory`) holds, per sample and head, the detached (key, value) pairs of the
    memory layer for the real tokens of the previous segments, at most ``memory_size`` of them
    (oldest evicted first). The current segment's pairs are added after the segment has been
    processed, so a token never reads its own segment through the memory; within the segment
    the local attention is causal when ``config.causal``. Padded tokens are never stored, and a
    row whose segment is entirely padding keeps its memory object unchanged.

    Args:
        config: Module sizes.
        memory_size: Most stored pairs per sample and head (FIFO).
        k: Neighbours each query retrieves per head (all stored pairs when fewer).
        memory_layer: Index of the kNN-augmented layer; the layer below the top by default (the
            only layer when there is one).
        initial_scale: Initial per-head temperature of the QK-normalised scores.
        initial_gate: Initial gate bias ``b_g`` of every head (``g = sigmoid(b_g)``).

    Raises:
        ValueError: For a non-positive ``memory_size``, ``k`` or ``initial_scale``, or a
            ``memory_layer`` outside ``[0, config.layers)``.

    """

    def __init__(
        self,
        config: ModuleConfig,
        memory_size: int,
        k: int,
        *,
        memory_layer: int | None = None,
        initial_scale: float = 10.0,
        initial_gate: float = 0.0,
    ) -> None:
        super().__init__(config)
        check_at_least(1, memory_size=memory_size, k=k)
        check_positive(initial_scale=initial_scale)
        memory_layer = max(config.layers - 2, 0) if memory_layer is None else memory_layer
        if not 0 <= memory_layer < config.layers:
            raise ValueError(f"memory_layer must be in [0, {config.layers}), got {memory_layer}")
        self.memory_size = memory_size
        self.k = k
        self.memory_layer = memory_layer
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(
            KNNAugmentedLayer(config, k, initial_scale=initial_scale, initial_gate=initial_gate)
            if i == memory_layer
            else TransformerLayer(config)
            for i in range(config.layers)
        )

    def initial_memory(self, batch_size: int, device: torch.device | None = None) -> KNNMemory:
        """Empty memories for a batch of new documents."""
        dtype = self.embed.words.weight.dtype
        empty = SampleMemory.empty(
            self.config.heads, self.config.head_size, device=device, dtype=dtype
        )
        return KNNMemory((empty,) * batch_size)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) reading and then extending the memory.

        ``memory`` is a `KNNMemory` of ``b`` rows from the previous segment, or None to start new
        documents.

        Returns:
            ``EncoderOutput(hidden (b, t, d), pooled (b, d), memory)`` with the new memory.

        Raises:
            ValueError: If the shapes disagree or ``memory`` is not a `KNNMemory` of ``b`` rows.

        """
        check_segment_inputs(input_ids, attention_mask)
        b = input_ids.shape[0]
        if memory is None:
            memory = self.initial_memory(b, input_ids.device)
        elif not isinstance(memory, KNNMemory) or len(memory) != b:
            raise ValueError(f"memory must be None or a KNNMemory of {b} rows, got {memory!r}")
        x = self.embed(input_ids)  # (b, t, d)
        mask = segment_mask(attention_mask, self.config.causal)  # (b, 1, t, t)
        new_memory = memory
        for i, layer in enumerate(self.layers):
            if i == self.memory_layer:
                x, keys, values = layer(x, mask, memory)  # keys, values (b, h, t, d_h)
                new_memory = memory.write(keys, values, attention_mask, self.memory_size)
            else:
                x = layer(x, mask)
        return EncoderOutput(hidden=x, pooled=mean_pool(x, attention_mask), memory=new_memory)

    def merge_memory(self, updated: Any, previous: Any, rows: torch.Tensor) -> Any:
        """Row-wise: ``updated`` where ``rows`` (b,) is True, ``previous`` elsewhere.

        The module already leaves a row whose segment is all padding unchanged, so this only
        matters when the two memories come from elsewhere.
        """
        if previous is None:
            return updated
        samples = tuple(
            new if bool(keep) else old
            for new, old, keep in zip(updated.samples, previous.samples, rows.tolist())
        )
        return KNNMemory(samples)


__all__ = [
    "KNNAugmentedAttention",
    "KNNAugmentedLayer",
    "KNNMemory",
    "MemorizingTransformer",
    "SampleMemory",
    "dense_memory_attention",
    "knn_memory_attention",
    "knn_search",
]
