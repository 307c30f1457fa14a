"""Memory tokens: learned vectors placed among a segment's tokens and read by self-attention.

The pieces the memory-token families share (the memory survey's "Special Input Tokens as
Memory"): the learned initial memory, the embedding of a segment with memory blocks around it
(`embed_with_memory`) and the self-attention mask over such a sequence (`sequence_mask`). The
Memory Transformer (`lifelong.encoders.memory_transformer`) prepends memory tokens to one
segment; the Recurrent Memory Transformer (`lifelong.encoders.rmt`) reads them at a segment's
start, writes them at its end and carries them to the next segment.
"""

from __future__ import annotations

import torch
from torch import nn

from lifelong.encoders.checks import check_at_least
from lifelong.encoders.layers import TokenEmbedding, causal_mask, padding_mask


class MemoryTokens(nn.Module):
    """``m`` learned memory vectors: the memory a document starts from.

    Args:
        slots: Memory tokens m.
        d_model: Their width.

    """

    def __init__(self, slots: int, d_model: int) -> None:
        super().__init__()
        check_at_least(1, slots=slots)
        self.slots = slots
        self.initial = nn.Parameter(torch.randn(slots, d_model) * 0.02)  # (m, d)

    def expand(self, batch: int) -> torch.Tensor:
        """The initial memory of ``batch`` documents: (b, m, d)."""
        return self.initial[None].expand(batch, -1, -1)


def embed_with_memory(
    embed: TokenEmbedding,
    input_ids: torch.Tensor,
    before: torch.Tensor | None,
    after: torch.Tensor | None,
) -> torch.Tensor:
    """Embed ``[before; tokens; after]`` as one sequence: word or memory vectors + positions.

    Memory vectors take the place of word embeddings; every position of the whole sequence gets
    its learned absolute position (as the RMT reference code feeds memory through the model's
    ``inputs_embeds``, where GPT-2 and BERT add positions to every slot), then the embedding's
    LayerNorm and dropout.

    Args:
        embed: The module's token embedding.
        input_ids: Token ids (b, t).
        before: Memory vectors before the tokens (b, m1, d), or None.
        after: Memory vectors after them (b, m2, d), or None.

    Returns:
        (b, m1 + t + m2, d).

    """
    parts = [p for p in (before, embed.words(input_ids), after) if p is not None]
    return embed.finish(torch.cat(parts, dim=1))  # (b, s, d)


def sequence_mask(
    attention_mask: torch.Tensor, before: int, after: int, causal: bool
) -> torch.Tensor:
    """Self-attention mask over ``[before memory; tokens; after memory]``.

    Memory slots are always valid keys; padded tokens never are. With ``causal`` a token
    attends to itself and the positions before it, and a memory slot also to every slot of its
    own block (the RMT reference's mask, booydar/LM-RMT ``pytorch/mem_transformer.py``: the read
    block sees itself whole, the write block itself and everything before it). So memory read
    at the start is visible to every token and memory written at the end reads the whole
    segment, and no token sees a later token.

    Args:
        attention_mask: The segment's token mask (b, t), 1 = real token.
        before: Memory slots before the tokens.
        after: Memory slots after them.
        causal: Forbid attending to later positions.

    Returns:
        Boolean (b, 1, s, s) when causal, else (b, 1, 1, s), True = may attend; s = before + t
        + after.

    """
    b = attention_mask.shape[0]
    keys = torch.cat(
        [
            attention_mask.new_ones(b, before),
            attention_mask,
            attention_mask.new_ones(b, after),
        ],
        dim=1,
    )  # (b, s)
    mask = padding_mask(keys)  # (b, 1, 1, s)
    if causal:
        s, t = keys.shape[1], attention_mask.shape[1]
        block = torch.zeros(s, dtype=torch.long, device=attention_mask.device)  # 0: tokens
        block[:before], block[before + t :] = 1, 2  # the read and the write block
        same = (block[:, None] == block[None, :]) & (block[:, None] > 0)  # (s, s)
        allowed = causal_mask(s, s, attention_mask.device) | same  # (s, s)
        mask = mask & allowed[None, None]  # (b, 1, s, s)
    return mask


__all__ = ["MemoryTokens", "embed_with_memory", "sequence_mask"]
