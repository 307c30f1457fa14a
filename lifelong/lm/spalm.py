"""SPALM (Yogatama et al., TACL 2021): local context, short-term and long-term memory, gated.

Three parts (section 3; the memory survey's "SPALM" section):

* local context and short-term memory: a Transformer-XL (`CausalLM` over
  `lifelong.encoders.transformer_xl.TransformerXL`), whose final state h_t is the query;
* long-term memory: a datastore with one entry per training position, key d_i = the final
  context vector of a *separately trained, frozen* LM at i, value = the token that followed.
  It is the project's episodic memory built by `lifelong.lm.knn_lm.build_datastore` (the same
  datastore kNN-LM reads); the K nearest keys of the frozen LM's vector d_t give tokens
  y_1..y_K, embedded with the model's own word embedding E (trained with the model);
* aggregation and gate: m_t = Σ_k softmax_k(y_kᵀ h_t) y_k, g_t = σ(w_gᵀ h_t) (a scalar per
  token; w_g is the only new parameter), z_t = (1 − g_t) · m_t + g_t · h_t, and
  p(x_{t+1}) = softmax(W z_t) with W = E, the tied output embedding.

g_t near 1 predicts from the local state alone (tested: at g = 1 the logits are the
Transformer-XL's); `gate_histogram` reports the distribution of g over tokens, as the paper's
analysis of where the long-term memory is used.

Neighbours are looked up once per position (`NeighbourTable`): a training position's query is
its stored key, and the position itself is excluded (its value is the very token to predict);
the paper does not say how it keeps a training context from retrieving itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lifelong.lm.knn_lm import TOKEN, keys_and_logits
from lifelong.lm.text import CausalLM, whole_windows
from lifelong.memory import EpisodicMemory


@dataclass(frozen=True)
class NeighbourTable:
    """The K long-term-memory tokens of every position of a text, looked up once.

    Attributes:
        tokens: (n, K) long: the values of the K nearest keys, nearest first.
        found: (n, K) bool: False where fewer than K were found (and for positions past the
            last whole window, which have no key).

    """

    tokens: torch.Tensor
    found: torch.Tensor

    def rows(self, starts: np.ndarray, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The neighbours of windows starting at ``starts``: (b, length, K) each."""
        index = torch.from_numpy(np.asarray(starts)[:, None] + np.arange(length))  # (b, T)
        return self.tokens[index], self.found[index]


@torch.no_grad()
def neighbour_table(
    keys_model: CausalLM,
    memory: EpisodicMemory,
    data: np.ndarray,
    window: int,
    k: int,
    *,
    exclude_own: bool,
    batch_size: int = 64,
) -> NeighbourTable:
    """Look up the K neighbours of every position of ``data``.

    Args:
        keys_model: The frozen LM whose context vectors are the keys.
        memory: The datastore (`build_datastore` over the training text with ``keys_model``).
        data: The text (training or validation ids).
        window: Characters per window (as the datastore was built).
        k: Neighbours per position.
        exclude_own: ``data`` is the datastore's own text: position i never retrieves entry i.
        batch_size: Windows per forward pass.

    """
    keys_model.eval()
    n = len(data)
    tokens = torch.zeros(n, k, dtype=torch.long)
    found = torch.zeros(n, k, dtype=torch.bool)
    extra = 1 if exclude_own else 0
    for x, _, starts in whole_windows(data, window, batch_size):
        keys, _ = keys_and_logits(keys_model, x)
        queries = keys.reshape(-1, keys.shape[-1]).float().cpu().numpy()
        _, slots = memory.nearest(queries, k + extra)  # (b * T, <= k + extra)
        positions = (starts[:, None] + np.arange(x.shape[1])).reshape(-1)  # (b * T,)
        keep = slots >= 0  # an approximate index may find fewer (slot -1)
        if exclude_own:
            keep &= slots != positions[:, None]
        order = np.argsort(~keep, axis=1, kind="stable")  # kept first, in distance order
        slots = np.take_along_axis(slots, order, 1)[:, :k]
        valid = np.take_along_axis(keep, order, 1)[:, :k]
        width = slots.shape[1]
        values = memory.get_array(TOKEN, np.where(valid, slots, 0))[..., 0]  # (b * T, width)
        tokens[positions, :width] = torch.from_numpy(values.astype(np.int64))
        found[positions, :width] = torch.from_numpy(valid)
    return NeighbourTable(tokens, found)


class SemiparametricLM(nn.Module):
    """The semiparametric LM: a local `CausalLM` (Transformer-XL) plus gated long-term memory.

    Args:
        local: The local model (its ``module.embed.words`` is E, tied to its head).

    """

    def __init__(self, local: CausalLM) -> None:
        super().__init__()
        words = getattr(getattr(local.module, "embed", None), "words", None)
        if not isinstance(words, nn.Embedding) or local.head.weight is not words.weight:
            raise ValueError("SPALM needs a local model whose head is tied to its word embedding")
        self.local = local
        self.gate = nn.Linear(local.module.hidden_size, 1, bias=False)  # w_g

    def mix(
        self, hidden: torch.Tensor, tokens: torch.Tensor, found: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """z_t and g_t from local states (b, T, d) and neighbour tokens / found (b, T, K)."""
        y = self.local.module.embed.words(tokens)  # (b, T, K, d): the model's own embedding
        scores = torch.einsum("btkd,btd->btk", y, hidden)  # y_kᵀ h_t
        scores = scores.masked_fill(~found, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1) * found  # no neighbour -> m_t = 0
        memory = torch.einsum("btk,btkd->btd", weights, y)  # m_t (b, T, d)
        gate = torch.sigmoid(self.gate(hidden))  # g_t (b, T, 1)
        return (1 - gate) * memory + gate * hidden, gate[..., 0]

    def forward(
        self, input_ids: torch.Tensor, tokens: torch.Tensor, found: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Next-character logits (b, T, V) and the gate g_t (b, T)."""
        mixed, gate = self.mix(self.local.hidden(input_ids), tokens.to(input_ids.device),
                               found.to(input_ids.device))  # fmt: skip
        return self.local.head(mixed), gate


def gate_histogram(gates: torch.Tensor, bins: int = 10) -> list[float]:
    """The fraction of tokens whose gate g_t falls in each of ``bins`` equal bins of [0, 1]."""
    counts = torch.histc(gates.float().flatten(), bins=bins, min=0.0, max=1.0)
    return (counts / max(1, gates.numel())).tolist()


__all__ = ["SemiparametricLM", "NeighbourTable", "gate_histogram", "neighbour_table"]
