"""Transformer-XL and the Compressive Transformer: segment-level recurrence with a token cache.

`TransformerXL` (Dai et al. 2019) caches, for every layer, the last ``memory_length`` vectors
that entered that layer; the next segment attends over ``[memory; segment]`` with relative
positional attention, and no gradient crosses segments (the cache is detached).
`CompressiveTransformer` (Rae et al. 2020) does not drop what falls out of that FIFO: it
compresses the evicted vectors by a rate ``c`` into a second FIFO of ``compressed_length`` slots
and attends over ``[compressed memory; memory; segment]``; its compression network is trained by
the attention-reconstruction loss exposed through `auxiliary_loss`. ERNIE-Doc's enhanced
recurrence (Ding et al. 2021, section 3.2: ``h̃^{n−1}_{τ+1} = [SG(h^n_τ) ∘ h^{n−1}_{τ+1}]``) is
`TransformerXL` with ``recurrence="same-layer"``: layer n caches its own output, so the context
a cache carries grows with every segment instead of stopping at ``layers × memory_length``.

Padding. A memory is a fixed number of slots per layer plus a validity mask ``(b, m)``. Only real
tokens (``attention_mask`` 1) are written: the cache keeps each row's most recent real vectors,
right-aligned, and invalid slots are zero and never attended. Relative distances count real
positions only, so a row reads the same whatever padding sits between its tokens.

Memory structure (batch-first, so the default `SegmentEncoder.merge_memory` applies)::

    {"states": [(b, m, d)] * layers, "mask": (b, m) bool}                       # TransformerXL
    {..., "compressed": [(b, n_c, d)] * layers, "compressed_mask": (b, n_c) bool}  # Compressive
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least, check_segment_inputs
from lifelong.encoders.layers import (
    FeedForward,
    ModuleConfig,
    TokenEmbedding,
    attend,
    causal_mask,
    merge_heads,
    split_heads,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool

COMPRESSIONS = ("conv", "mean", "max")
Relative = torch.Tensor | tuple[torch.Tensor, ...]
"""Relative-position tables (or their per-pair indices): one, or one per kind of distance."""


class RelativePositions(NamedTuple):
    """Where a segment's queries stand relative to ``[context; segment]``: what every layer reads.

    Attributes:
        tables: Sinusoidal embeddings of every distance in range (n_rel, d); or one such table
            per kind of distance (Segatron's token, sentence and paragraph distances, each in
            its own block of the width), whose terms add up.
        index: (b, t, p + t) row of ``tables`` for each (query, key) pair (one per table).
        mask: Boolean (b, 1, t, p + t), True = may attend.

    """

    tables: Relative
    index: Relative
    mask: torch.Tensor


RECURRENCES = ("previous-layer", "same-layer")


def sinusoidal_embedding(distances: torch.Tensor, d_model: int) -> torch.Tensor:
    """Sinusoidal embeddings of (possibly negative) relative distances.

    Args:
        distances: Distances (n,), any real values.
        d_model: Embedding width (even).

    Returns:
        ``[sin(distance * f); cos(distance * f)]`` with ``f_k = 10000^(-2k / d_model)``, (n, d).

    """
    inv_freq = 1.0 / (
        10_000 ** (torch.arange(0, d_model, 2, device=distances.device).float() / d_model)
    )  # (d / 2,)
    angles = distances.float()[:, None] * inv_freq[None, :]  # (n, d / 2)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # (n, d)


def relative_distances(key_valid: torch.Tensor, t: int) -> torch.Tensor:
    """Query-key distances counted in real positions only.

    Args:
        key_valid: (b, s) bool validity of the keys; the last ``t`` keys are the queries.
        t: Number of queries.

    Returns:
        (b, t, s) long: ``position(query) - position(key)``, where a position is the number of
        valid keys before it (padding and empty memory slots take no position).

    """
    positions = key_valid.long().cumsum(dim=1) - 1  # (b, s)
    queries = positions[:, -t:]  # (b, t)
    return queries[:, :, None] - positions[:, None, :]  # (b, t, s)


def distance_range(t: int, s: int, causal: bool, device: torch.device) -> torch.Tensor:
    """Every query-key distance that can occur, (n_rel,): from 0 (causal) or 1 − t to s − 1."""
    low = 0 if causal else -(t - 1)
    return torch.arange(low, s, device=device)


def relative_positions(
    key_valid: torch.Tensor,
    t: int,
    config: ModuleConfig,
    dtype: torch.dtype,
    *,
    window: int | None = None,
) -> RelativePositions:
    """What `RelativeAttention` reads for ``t`` queries that are the last ``t`` of the keys.

    Args:
        key_valid: (b, s) bool validity of ``[context; segment]``.
        t: Number of queries (the segment's length).
        config: Module sizes (``d_model``, ``causal``).
        dtype: The embeddings' dtype.
        window: If given, a query sees at most ``window`` positions back (``same_length``).

    Returns:
        The sinusoids of every distance that can occur, (n_rel, d): from 0 (causal) or 1 − t
        to s − 1; their row per (query, key) pair (b, t, s); the mask (b, 1, t, s).

    """
    s = key_valid.shape[1]
    distances = relative_distances(key_valid, t)  # (b, t, s)
    span = distance_range(t, s, config.causal, key_valid.device)  # (n_rel,)
    relative = sinusoidal_embedding(span, config.d_model)  # (n_rel, d)
    index = (distances - span[0]).clamp(min=0, max=span.numel() - 1)  # (b, t, s)
    mask = key_valid[:, None, None, :]  # (b, 1, 1, s)
    if config.causal:
        mask = mask & causal_mask(t, s, key_valid.device)[None, None]  # (b, 1, t, s)
    if window is not None:
        mask = mask & (distances <= window)[:, None]  # (b, 1, t, s)
    return RelativePositions(relative.to(dtype), index, mask.expand(-1, 1, t, s))


@dataclass
class _Fifo:
    """Where each slot of an updated FIFO comes from (indices into the concatenated sequence)."""

    memory_index: torch.Tensor  # (b, m) long
    memory_mask: torch.Tensor  # (b, m) bool
    evicted_index: torch.Tensor  # (b, e) long
    evicted_mask: torch.Tensor  # (b, e) bool


def _fifo(valid: torch.Tensor, capacity: int, rate: int = 1) -> _Fifo:
    """Keep each row's ``capacity`` most recent valid items; evict the rest in groups of ``rate``.

    Evictions happen in whole groups of ``rate`` items, so a row may keep fewer than
    ``capacity`` items (at least ``capacity - rate + 1`` when it has that many).

    Args:
        valid: (b, n) bool validity of the concatenation ``[old memory; new items]``, oldest
            first; ``n >= capacity``.
        capacity: Memory slots.
        rate: Eviction group size.

    Returns:
        Gather indices and masks of the kept items (right-aligned in ``capacity`` slots) and of
        the evicted ones (right-aligned in ``rate * ceil((n - capacity) / rate)`` slots, in
        whole groups).

    """
    b, n = valid.shape
    order = torch.sort(valid.to(torch.uint8), dim=1, stable=True).indices  # (b, n) invalid first
    count = valid.sum(dim=1)  # (b,)
    evict = ((count - capacity).clamp(min=0) + rate - 1) // rate * rate  # (b,)
    kept = count - evict  # (b,)
    slots = torch.arange(capacity, device=valid.device)[None, :]  # (1, m)
    memory_mask = slots >= (capacity - kept)[:, None]  # (b, m)
    width = rate * math.ceil(max(n - capacity, 0) / rate)
    evicted_slots = torch.arange(width, device=valid.device)[None, :]  # (1, e)
    source = (n - kept - width)[:, None] + evicted_slots  # (b, e) positions in sorted order
    evicted_mask = evicted_slots >= (width - evict)[:, None]  # (b, e)
    return _Fifo(
        memory_index=order[:, n - capacity :],
        memory_mask=memory_mask,
        evicted_index=order.gather(1, source.clamp(min=0, max=max(n - 1, 0))),
        evicted_mask=evicted_mask,
    )


def _gather(states: torch.Tensor, index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Rows ``states[b, index[b]]`` (b, k, d), zeroed where ``mask`` (b, k) is False."""
    picked = states.gather(1, index[:, :, None].expand(-1, -1, states.shape[-1]))  # (b, k, d)
    return picked * mask[:, :, None].to(states.dtype)


class RelativeAttention(nn.Module):
    """Multi-head attention over ``[context; segment]`` with Transformer-XL relative positions.

    The score of query ``i`` and key ``j`` at distance ``δ = pos(i) - pos(j)`` is
    ``(q_i + u)·k_j + (q_i + v)·W_R R_δ`` (scaled by ``1/sqrt(d_h)``), with ``R`` sinusoidal,
    ``W_R`` learned and ``u``, ``v`` per-head content and position biases. Instead of the
    "rel shift" trick, the position term is computed for every distance in the segment's range
    and gathered exactly per (query, key) pair, which also handles per-row padding.

    Args:
        config: Module sizes.

    """

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        if config.d_model % 2:
            raise ValueError(f"config.d_model must be even for sinusoids, got {config.d_model}")
        self.heads = config.heads
        d, dh = config.d_model, config.head_size
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.position = nn.Linear(d, d, bias=False)  # W_R
        self.output = nn.Linear(d, d)
        self.content_bias = nn.Parameter(torch.randn(config.heads, dh) * 0.02)  # u
        self.position_bias = nn.Parameter(torch.randn(config.heads, dh) * 0.02)  # v
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, context: torch.Tensor, positions: RelativePositions
    ) -> torch.Tensor:
        """Attend from the segment to ``[context; segment]``.

        Args:
            x: Segment vectors (b, t, d).
            context: Memory vectors before the segment (b, p, d).
            positions: The relative-position tables, their index per pair and the mask.

        Returns:
            The projected output (b, t, d).

        """
        return self.read(split_heads(self.query(x), self.heads), x, context, positions)

    def read(
        self,
        q: torch.Tensor,
        x: torch.Tensor,
        context: torch.Tensor,
        positions: RelativePositions,
    ) -> torch.Tensor:
        """`forward` given the segment's projected queries ``q`` (b, h, t, dh).

        For a layer that reads something else with the same queries (the ∞-former's long-term
        memory), so that they are projected once.
        """
        relative, index, mask = positions
        b, t, _ = x.shape
        s = context.shape[1] + t
        source = torch.cat([context, x], dim=1)  # (b, s, d)
        k = split_heads(self.key(source), self.heads)  # (b, h, s, dh)
        v = split_heads(self.value(source), self.heads)  # (b, h, s, dh)
        scale = 1.0 / math.sqrt(q.shape[-1])
        tables = relative if isinstance(relative, tuple) else (relative,)
        indices = index if isinstance(index, tuple) else (index,)
        positional = torch.zeros((), dtype=q.dtype, device=q.device)
        for table, rows in zip(tables, indices, strict=True):
            r = split_heads(self.position(table)[None], self.heads)[0]  # (h, n_rel, dh)
            by_distance = torch.einsum(
                "bhtd,hnd->bhtn", q + self.position_bias[None, :, None, :], r
            )  # (b, h, t, n_rel)
            positional = positional + by_distance.gather(
                -1, rows[:, None].expand(b, self.heads, t, s)
            )  # (b, h, t, s)
        out, _ = attend(
            q + self.content_bias[None, :, None, :], k, v, mask, bias=positional * scale
        )  # (b, h, t, dh)
        return self.dropout(self.output(merge_heads(out)))  # (b, t, d)

    def content_read(
        self, h: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor
    ) -> torch.Tensor:
        """Content-only attention of Rae et al.'s reconstruction loss, with frozen weights.

        ``softmax((h W_Q)(m W_K)^T / sqrt(d_h)) (m W_V)`` per head; the projections are
        detached, so only the inputs can carry gradients.

        Args:
            h: Queries (b, t, d).
            memory: Keys/values (b, n, d).
            memory_mask: (b, n) bool, True = may attend.

        Returns:
            The per-head read (b, h, t, dh); zeros for a row with no valid memory.

        """
        q = split_heads(_frozen(self.query, h), self.heads)  # (b, h, t, dh)
        k = split_heads(_frozen(self.key, memory), self.heads)  # (b, h, n, dh)
        v = split_heads(_frozen(self.value, memory), self.heads)  # (b, h, n, dh)
        out, _ = attend(q, k, v, memory_mask[:, None, None, :])
        return out


