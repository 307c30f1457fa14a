"""Building blocks shared by the memory-augmented encoders: attention, feed-forward, embeddings.

Every module in this package composes these pieces; a family's own file holds only what makes it
different (its memory and how it is read and written).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ModuleConfig:
    """Sizes shared by the memory-augmented encoders.

    Attributes:
        vocab_size: Token vocabulary (22 for sorting, the tokenizer's size for text).
        d_model: Width of every token vector.
        heads: Attention heads (``d_model`` must divide by it).
        layers: Transformer layers.
        ffn: Inner width of the feed-forward blocks.
        dropout: Dropout on attention outputs and feed-forward blocks.
        max_positions: Longest segment the learned absolute positions cover.
        causal: Mask future tokens inside a segment (language modelling, e.g. sorting); off for
            bidirectional encoding of classification inputs.

    """

    vocab_size: int = 30_522
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    ffn: int = 256
    dropout: float = 0.0
    max_positions: int = 512
    causal: bool = False

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")

    @property
    def head_size(self) -> int:
        """Width of one head, ``d_model / heads``."""
        return self.d_model // self.heads


def bert_module_config(encoder: object, max_positions: int | None = None) -> ModuleConfig:
    """The sizes of a pre-trained BERT-style `HFEncoder`, for a memory attached to it.

    Args:
        encoder: The loaded encoder (its ``model.config`` and ``num_layers``).
        max_positions: Positions a segment may use (default: all the BERT's).

    """
    bert = encoder.model.config  # type: ignore[attr-defined]
    return ModuleConfig(
        vocab_size=bert.vocab_size,
        d_model=bert.hidden_size,
        heads=bert.num_attention_heads,
        layers=encoder.num_layers,  # type: ignore[attr-defined]
        ffn=bert.intermediate_size,
        dropout=bert.hidden_dropout_prob,
        max_positions=bert.max_position_embeddings if max_positions is None else max_positions,
        causal=False,
    )


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(b, t, d) -> (b, heads, t, d / heads)."""
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(b, heads, t, d_h) -> (b, t, heads * d_h)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention that also returns its weights.

    Args:
        q: Queries (b, h, t, d_h).
        k: Keys (b, h, s, d_h).
        v: Values (b, h, s, d_v).
        mask: Boolean, True where a query may attend; broadcastable to (b, h, t, s). A query with
            no allowed key gets zero weights (not NaN).
        bias: Added to the scores before the softmax, broadcastable to (b, h, t, s).
        scale: Score scale; ``1 / sqrt(d_h)`` by default.

    Returns:
        The attended values (b, h, t, d_v) and the weights (b, h, t, s).

    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (b, h, t, s)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask  # rows with no allowed key -> all zeros
    return torch.matmul(weights, v), weights


def padding_mask(key_mask: torch.Tensor) -> torch.Tensor:
    """Key padding (b, s) of 0/1 -> boolean attention mask (b, 1, 1, s)."""
    return key_mask.bool()[:, None, None, :]


def causal_mask(t: int, s: int, device: torch.device | None = None) -> torch.Tensor:
    """Boolean (t, s) mask for ``t`` queries that are the last ``t`` of ``s`` keys (memory first).

    Query i may attend key j when ``j <= i + (s - t)``: all memory positions and the segment's
    own past and present.
    """
    rows = torch.arange(t, device=device)[:, None]
    cols = torch.arange(s, device=device)[None, :]
    return cols <= rows + (s - t)


class MultiHeadAttention(nn.Module):
    """Multi-head attention from queries ``x`` to a (possibly different) key/value source.

    Args:
        d_model: Width of queries, keys and values.
        heads: Number of heads.
        dropout: Dropout on the output projection.

    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.output = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        source: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``x`` (b, t, d) to ``source`` (b, s, d; ``x`` itself by default).

        Args:
            x: Queries (b, t, d).
            source: Keys and values (b, s, d).
            mask: Boolean, broadcastable to (b, heads, t, s), True = may attend.
            return_weights: Also return the attention weights (b, heads, t, s).

        Returns:
            The projected output (b, t, d), and the weights when asked for.

        """
        source = x if source is None else source
        q = split_heads(self.query(x), self.heads)  # (b, h, t, d_h)
        k = split_heads(self.key(source), self.heads)  # (b, h, s, d_h)
        v = split_heads(self.value(source), self.heads)  # (b, h, s, d_h)
        out, weights = attend(q, k, v, mask)
        out = self.dropout(self.output(merge_heads(out)))  # (b, t, d)
        return (out, weights) if return_weights else out


class FeedForward(nn.Module):
    """Position-wise Linear-GELU-Linear with dropout."""

    def __init__(self, d_model: int, inner: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, inner), nn.GELU(), nn.Linear(inner, d_model), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(b, t, d) -> (b, t, d)."""
        return self.net(x)


class TokenEmbedding(nn.Module):
    """Word embeddings plus learned absolute positions within a segment, then LayerNorm.

    Args:
        config: Module sizes (``vocab_size``, ``d_model``, ``max_positions``).
        positions: Add learned absolute positions (modules with relative attention turn it off).

    """

    def __init__(self, config: ModuleConfig, *, positions: bool = True) -> None:
        super().__init__()
        self.words = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = nn.Embedding(config.max_positions, config.d_model) if positions else None
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Token ids (b, t) -> vectors (b, t, d)."""
        return self.finish(self.words(input_ids))

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Word (or memory) vectors (b, t, d) -> + positions 0..t-1, LayerNorm, dropout."""
        if self.positions is not None:
            t = x.shape[1]
            if t > self.positions.num_embeddings:
                raise ValueError(
                    f"segment of {t} positions is longer than max_positions "
                    f"{self.positions.num_embeddings}; use a shorter segment_length"
                )
            x = x + self.positions(torch.arange(t, device=x.device))[None]
        return self.dropout(self.norm(x))

    def at(self, input_ids: torch.Tensor, position: int) -> torch.Tensor:
        """One token per row (b,) at segment ``position`` -> (b, d): `forward`'s column there."""
        x = self.words(input_ids)  # (b, d)
        if self.positions is not None:
            x = x + self.positions.weight[position]
        return self.dropout(self.norm(x))


class TransformerLayer(nn.Module):
    """Post-LN self-attention + feed-forward layer (the memory-less reference block).

    The memory-augmented layers of this package follow the same residual/LayerNorm pattern and
    add their memory read between self-attention and feed-forward. Given a ``source``, the
    queries attend to it instead of to ``x`` (MemCtrl's memory and sequence sub-layers,
    ReadTwice's second read).
    """

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(config.d_model, config.heads, config.dropout)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, source: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(b, t, d), keys/values ``source`` (b, s, d; ``x`` by default), mask to (b, h, t, s)."""
        x = self.norm1(x + self.attention(x, source, mask=mask))
        return self.norm2(x + self.ffn(x))


def segment_mask(
    attention_mask: torch.Tensor, causal: bool, memory_length: int = 0
) -> torch.Tensor:
    """Self-attention mask of a segment whose keys are ``memory_length`` memory slots + its tokens.

    Args:
        attention_mask: The segment's token mask (b, t), 1 = real token.
        causal: Also forbid attending to later tokens of the segment.
        memory_length: Number of (always visible) memory positions before the tokens.

    Returns:
        Boolean mask, True = may attend: (b, 1, t, memory_length + t) when causal, else
        (b, 1, 1, memory_length + t), which broadcasts over the queries.

    """
    b, t = attention_mask.shape
    keys = torch.cat(
        [attention_mask.new_ones(b, memory_length), attention_mask], dim=1
    )  # (b, m + t)
    mask = padding_mask(keys)  # (b, 1, 1, m + t)
    if causal:
        mask = mask & causal_mask(t, memory_length + t, attention_mask.device)[None, None]
    return mask


__all__ = [
    "FeedForward",
    "ModuleConfig",
    "MultiHeadAttention",
    "TokenEmbedding",
    "TransformerLayer",
    "attend",
    "bert_module_config",
    "causal_mask",
    "merge_heads",
    "padding_mask",
    "segment_mask",
    "split_heads",
]
