"""ReadTwice (Zemlyanskiy et al., 2021): read every segment alone, summarise, read again.

The first read encodes each segment on its own. Its outputs are summarised into a few memory
vectors per segment; the second read encodes the segment again with the same layers, each
layer attending to ``[memory; segment]``, so every token reads what the other segments said
(google-research ``readtwice/models/modeling.py``: the ``from_scratch`` second read, the
config default, with the encoder's weights shared by both reads).

Summaries: the reference's ``text_block`` mode — every block of ``block`` consecutive tokens
gives one vector, ``Linear([h_first; h_last])`` of the first read's outputs at the block's
first and last token. Memory keys and values go through the layers' own projections (the
reference's ``share_kv_projections`` option; by default it learns separate ones).

Two ways to read a document:

* bidirectional (classification, `DocumentEncoder` with ``passes=2``, `DOCUMENT_PASSES`): the
  first pass summarises every segment; `end_of_pass` marks the memory complete, and the
  second pass reads each segment with every segment's summaries, earlier and later, as the
  paper does.
* causal (language modelling): a segment's summaries contain its own later tokens, so the
  second read of segment τ reads only the summaries of segments before τ; the memory is then
  a recurrent one, filled as the segments are read.

The memory is a FIFO of the last ``memory_size`` summaries.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least
from lifelong.encoders.layers import (
    ModuleConfig,
    TokenEmbedding,
    TransformerLayer,
    causal_mask,
    padding_mask,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool


class ReadTwice(SegmentEncoder):
    """Two reads of each segment with shared layers; summaries of the first feed the second.

    The memory is ``{"summaries": (b, n, d), "mask": (b, n) bool, "complete": (b,) bool}``.

    Args:
        config: Module sizes.
        block: Tokens per summary (the reference's ``text_block`` X).
        memory_size: Summaries kept, n.

    """

    def __init__(self, config: ModuleConfig, block: int = 8, memory_size: int = 64) -> None:
        super().__init__(config)
        check_at_least(1, block=block, memory_size=memory_size)
        self.block = block
        self.memory_size = memory_size
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.layers))
        self.summarise = nn.Linear(2 * config.d_model, config.d_model)

    def initial_memory(self, batch: int, like: torch.Tensor) -> dict[str, torch.Tensor]:
        """No summaries yet."""
        return {
            "summaries": like.new_zeros(batch, self.memory_size, self.config.d_model),
            "mask": torch.zeros(batch, self.memory_size, dtype=torch.bool, device=like.device),
            "complete": torch.zeros(batch, dtype=torch.bool, device=like.device),
        }

    def end_of_pass(self, memory: Any) -> Any:
        """After the first pass over a document: its summaries are complete, add no more."""
        return {**memory, "complete": torch.ones_like(memory["complete"])}

    def first_read(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The segment alone through the layers: (b, t, d) -> (b, t, d)."""
        mask = padding_mask(attention_mask)  # (b, 1, 1, t)
        if self.config.causal:
            t = x.shape[1]
            mask = mask & causal_mask(t, t, x.device)[None, None]  # (b, 1, t, t)
        for layer in self.layers:
            x = layer(x, mask)
        return x

    def summaries(
        self, h: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One vector per block of tokens, ``Linear([h_first; h_last])``: (b, t/X, d), (b, t/X)."""
        t = h.shape[1]
        first = torch.arange(0, t, self.block, device=h.device)  # (k,)
        last = (first + self.block - 1).clamp(max=t - 1)  # (k,)
        vectors = self.summarise(torch.cat([h[:, first], h[:, last]], dim=-1))  # (b, k, d)
        valid = attention_mask.bool()[:, first]  # (b, k): a block with a real first token
        return vectors, valid

    def second_read(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor,
    ) -> torch.Tensor:
        """The segment again, every layer attending to ``[memory; segment]``: (b, t, d)."""
        n, t = memory.shape[1], x.shape[1]
        keys = torch.cat([memory_mask, attention_mask.bool()], dim=1)  # (b, n + t)
        mask = padding_mask(keys)  # (b, 1, 1, n + t)
        if self.config.causal:
            mask = mask & causal_mask(t, n + t, x.device)[None, None]  # (b, 1, t, n + t)
        for layer in self.layers:
            x = layer(x, mask, torch.cat([memory, x], dim=1))
        return x

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Read a segment twice; a complete memory is read whole and not added to."""
        b = input_ids.shape[0]
        x = self.embed(input_ids)  # (b, t, d)
        if memory is None:
            memory = self.initial_memory(b, x)
        new, new_mask = self.summaries(self.first_read(x, attention_mask), attention_mask)
        complete = memory["complete"]  # (b,)
        keep = ~complete[:, None]  # rows still summarising
        summaries = torch.cat([memory["summaries"], new], dim=1)[:, -self.memory_size :]
        mask = torch.cat([memory["mask"], new_mask & keep], dim=1)[:, -self.memory_size :]
        added = {"summaries": summaries, "mask": mask, "complete": complete}
        updated = {
            key: torch.where(complete.view((-1,) + (1,) * (value.dim() - 1)), memory[key], value)
            for key, value in added.items()
        }
        if self.config.causal:  # a segment's own summaries hold its future: earlier ones only
            source, source_mask = memory["summaries"], memory["mask"]
        else:
            source, source_mask = self._with_own(memory, new, new_mask)
        hidden = self.second_read(x, attention_mask, source, source_mask)
        hidden = hidden * attention_mask[:, :, None].to(hidden.dtype)  # (b, t, d)
        pooled = mean_pool(hidden, attention_mask)  # (b, d)
        return EncoderOutput(hidden=hidden, pooled=pooled, memory=updated)

    def _with_own(
        self, memory: dict[str, torch.Tensor], new: torch.Tensor, new_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A bidirectional second read's source: the complete memory, or earlier + own summaries."""
        complete = memory["complete"][:, None]  # (b, 1)
        own = torch.cat([memory["summaries"], new], dim=1)  # (b, n + k, d)
        own_mask = torch.cat([memory["mask"], new_mask & ~complete], dim=1)  # (b, n + k)
        return own, own_mask


__all__ = ["ReadTwice"]