def _frozen(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``linear(x)`` without gradients to the layer's parameters."""
    bias = None if linear.bias is None else linear.bias.detach()
    return F.linear(x, linear.weight.detach(), bias)


class RelativeLayer(nn.Module):
    """Post-LN layer (as `TransformerLayer`) whose self-attention is `RelativeAttention`."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        self.attention = RelativeAttention(config)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)

    def forward(
        self, x: torch.Tensor, context: torch.Tensor, positions: RelativePositions
    ) -> torch.Tensor:
        """(b, t, d) segment with (b, p, d) context -> (b, t, d); see `RelativeAttention`."""
        x = self.norm1(x + self.attention(x, context, positions))
        return self.norm2(x + self.ffn(x))


class Compression(nn.Module):
    """Rae et al.'s compression function ``f_c``: every ``rate`` consecutive vectors -> one.

    Args:
        kind: ``"conv"`` (1D convolution with kernel and stride ``rate``, learned), ``"mean"``
            or ``"max"`` (pooling over each group, no parameters).
        d_model: Vector width.
        rate: Compression rate ``c``.

    """

    def __init__(self, kind: str, d_model: int, rate: int) -> None:
        super().__init__()
        if kind not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {kind!r}")
        if rate < 1:
            raise ValueError(f"compression_rate must be a positive integer, got {rate}")
        self.kind = kind
        self.rate = rate
        self.conv = nn.Conv1d(d_model, d_model, rate, stride=rate) if kind == "conv" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(b, n * rate, d) -> (b, n, d)."""
        b, length, d = x.shape
        if length % self.rate:
            raise ValueError(f"length {length} is not a multiple of compression_rate {self.rate}")
        if self.conv is not None:
            return self.conv(x.transpose(1, 2)).transpose(1, 2)  # (b, n, d)
        groups = x.view(b, length // self.rate, self.rate, d)  # (b, n, c, d)
        return groups.mean(dim=2) if self.kind == "mean" else groups.amax(dim=2)


class TransformerXL(SegmentEncoder):
    """Transformer-XL encoder: relative attention over a detached per-layer token cache.

    Each layer ``n`` attends over ``[memory_n; segment]`` where ``memory_n`` holds (detached)
    the last ``memory_length`` real-token vectors that entered layer ``n``. With
    ``config.causal`` a token sees the whole memory and the segment up to itself; otherwise it
    sees the whole memory and the whole segment.

    Args:
        config: Module sizes (``max_positions`` is unused: positions are relative).
        memory_length: Cached tokens per layer (0 gives a relative-position Transformer).
        same_length: Limit every query to the ``memory_length`` positions before it (plus the
            segment tokens after it when not causal), so that in causal mode every token has
            the same context length ``memory_length + 1`` once the memory is full. (The
            reference code's window is one shorter.)
        recurrence: What layer ``n`` caches for the next segment: ``"previous-layer"``, its
            input (layer n−1's output, Transformer-XL's ``h^{n−1}_τ``), or ``"same-layer"``,
            its own output (ERNIE-Doc's enhanced recurrence, ``h^n_τ``).

    """

    def __init__(
        self,
        config: ModuleConfig,
        memory_length: int,
        *,
        same_length: bool = False,
        recurrence: str = "previous-layer",
    ) -> None:
        super().__init__(config)
        check_at_least(0, memory_length=memory_length)
        if recurrence not in RECURRENCES:
            raise ValueError(f"recurrence must be one of {RECURRENCES}, got {recurrence!r}")
        self.recurrence = recurrence
        if config.d_model % 2:
            raise ValueError(f"config.d_model must be even for sinusoids, got {config.d_model}")
        self.memory_length = memory_length
        self.same_length = same_length
        self.embed = TokenEmbedding(config, positions=False)
        self.layers = nn.ModuleList(RelativeLayer(config) for _ in range(config.layers))

    @property
    def context_length(self) -> int:
        """Memory slots each layer attends over before the segment."""
        return self.memory_length

    def initial_memory(
        self, batch: int, device: torch.device | None = None, dtype: torch.dtype | None = None
    ) -> dict[str, Any]:
        """An empty memory: ``memory_length`` zero slots per layer, all invalid."""
        d = self.config.d_model
        return {
            "states": [
                torch.zeros(batch, self.memory_length, d, device=device, dtype=dtype)
                for _ in self.layers
            ],
            "mask": torch.zeros(batch, self.memory_length, dtype=torch.bool, device=device),
        }

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) given the memory of the previous segments.

        ``memory`` is the previous segment's ``EncoderOutput.memory``; ``None`` starts a document.

        Returns:
            ``hidden`` (b, t, d) (zero at padded positions), ``pooled`` (b, d) (masked mean),
            and the updated, detached memory.

        """
        check_segment_inputs(input_ids, attention_mask)
        b, t = input_ids.shape
        x = self.embed(input_ids)  # (b, t, d)
        if memory is None:
            memory = self.initial_memory(b, x.device, x.dtype)
        self._check_memory(memory, b)
        valid = attention_mask.bool()  # (b, t)
        contexts, context_mask = self._contexts(memory)  # [(b, p, d)], (b, p)
        key_valid = torch.cat([context_mask, valid], dim=1)  # (b, s)
        structure = self._structure(input_ids, valid, memory)
        positions = self._positions(key_valid, t, structure)
        states = [x]  # layer inputs, then the last layer's output
        for layer, context in zip(self.layers, contexts):
            x = layer(x, context, positions)  # (b, t, d)
            states.append(x)
        hidden = x * valid[:, :, None].to(x.dtype)  # (b, t, d)
        cached = states[1:] if self.recurrence == "same-layer" else states[:-1]  # one per layer
        updated = self._update_memory(memory, cached, valid, structure)
        pooled = mean_pool(hidden, attention_mask)  # (b, d)
        return EncoderOutput(hidden=hidden, pooled=pooled, memory=updated)

    def _contexts(self, memory: dict[str, Any]) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Per-layer vectors (b, p, d) attended before the segment, and their validity (b, p)."""
        return list(memory["states"]), memory["mask"]

    def _structure(self, input_ids: torch.Tensor, valid: torch.Tensor, memory: Any) -> Any:
        """What a subclass knows of the segment beyond its tokens (Segatron: sentences)."""
        return None

    def _distance_range(self, t: int, s: int, device: torch.device) -> torch.Tensor:
        """Every query-key distance that can occur (`distance_range`)."""
        return distance_range(t, s, self.config.causal, device)

    def _positions(
        self, key_valid: torch.Tensor, t: int, structure: Any = None
    ) -> RelativePositions:
        """Relative embeddings (n_rel, d), their index per pair (b, t, s) and the mask."""
        return relative_positions(
            key_valid,
            t,
            self.config,
            self.embed.words.weight.dtype,
            window=self.context_length if self.same_length else None,
        )

    def _push(
        self,
        states: list[torch.Tensor],
        mask: torch.Tensor,
        inputs: list[torch.Tensor],
        valid: torch.Tensor,
    ) -> tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """Append the segment's real layer inputs to the FIFO; return kept and evicted items."""
        fifo = _fifo(torch.cat([mask, valid], dim=1), self.memory_length, self._eviction_rate)
        joined = [
            torch.cat([old, new.detach()], dim=1) for old, new in zip(states, inputs)
        ]  # [(b, m + t, d)]
        kept = [_gather(j, fifo.memory_index, fifo.memory_mask) for j in joined]  # [(b, m, d)]
        evicted = [_gather(j, fifo.evicted_index, fifo.evicted_mask) for j in joined]  # [(b, e, d)]
        return kept, fifo.memory_mask, evicted, fifo.evicted_mask

    @property
    def _eviction_rate(self) -> int:
        """Group size in which the FIFO memory evicts (1: token by token)."""
        return 1

    def _update_memory(
        self,
        memory: dict[str, Any],
        inputs: list[torch.Tensor],
        valid: torch.Tensor,
        structure: Any = None,
    ) -> dict[str, Any]:
        """The memory after this segment (evicted vectors are dropped)."""
        states, mask, _, _ = self._push(memory["states"], memory["mask"], inputs, valid)
        return {"states": states, "mask": mask}

    def _check_memory(self, memory: Any, batch: int) -> None:
        if not isinstance(memory, dict) or "states" not in memory or "mask" not in memory:
            raise ValueError("memory must be the dict returned by this module (or None)")
        if len(memory["states"]) != len(self.layers):
            raise ValueError(
                f"memory has {len(memory['states'])} layers, expected {len(self.layers)}"
            )
        expected = (batch, self.memory_length)
        if tuple(memory["mask"].shape) != expected:
            raise ValueError(
                f"memory mask has shape {tuple(memory['mask'].shape)}, expected {expected}"
            )


class CompressiveTransformer(TransformerXL):
    """Compressive Transformer: Transformer-XL whose evicted memories are compressed, not lost.

    After each segment the real-token vectors that fall out of a layer's FIFO memory are
    compressed by ``compression_rate`` (``c`` vectors -> 1) into that layer's compressed memory,
    itself a FIFO of ``compressed_length`` slots; each layer attends over
    ``[compressed memory; memory; segment]`` with relative positions (one position per slot).

    Padding: only real tokens enter the memory, and the memory evicts in whole groups of ``c``
    real vectors, so every compressed slot summarises exactly ``c`` real tokens (never padding
    or a partial group). A row can therefore hold between ``memory_length - c + 1`` and
    ``memory_length`` vectors in its FIFO memory; nothing is lost, only compressed earlier.

    The compression network is trained by Rae et al.'s attention-reconstruction loss,
    ``Σ_layers ||attn(h, old) - attn(h, f_c(old))||²`` (mean over real queries, heads and
    width), where ``h`` are the segment's layer inputs, ``old`` the evicted vectors and
    ``attn`` the layer's content-only attention; everything but ``f_c`` is under stop-gradient.
    It is computed in training mode with gradients enabled, only for the learned ("conv")
    compression and only for segments that evict something, and is read (then reset) with
    `auxiliary_loss`.

    Args:
        config: Module sizes.
        memory_length: FIFO memory slots per layer.
        compressed_length: Compressed memory slots per layer.
        compression_rate: Vectors per compressed slot ``c``.
        compression: ``"conv"``, ``"mean"`` or ``"max"`` (see `Compression`).
        reconstruction_loss: Accumulate the attention-reconstruction loss.
        same_length: As in `TransformerXL`, with the window ``memory_length +
            compressed_length``.

    """

    def __init__(
        self,
        config: ModuleConfig,
        memory_length: int,
        compressed_length: int,
        compression_rate: int,
        *,
        compression: str = "conv",
        reconstruction_loss: bool = True,
        same_length: bool = False,
    ) -> None:
        super().__init__(config, memory_length, same_length=same_length)
        check_at_least(1, compressed_length=compressed_length, compression_rate=compression_rate)
        self.compressed_length = compressed_length
        self.compression_rate = compression_rate
        self.reconstruction_loss = reconstruction_loss
        self.compressions = nn.ModuleList(
            Compression(compression, config.d_model, compression_rate) for _ in self.layers
        )
        self._auxiliary: torch.Tensor | None = None

    @property
    def context_length(self) -> int:
        """Compressed plus FIFO memory slots attended before the segment."""
        return self.memory_length + self.compressed_length

    @property
    def _eviction_rate(self) -> int:
        return self.compression_rate

    def initial_memory(
        self, batch: int, device: torch.device | None = None, dtype: torch.dtype | None = None
    ) -> dict[str, Any]:
        """An empty memory: FIFO and compressed slots, all zero and invalid."""
        memory = super().initial_memory(batch, device, dtype)
        d, n = self.config.d_model, self.compressed_length
        memory["compressed"] = [
            torch.zeros(batch, n, d, device=device, dtype=dtype) for _ in self.layers
        ]
        memory["compressed_mask"] = torch.zeros(batch, n, dtype=torch.bool, device=device)
        return memory

    def auxiliary_loss(self) -> torch.Tensor | None:
        """The reconstruction loss summed since the last call (then reset), or None."""
        loss, self._auxiliary = self._auxiliary, None
        return loss

    def _contexts(self, memory: dict[str, Any]) -> tuple[list[torch.Tensor], torch.Tensor]:
        contexts = [
            torch.cat([c, m], dim=1) for c, m in zip(memory["compressed"], memory["states"])
        ]  # [(b, n_c + m, d)]
        return contexts, torch.cat([memory["compressed_mask"], memory["mask"]], dim=1)

    def _update_memory(
        self,
        memory: dict[str, Any],
        inputs: list[torch.Tensor],
        valid: torch.Tensor,
        structure: Any = None,
    ) -> dict[str, Any]:
        """Push the segment into the FIFO, compress what it evicts, push that into the FIFO'."""
        states, mask, evicted, evicted_mask = self._push(
            memory["states"], memory["mask"], inputs, valid
        )
        b, e = evicted_mask.shape
        groups = evicted_mask.view(b, e // self.compression_rate, self.compression_rate)
        group_valid = groups.all(dim=2)  # (b, e / c)
        compressed = [f(old) for f, old in zip(self.compressions, evicted)]  # [(b, e / c, d)]
        if self._wants_reconstruction() and bool(group_valid.any()):
            self._add_reconstruction(inputs, valid, evicted, evicted_mask, compressed, group_valid)
        fifo = _fifo(
            torch.cat([memory["compressed_mask"], group_valid], dim=1), self.compressed_length
        )
        kept = [
            _gather(torch.cat([old, new.detach()], dim=1), fifo.memory_index, fifo.memory_mask)
            for old, new in zip(memory["compressed"], compressed)
        ]  # [(b, n_c, d)]
        return {
            "states": states,
            "mask": mask,
            "compressed": kept,
            "compressed_mask": fifo.memory_mask,
        }

    def _wants_reconstruction(self) -> bool:
        learned = any(p.requires_grad for p in self.compressions.parameters())
        return self.reconstruction_loss and learned and self.training and torch.is_grad_enabled()

    def _add_reconstruction(
        self,
        inputs: list[torch.Tensor],
        valid: torch.Tensor,
        evicted: list[torch.Tensor],
        evicted_mask: torch.Tensor,
        compressed: list[torch.Tensor],
        group_valid: torch.Tensor,
    ) -> None:
        """Accumulate ``Σ_layers MSE(attn(h, old), attn(h, f_c(old)))`` over real queries."""
        weight = (valid & group_valid.any(dim=1, keepdim=True)).to(inputs[0].dtype)  # (b, t)
        denominator = (weight.sum() * self.config.d_model).clamp(min=1.0)
        total = inputs[0].new_zeros(())
        for layer, h, old, new in zip(self.layers, inputs, evicted, compressed):
            h = h.detach()  # (b, t, d)
            target = layer.attention.content_read(h, old.detach(), evicted_mask)  # (b, h, t, dh)
            estimate = layer.attention.content_read(h, new, group_valid)  # (b, h, t, dh)
            error = (target - estimate).pow(2).sum(dim=(1, 3))  # (b, t)
            total = total + (error * weight).sum() / denominator
        self._auxiliary = total if self._auxiliary is None else self._auxiliary + total


__all__ = [
    "COMPRESSIONS",
    "RECURRENCES",
    "CompressiveTransformer",
    "Compression",
    "RelativeAttention",
    "RelativeLayer",
    "TransformerXL",
    "distance_range",
    "relative_distances",
    "relative_positions",
    "sinusoidal_embedding",
]
