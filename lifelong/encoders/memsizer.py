"""MemSizer (Zhang & Cai, 2022): self-attention replaced by a key–value memory of m slots.

The memory keys Φ (m slots, one set per head) are learned and input-independent; the values
are written by the input, each token adding the outer product of its two adaptor projections:

    V = 1/√M · Σ_j LN(W_l x_j) ⊗ LN(W_r x_j)        (m × d; M = tokens written so far)
    out_i = 1/r · Σ_heads softmax(x_i Φ_hᵀ / √d) V   (the values shared by the r heads)

("Linearizing Transformers with Key-Value Memory", section 3 and equations 5–7; the memory
survey's "MemSizer" section). There is no query, key or output projection: the query is the
token itself and the heads are mean-pooled. The survey's formula has no 1/√d in the softmax;
we keep the usual dot-product scale so the slot distribution does not saturate at width d.

Two forms compute the same outputs (tested):

* `MemSizerAttention.forward` — parallel, for training: causal rows read the values written by
  the tokens up to their own (a masked (t × t) product, as linear attention's parallel form);
  bidirectional rows read the values of the whole segment.
* `MemSizerAttention.step` — recurrent, for generation: the state is the (m × d) running sum
  and the count of tokens written, so each step costs O(m·d) and the state stays the same size
  however long the text (constant memory, the paper's central claim).

Across the segments of a document the state is the module's memory (`MemSizer`), so MemSizer
is also a recurrent memory: what earlier segments wrote stays readable, at a fixed size.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least
from lifelong.encoders.layers import FeedForward, ModuleConfig, TokenEmbedding
from lifelong.encoders.segments import SegmentEncoder, mean_pool

MemSizerState = tuple[torch.Tensor, torch.Tensor]
"""One layer's memory: the unnormalised value sum (b, m, d) and the tokens written (b,)."""


class MemSizerAttention(nn.Module):
    """The key–value memory layer in place of self-attention.

    Args:
        d_model: Token width d.
        slots: Memory slots m (the paper: 32 for cross attention, 4 for causal attention in
            translation; its language models use m = 32).
        heads: Heads r, each with its own keys Φ_h, all reading the same values.
        causal: Each token reads only what it and earlier tokens wrote.

    """

    def __init__(self, d_model: int, slots: int, heads: int, *, causal: bool) -> None:
        super().__init__()
        self.d_model, self.slots, self.heads, self.causal = d_model, slots, heads, causal
        self.keys = nn.Parameter(torch.randn(heads, slots, d_model) / math.sqrt(d_model))  # Φ
        self.left = nn.Linear(d_model, slots, bias=False)  # W_l
        self.right = nn.Linear(d_model, d_model, bias=False)  # W_r
        self.left_norm = nn.LayerNorm(slots)
        self.right_norm = nn.LayerNorm(d_model)

    def empty_state(self, x: torch.Tensor) -> MemSizerState:
        """The state before any token: zero values (b, m, d) and count (b,), like ``x`` (b, …)."""
        b = x.shape[0]
        return x.new_zeros(b, self.slots, self.d_model), x.new_zeros(b)

    def writes(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's write: LN(W_l x) (b, t, m) and LN(W_r x) (b, t, d), zero on padding."""
        keep = mask.to(x.dtype)[..., None]  # (b, t, 1)
        return self.left_norm(self.left(x)) * keep, self.right_norm(self.right(x)) * keep

    def slot_weights(self, x: torch.Tensor) -> torch.Tensor:
        """softmax(x Φ_hᵀ / √d) over the slots, per head: (b, t, d) -> (b, r, t, m)."""
        scores = torch.einsum("btd,hmd->bhtm", x, self.keys) / math.sqrt(self.d_model)
        return torch.softmax(scores, dim=-1)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, state: MemSizerState | None = None
    ) -> tuple[torch.Tensor, MemSizerState]:
        """The parallel form over a segment.

        Args:
            x: Token vectors (b, t, d).
            mask: Real tokens (b, t), 1 = real.
            state: What earlier segments wrote (`empty_state` if ``None``).

        Returns:
            The outputs (b, t, d) and the state after the segment's real tokens.

        """
        values, count = self.empty_state(x) if state is None else state  # (b, m, d), (b,)
        left, right = self.writes(x, mask)  # (b, t, m), (b, t, d)
        weights = self.slot_weights(x)  # (b, r, t, m)
        real = mask.to(x.dtype)  # (b, t)
        if self.causal:
            seen = count[:, None] + real.cumsum(1)  # (b, t): tokens written up to each row
            own = torch.einsum("bhtm,bsm->bhts", weights, left)  # (b, r, t, s)
            own = own.tril()  # row i reads the writes of tokens j <= i
            read = torch.einsum("bhtm,bmd->bhtd", weights, values)
            read = read + torch.einsum("bhts,bsd->bhtd", own, right)  # (b, r, t, d)
        else:
            total = values + torch.einsum("btm,btd->bmd", left, right)  # (b, m, d)
            seen = (count + real.sum(1))[:, None].expand_as(real)  # (b, t)
            read = torch.einsum("bhtm,bmd->bhtd", weights, total)
        out = read.mean(1) / seen.clamp(min=1.0).sqrt()[..., None]  # (b, t, d)
        written = values + torch.einsum("btm,btd->bmd", left, right)
        return out, (written, count + real.sum(1))

    def step(
        self, x: torch.Tensor, state: MemSizerState | None = None
    ) -> tuple[torch.Tensor, MemSizerState]:
        """The recurrent form: one token per row (b, d) in, its output (b, d) and the new state.

        Costs O(m·d) per token whatever came before (causal reading only).
        """
        values, count = self.empty_state(x) if state is None else state
        left, right = self.writes(x[:, None], x.new_ones(x.shape[0], 1))  # (b, 1, m), (b, 1, d)
        values = values + left.transpose(1, 2) @ right  # (b, m, d)
        count = count + 1
        weights = self.slot_weights(x[:, None])[:, :, 0]  # (b, r, m)
        out = torch.einsum("bhm,bmd->bd", weights, values) / self.heads  # mean over heads
        return out / count.sqrt()[:, None], (values, count)


