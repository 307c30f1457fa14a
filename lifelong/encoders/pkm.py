"""Product-key memory (Lample et al., NeurIPS 2019): a memory layer in place of a feed-forward.

A query network (a linear map then batch norm, section 3.2 "Query batchnorm") maps each token to
one query per head; the query's two halves are scored against two sets of |C| sub-keys, the
top k of each set are kept, and the k × k sums of their scores are the scores of the k × k
candidate product keys (c_i, c′_j), out of |C|² keys in all. The top k candidates are
softmax-weighted and their values summed (section 3.1–3.2):

    I = T_k(q(x)ᵀ k_i) over the product keys, w = softmax((q(x)ᵀ k_i)_{i∈I}), m(x) = Σ_i w_i v_i

and the heads' outputs are added, all heads reading one value table (section 3.3, "Multi-head
memory"). Because the top k over the sum of two scores is always among the sums of the top k
of each (the paper's argument, tested against an exhaustive top-k over all |C|² keys), the
search costs O((|C| + k²)·d_q) instead of O(|C|²·d_q).

The values are an `nn.EmbeddingBag` read with per-sample weights, as the reference
implementation (facebookresearch/XLM, ``xlm/model/memory/memory.py``, ``HashingMemory``) reads
them. With ``sparse=True`` their gradient is sparse (only the k rows read per token), and the
paper trains them with sparse updates (section 4.2: a separate sparse Adam at lr 1e-3):
`sparse_parameters` names them so a training loop can give them `torch.optim.SparseAdam`. The
continual-learning strategies' optimisers are dense, so `lifelong run --encoder pkm` builds the
memory with dense value gradients (same outputs, every row's gradient materialised).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.layers import (
    FeedForward,
    ModuleConfig,
    MultiHeadAttention,
    TokenEmbedding,
    segment_mask,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool


class ProductKeyMemory(nn.Module):
    """The product-key memory layer.

    Args:
        d_model: Input and output width.
        sub_keys: |C|, the size of each sub-key set; the memory has |C|² keys and values
            (the paper: 512, so 262,144 slots).
        k: Top-k at both stages (the paper: 32).
        heads: Query heads H reading the shared values (the paper: 4).
        key_dim: d_q, the query and product-key width; each sub-key has d_q / 2 (the paper: 512;
            XLM's default ``mem_k_dim`` 256).
        sparse: Sparse value gradients (see the module docstring).
        query_batchnorm: Batch norm on the queries (the paper's section 3.2; it improves the
            keys' usage).

    """

    def __init__(
        self,
        d_model: int,
        *,
        sub_keys: int = 512,
        k: int = 32,
        heads: int = 4,
        key_dim: int = 256,
        sparse: bool = False,
        query_batchnorm: bool = True,
    ) -> None:
        super().__init__()
        if key_dim % 2:
            raise ValueError(f"key_dim must be even (two halves), got {key_dim}")
        if not 1 <= k <= sub_keys:
            raise ValueError(f"k must be in 1..sub_keys ({sub_keys}), got {k}")
        self.sub_keys, self.k, self.heads, self.key_dim = sub_keys, k, heads, key_dim
        query = [nn.Linear(d_model, heads * key_dim)]
        if query_batchnorm:
            query.append(nn.BatchNorm1d(heads * key_dim))
        self.query = nn.Sequential(*query)
        # XLM's get_uniform_keys: uniform in ±1/√(d_q/2) for each half
        bound = 1.0 / math.sqrt(key_dim // 2)
        self.keys = nn.Parameter(
            torch.empty(heads, 2, sub_keys, key_dim // 2).uniform_(-bound, bound)
        )  # (H, 2, |C|, d_q / 2)
        self.values = nn.EmbeddingBag(sub_keys**2, d_model, mode="sum", sparse=sparse)
        nn.init.normal_(self.values.weight, mean=0.0, std=d_model**-0.5)  # XLM's init

    @property
    def size(self) -> int:
        """The number of memory slots, |C|²."""
        return self.sub_keys**2

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens (n, d) -> queries (n, H, d_q)."""
        return self.query(x).view(x.shape[0], self.heads, self.key_dim)

    def search(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The top-k product keys of each query: scores and slot ids, both (n, H, k).

        Slot id ``i · |C| + j`` is the product key (c_i, c′_j).
        """
        half = self.key_dim // 2
        first = torch.einsum("nhd,hcd->nhc", queries[..., :half], self.keys[:, 0])  # (n, H, |C|)
        second = torch.einsum("nhd,hcd->nhc", queries[..., half:], self.keys[:, 1])
        s1, i1 = first.topk(self.k, dim=-1)  # (n, H, k)
        s2, i2 = second.topk(self.k, dim=-1)
        candidates = (s1[..., :, None] + s2[..., None, :]).flatten(-2)  # (n, H, k * k)
        ids = (i1[..., :, None] * self.sub_keys + i2[..., None, :]).flatten(-2)
        scores, best = candidates.topk(self.k, dim=-1)  # (n, H, k)
        return scores, ids.gather(-1, best)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens (n, d) -> memory outputs (n, d): the heads' weighted values, summed."""
        scores, ids = self.search(self.queries(x))  # (n, H, k)
        weights = torch.softmax(scores.float(), dim=-1).to(self.values.weight.dtype)
        n = x.shape[0]
        return self.values(ids.reshape(n, -1), per_sample_weights=weights.reshape(n, -1))


class PKMLayer(nn.Module):
    """Post-LN block whose feed-forward sublayer is a product-key memory (or a plain FFN).

    The memory reads real tokens only, so padding never enters its batch norm statistics.
    """

    def __init__(self, config: ModuleConfig, memory: ProductKeyMemory | None) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(config.d_model, config.heads, config.dropout)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.memory = memory
        self.ffn = None if memory is not None else FeedForward(config.d_model, config.ffn)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """(b, t, d) -> (b, t, d): x + PKM(x) where the FFN's x + FFN(x) was."""
        x = self.norm1(x + self.attention(x, mask=mask))
        if self.memory is None:
            return self.norm2(x + self.ffn(x))
        real = attention_mask.bool()  # (b, t)
        read = x.new_zeros(x.shape)
        read[real] = self.memory(x[real]).to(x.dtype)  # (n_real, d)
        return self.norm2(x + self.dropout(read))


class PKMTransformer(SegmentEncoder):
    """A Transformer with product-key memories in place of the feed-forward block of some layers.

    The memory is a layer, not a recurrent state: it holds what training wrote into its values,
    and segments are encoded independently (``memory`` is ``None``).

    Args:
        config: Module sizes.
        memory_layers: Which layers get a memory (the paper inserts one to three; its ablation,
            section 4.5, finds an intermediate layer better than the first or last). Default:
            layer ``layers // 2``.
        **memory: `ProductKeyMemory` options (``sub_keys``, ``k``, ``heads``, ``key_dim``,
            ``sparse``, ``query_batchnorm``).

    """

    def __init__(
        self, config: ModuleConfig, *, memory_layers: Sequence[int] | None = None, **memory: Any
    ) -> None:
        super().__init__(config)
        chosen = (config.layers // 2,) if memory_layers is None else tuple(memory_layers)
        if not chosen or any(not 0 <= i < config.layers for i in chosen):
            raise ValueError(f"memory_layers must be in 0..{config.layers - 1}, got {chosen}")
        self.memory_layers = chosen
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(
            PKMLayer(config, ProductKeyMemory(config.d_model, **memory) if i in chosen else None)
            for i in range(config.layers)
        )

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t); there is no memory across segments (returned as ``None``)."""
        x = self.embed(input_ids)  # (b, t, d)
        mask = segment_mask(attention_mask, self.config.causal)
        for layer in self.layers:
            x = layer(x, mask, attention_mask)
        return EncoderOutput(hidden=x, pooled=mean_pool(x, attention_mask), memory=None)

    def memories(self) -> Iterator[ProductKeyMemory]:
        """The product-key memories, first layer first."""
        return (layer.memory for layer in self.layers if layer.memory is not None)


def sparse_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The value tables of every sparse product-key memory in ``model`` (for a sparse optimiser)."""
    memories = (m for m in model.modules() if isinstance(m, ProductKeyMemory))
    return [m.values.weight for m in memories if m.values.sparse]


__all__ = ["PKMLayer", "PKMTransformer", "ProductKeyMemory", "sparse_parameters"]
