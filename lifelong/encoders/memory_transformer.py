"""The Memory Transformer (Burtsev et al., 2020): ``m`` [mem] tokens read by self-attention.

Three variants (the memory survey's "Special Input Tokens as Memory", equations for
MemTransformer, MemCtrl and MemBottleneck):

* ``"memtr"`` — MemTransformer: ``X = [X_mem; X_seq]`` through standard layers, every parameter
  shared by memory and sequence positions.
* ``"memctrl"`` — MemCtrl: a dedicated memory controller; each layer has separate attention,
  feed-forward and LayerNorm parameters for the memory and for the sequence, both attending
  to ``[X_mem; X_seq]``::

      H_mem = LN(A_mem + FF_mem(A_mem)),  A_mem = LN(X_mem + MH_mem(X_mem, X_ms, X_ms))
      H_seq = LN(A_seq + FF_seq(A_seq)),  A_seq = LN(X_seq + MH_seq(X_seq, X_ms, X_ms))

* ``"bottleneck"`` — MemBottleneck: the memory is updated first, as in MemCtrl, and the sequence
  then attends only to the updated memory (no sequence-to-sequence attention)::

      A_seq = LN(X_seq + MH_seq(X_seq, H_mem, H_mem))

The memory is per segment (the paper's model has no recurrence; RMT, `lifelong.encoders.rmt`,
is the recurrent successor): every segment starts from the same learned [mem] vectors.

Causal use (language modelling): the memory block comes first, so under the causal mask the
[mem] tokens see only each other — learned global registers every token can read. MemBottleneck
has no causal form (its sequence reads the segment only through memory that has read the whole
segment, the future included), so it is bidirectional only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.layers import ModuleConfig, TokenEmbedding, TransformerLayer
from lifelong.encoders.memory_tokens import MemoryTokens, embed_with_memory, sequence_mask
from lifelong.encoders.segments import SegmentEncoder, mean_pool

VARIANTS = ("memtr", "memctrl", "bottleneck")


class ControllerLayer(nn.Module):
    """One MemCtrl / MemBottleneck layer: separate memory and sequence sub-layers.

    Args:
        config: Module sizes.
        bottleneck: The sequence attends to the updated memory only (MemBottleneck).

    """

    def __init__(self, config: ModuleConfig, *, bottleneck: bool) -> None:
        super().__init__()
        self.bottleneck = bottleneck
        self.memory = TransformerLayer(config)
        self.sequence = TransformerLayer(config)

    def forward(
        self, memory: torch.Tensor, x: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Update memory (b, m, d) and sequence (b, t, d); ``mask`` (b, 1, m + t or 1, m + t)."""
        m = memory.shape[1]
        both = torch.cat([memory, x], dim=1)  # X_ms (b, m + t, d)
        rows = mask.shape[2] > 1  # a per-query (causal) mask, else one row for all queries
        updated = self.memory(memory, mask[:, :, :m] if rows else mask, both)  # H_mem
        if self.bottleneck:
            return updated, self.sequence(x, None, updated)
        return updated, self.sequence(x, mask[:, :, m:] if rows else mask, both)


class MemoryTransformer(SegmentEncoder):
    """A Transformer reading every segment with ``slots`` learned [mem] tokens before it.

    Args:
        config: Module sizes; ``max_positions`` must cover ``slots + segment`` (the builder
            widens it).
        slots: [mem] tokens m (20, the memory survey's Memory Transformer setting).
        variant: ``"memtr"``, ``"memctrl"`` or ``"bottleneck"`` (see the module docstring).

    Raises:
        ValueError: An unknown variant, or MemBottleneck with a causal config.

    """

    def __init__(self, config: ModuleConfig, slots: int = 20, variant: str = "memtr") -> None:
        super().__init__(config)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if variant == "bottleneck" and config.causal:
            raise ValueError(
                "MemBottleneck has no causal form (its sequence reads the segment through "
                "memory that has read all of it); use variant 'memtr' or 'memctrl'"
            )
        self.slots = slots
        self.variant = variant
        self.memory = MemoryTokens(slots, config.d_model)
        self.embed = TokenEmbedding(config)
        if variant == "memtr":
            self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.layers))
        else:
            self.layers = nn.ModuleList(
                ControllerLayer(config, bottleneck=variant == "bottleneck")
                for _ in range(config.layers)
            )

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) with fresh [mem] tokens; no memory is carried (``None``)."""
        b, t = input_ids.shape
        m = self.slots
        x = embed_with_memory(self.embed, input_ids, self.memory.expand(b), None)  # (b, m+t, d)
        mask = sequence_mask(attention_mask, m, 0, self.config.causal)
        if self.variant == "memtr":
            for layer in self.layers:
                x = layer(x, mask)
            mem, seq = x[:, :m], x[:, m:]
        else:
            mem, seq = x[:, :m], x[:, m:]
            for layer in self.layers:
                mem, seq = layer(mem, seq, mask)
        hidden = seq * attention_mask[:, :, None].to(seq.dtype)  # (b, t, d)
        return EncoderOutput(hidden=hidden, pooled=mean_pool(hidden, attention_mask), memory=None)


__all__ = ["VARIANTS", "ControllerLayer", "MemoryTransformer"]