class MemSizerLayer(nn.Module):
    """Post-LN block: the memory layer where self-attention was, then the feed-forward block."""

    def __init__(self, config: ModuleConfig, slots: int) -> None:
        super().__init__()
        self.memory = MemSizerAttention(config.d_model, slots, config.heads, causal=config.causal)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, state: MemSizerState | None
    ) -> tuple[torch.Tensor, MemSizerState]:
        """(b, t, d) -> (b, t, d) and the layer's new state."""
        read, state = self.memory(x, mask, state)
        x = self.norm1(x + self.dropout(read))
        return self.norm2(x + self.ffn(x)), state

    def step(
        self, x: torch.Tensor, state: MemSizerState | None
    ) -> tuple[torch.Tensor, MemSizerState]:
        """One token per row (b, d) through the recurrent form."""
        read, state = self.memory.step(x, state)
        x = self.norm1(x + self.dropout(read))
        return self.norm2(x + self.ffn(x)), state


class MemSizer(SegmentEncoder):
    """A stack of MemSizer layers; the per-layer value states are the memory across segments.

    Args:
        config: Module sizes (``causal`` for language modelling).
        slots: Memory slots m per layer (the paper's language models: 32).

    """

    def __init__(self, config: ModuleConfig, *, slots: int = 32) -> None:
        super().__init__(config)
        check_at_least(1, slots=slots)
        self.slots = slots
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(MemSizerLayer(config, slots) for _ in range(config.layers))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) reading and extending ``memory`` (a state per layer)."""
        x = self.embed(input_ids)  # (b, t, d)
        states = [None] * len(self.layers) if memory is None else list(memory)
        new = []
        for layer, state in zip(self.layers, states, strict=True):
            x, state = layer(x, attention_mask, state)
            new.append(state)
        pooled = mean_pool(x, attention_mask)
        return EncoderOutput(hidden=x, pooled=pooled, memory=[tuple(s) for s in new])

    def generate_step(
        self, input_ids: torch.Tensor, position: int, memory: Any = None
    ) -> tuple[torch.Tensor, list[MemSizerState]]:
        """Encode one token per row (b,) at segment ``position``: its vector (b, d), new memory.

        The recurrent form of `forward` for a causal module: feeding a segment token by token
        gives the same vectors as one `forward` over it.
        """
        x = self.embed.at(input_ids, position)  # (b, d)
        states = [None] * len(self.layers) if memory is None else list(memory)
        new = []
        for layer, state in zip(self.layers, states, strict=True):
            x, state = layer.step(x, state)
            new.append(state)
        return x, new


__all__ = ["MemSizer", "MemSizerAttention", "MemSizerLayer", "MemSizerState"]
