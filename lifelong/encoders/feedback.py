"""The Feedback Transformer (Fan et al., 2020): every layer reads one memory of all layers.

At step t each layer attends, not to its own lower layer's past states, but to one memory
vector per earlier step, the softmax-weighted sum of that step's representations at every
layer (the embedding included)::

    m_t = Σ_{l=0..L} softmax(w)_l · x_t^l                 (w: L + 1 scalars, initialised to 0)
    z_t^l = Attn(x_t^l, [m_{t−τ}, …, m_{t−1}])            (not x_t^l itself, nor step t)
    x_t^{l+1} = LN(a + FF(a)),  a = LN(x_t^l + z_t^l)    (our post-LN block)

so the lowest layer at step t sees the highest layer's view of every earlier step. The memory
of step t exists only once step t has passed through every layer, so the computation is step
by step (`FeedbackTransformer.forward` loops over the tokens), as the paper computes it. The
keys and values of a memory vector are the same for every layer (``W_k``, ``W_v`` shared: the
paper's memory-saving choice, facebookresearch/transformer-sequential ``--share-proj-kv``), so
they are computed once per step. Keys carry a learned relative-position term ``q · p_δ`` per
distance δ (the reference's ``key_pe``).

Across segments the last ``span`` memory vectors are carried, detached (truncated
back-propagation, as Transformer-XL). A step with no earlier memory (a document's first token)
reads nothing: its attention read is zero (the reference reads a zero-initialised cache).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least
from lifelong.encoders.layers import FeedForward, ModuleConfig, TokenEmbedding, merge_heads
from lifelong.encoders.segments import SegmentEncoder, mean_pool


class FeedbackLayer(nn.Module):
    """One layer: its query and output projections, LayerNorms and feed-forward block."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.query = nn.Linear(config.d_model, config.d_model)
        self.output = nn.Linear(config.d_model, config.d_model)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        positions: torch.Tensor,
        valid: torch.Tensor,
    ) -> torch.Tensor:
        """One step of one layer.

        Args:
            x: The step's input to this layer (b, d).
            keys: Shared keys of the memory window (b, h, n, d_h).
            values: Shared values (b, h, n, d_h).
            positions: Relative-position vectors of the window's distances (h, n, d_h).
            valid: (b, n) bool, True for memory entries that may be read.

        Returns:
            The layer's output at this step (b, d).

        """
        b, d = x.shape
        q = self.query(x).view(b, self.heads, 1, d // self.heads)  # (b, h, 1, d_h)
        scores = (q @ keys.transpose(-1, -2) + q @ positions.transpose(-1, -2)[None]) / math.sqrt(
            q.shape[-1]
        )  # (b, h, 1, n)
        allowed = valid[:, None, None, :]  # (b, 1, 1, n)
        weights = torch.softmax(scores.masked_fill(~allowed, torch.finfo(scores.dtype).min), -1)
        read = (weights * allowed) @ values  # (b, h, 1, d_h); zeros when nothing is allowed
        z = self.dropout(self.output(merge_heads(read)[:, 0]))  # (b, d)
        a = self.norm1(x + z)
        return self.norm2(a + self.ffn(a))


class FeedbackTransformer(SegmentEncoder):
    """Causal Transformer whose layers all read the shared feedback memory (see module doc).

    The memory is ``{"vectors": (b, span, d), "mask": (b, span) bool}``: the last ``span``
    memory vectors (right-aligned) and which of them exist.

    It reads causally whatever ``config.causal`` says (the memory of a step exists only once
    the step has passed every layer), so as a classification encoder it is a causal reader.

    Args:
        config: Module sizes.
        span: Memory vectors each step can read, τ (the reference: 100 on its algorithmic
            tasks; the builder gives the segment length).

    """

    def __init__(self, config: ModuleConfig, span: int) -> None:
        super().__init__(config)
        check_at_least(1, span=span)
        self.span = span
        d, h = config.d_model, config.heads
        self.embed = TokenEmbedding(config, positions=False)
        self.layers = nn.ModuleList(FeedbackLayer(config) for _ in range(config.layers))
        self.layer_weights = nn.Parameter(torch.zeros(config.layers + 1))  # w, softmax -> uniform
        self.key = nn.Linear(d, d)  # W_k, shared by every layer
        self.value = nn.Linear(d, d)  # W_v, shared by every layer
        self.positions = nn.Parameter(torch.randn(h, span, d // h) * 0.02)  # p_δ, δ = 1..span

    def initial_memory(self, batch: int, like: torch.Tensor) -> dict[str, torch.Tensor]:
        """No memory vectors yet: (b, span, d) zeros, all invalid."""
        return {
            "vectors": like.new_zeros(batch, self.span, self.config.d_model),
            "mask": torch.zeros(batch, self.span, dtype=torch.bool, device=like.device),
        }

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(b, n, d) -> (b, h, n, d_h)."""
        b, n, d = x.shape
        return x.view(b, n, self.config.heads, d // self.config.heads).transpose(1, 2)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) token by token, each step reading the memory window."""
        b, t = input_ids.shape
        x = self.embed(input_ids)  # (b, t, d)
        if memory is None:
            memory = self.initial_memory(b, x)
        vectors = memory["vectors"].detach()  # (b, span, d)
        valid = memory["mask"]  # (b, span)
        keys, values = self._heads(self.key(vectors)), self._heads(self.value(vectors))
        mix = torch.softmax(self.layer_weights, dim=0)  # (L + 1,)
        written = attention_mask.bool()  # (b, t): padding writes no memory
        outputs = []
        for i in range(t):
            window = slice(keys.shape[2] - self.span, None)  # the last span entries
            # distance of entry j of the window from step i: span - j (the last is 1)
            h, states = x[:, i], [x[:, i]]
            for layer in self.layers:
                h = layer(h, keys[:, :, window], values[:, :, window], self.positions.flip(1),
                          valid[:, window])  # fmt: skip
                states.append(h)
            m = torch.einsum("l,lbd->bd", mix, torch.stack(states))  # m_i (b, d)
            outputs.append(h)
            vectors = torch.cat([vectors, m[:, None]], dim=1)
            keys = torch.cat([keys, self._heads(self.key(m[:, None]))], dim=2)
            values = torch.cat([values, self._heads(self.value(m[:, None]))], dim=2)
            valid = torch.cat([valid, written[:, i : i + 1]], dim=1)
        hidden = torch.stack(outputs, dim=1) * attention_mask[:, :, None].to(x.dtype)  # (b, t, d)
        updated = {"vectors": vectors[:, -self.span :], "mask": valid[:, -self.span :]}
        pooled = mean_pool(hidden, attention_mask)  # (b, d)
        return EncoderOutput(hidden=hidden, pooled=pooled, memory=updated)


__all__ = ["FeedbackLayer", "FeedbackTransformer"]
