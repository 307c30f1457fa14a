"""Segatron-XL (Bai et al., AAAI 2021): Transformer-XL with segment-aware relative positions.

Every token has three positions: its paragraph, its sentence and its token index, each a running
counter over the document that never restarts (the reference's ``SegaVocab``,
rsvp-ai/segatron_aaai ``segatron-xl/utils/vocabulary.py``: only differences are used). The
relative position vector of Transformer-XL becomes the concatenation of three sinusoids, of the
token, sentence and paragraph distances between query and key (``mem_transformer.py``,
``SegaMemTransformerLM``: widths ``d/3``, ``d/3`` and the rest, each even)::

    R_{i,j} = [sin/cos(Δt_ij); sin/cos(Δs_ij); sin/cos(Δp_ij)]

Because the projection ``W_R`` is linear, ``W_R R`` is the sum of the three blocks' terms, so
the attention adds three gathered position terms (`RelativeAttention` takes one table per kind
of distance). The paragraph and sentence counters of the cached states travel with the cache.

The splitter (`structure_flags`, `text_positions`). A paragraph is a line (WikiText-103's
convention, which the reference follows: one paragraph per line); a sentence ends at ``.``,
``!`` or ``?`` or at a paragraph's end. A token's counters count the ends *before* it, so they
depend on the text up to the token only (a causal model learns nothing about the next token
from its own positions). The reference splits sentences with NLTK's ``sent_tokenize``; ours is
the punctuation rule, which needs no model and works on characters as on word pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.transformer_xl import (
    RelativePositions,
    TransformerXL,
    sinusoidal_embedding,
)

SENTENCE_ENDS = (".", "!", "?")
"""Characters (or tokens) that end a sentence."""

PARAGRAPH_ENDS = ("\n",)
"""Characters that end a paragraph (and its last sentence): a paragraph is a line."""


def structure_flags(tokens: Sequence[str]) -> np.ndarray:
    """Per token, whether it ends a sentence and whether it ends a paragraph: (n, 2) bool."""
    sentence = np.array([t in SENTENCE_ENDS or t in PARAGRAPH_ENDS for t in tokens], dtype=bool)
    paragraph = np.array([t in PARAGRAPH_ENDS for t in tokens], dtype=bool)
    return np.stack([sentence, paragraph], axis=1).reshape(len(tokens), 2)


def text_positions(text: str) -> np.ndarray:
    """Segatron's positions of every character of a plain text: (n, 3) paragraph, sentence, token.

    Paragraph and sentence are the numbers of paragraph and sentence ends before the
    character; token is its index. All three run over the whole text.
    """
    flags = structure_flags(list(text)).astype(np.int64)  # (n, 2)
    before = np.cumsum(flags, axis=0) - flags  # ends strictly before each character
    return np.stack([before[:, 1], before[:, 0], np.arange(len(text))], axis=1)


def boundary_ids(token_id: Any) -> dict[str, list[int]]:
    """`Segatron`'s ``sentence_ends`` and ``paragraph_ends`` in a vocabulary.

    Args:
        token_id: Maps a token (a character or a word piece) to its id, or None (or raises
            `KeyError`) where the vocabulary lacks it.

    """

    def ids(tokens: Sequence[str]) -> list[int]:
        found = []
        for token in tokens:
            try:
                i = token_id(token)
            except KeyError:
                continue
            if i is not None:
                found.append(int(i))
        return found

    return {"sentence_ends": ids(SENTENCE_ENDS), "paragraph_ends": ids(PARAGRAPH_ENDS)}


def _widths(d_model: int) -> tuple[int, int, int]:
    """Widths of the token, sentence and paragraph blocks: d/3, d/3 (even) and the rest."""
    third = (d_model // 3) // 2 * 2
    return third, third, d_model - 2 * third


class Segatron(TransformerXL):
    """Transformer-XL whose relative positions are token, sentence and paragraph distances.

    The memory adds ``"structure"`` (b, m, 2), the sentence and paragraph counters of each
    cached slot, and ``"counts"`` (b, 2), the ends read so far in the document.

    Args:
        config: Module sizes (``d_model`` even, at least 6).
        memory_length: Cached tokens per layer.
        sentence_ends: Token ids that end a sentence (a paragraph end also ends one).
        paragraph_ends: Token ids that end a paragraph.
        **kwargs: `TransformerXL`'s options (``same_length``, ``recurrence``).

    """

    def __init__(
        self,
        config: ModuleConfig,
        memory_length: int,
        sentence_ends: Sequence[int] = (),
        paragraph_ends: Sequence[int] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(config, memory_length, **kwargs)
        if min(_widths(config.d_model)) < 2:
            raise ValueError(f"d_model {config.d_model} is too narrow for three position blocks")
        ends = torch.zeros(config.vocab_size, 2, dtype=torch.bool)
        for column, ids in ((0, [*sentence_ends, *paragraph_ends]), (1, paragraph_ends)):
            for i in ids:
                if not 0 <= i < config.vocab_size:
                    raise ValueError(f"boundary token id {i} is outside the vocabulary")
                ends[i, column] = True
        self.register_buffer("ends", ends, persistent=False)  # (V, 2) sentence, paragraph

    def initial_memory(
        self, batch: int, device: torch.device | None = None, dtype: torch.dtype | None = None
    ) -> dict[str, Any]:
        """An empty memory, with zero counters."""
        memory = super().initial_memory(batch, device, dtype)
        memory["structure"] = torch.zeros(batch, self.memory_length, 2, device=device)
        memory["counts"] = torch.zeros(batch, 2, device=device)
        return memory

    def _structure(self, input_ids: torch.Tensor, valid: torch.Tensor, memory: Any) -> Any:
        """The segment's sentence and paragraph counters (b, t, 2), and the keys' (b, s, 2)."""
        ends = self.ends[input_ids].float() * valid[:, :, None]  # (b, t, 2)
        segment = memory["counts"][:, None, :] + ends.cumsum(dim=1) - ends  # ends before each
        return {
            "segment": segment,
            "keys": torch.cat([memory["structure"], segment], dim=1),  # (b, s, 2)
            "counts": memory["counts"] + ends.sum(dim=1),
        }

    def _positions(
        self, key_valid: torch.Tensor, t: int, structure: Any = None
    ) -> RelativePositions:
        _, token_index, mask = super()._positions(key_valid, t)
        s, d = key_valid.shape[1], self.config.d_model
        span = self._distance_range(t, s, key_valid.device)  # (n_rel,)
        keys = structure["keys"]  # (b, s, 2)
        tables, indices, start = [], [], 0
        for block, width in enumerate(_widths(d)):
            table = torch.zeros(span.numel(), d, device=key_valid.device)
            table[:, start : start + width] = sinusoidal_embedding(span, width)
            tables.append(table.to(self.embed.words.weight.dtype))
            start += width
            if block == 0:  # token distances: Transformer-XL's, over real positions
                indices.append(token_index)
                continue
            level = keys[..., block - 1]  # (b, s): 1 = sentence, 2 = paragraph counters
            distance = (level[:, -t:, None] - level[:, None, :]).long()  # (b, t, s)
            indices.append((distance - span[0]).clamp(min=0, max=span.numel() - 1))
        return RelativePositions(tuple(tables), tuple(indices), mask)

    def _update_memory(
        self,
        memory: dict[str, Any],
        inputs: list[torch.Tensor],
        valid: torch.Tensor,
        structure: Any = None,
    ) -> dict[str, Any]:
        """Cache the states and, slot for slot, their counters (one FIFO for both)."""
        states, mask, _, _ = self._push(
            [*memory["states"], memory["structure"]], memory["mask"],
            [*inputs, structure["segment"]], valid,
        )  # fmt: skip
        return {
            "states": states[:-1],
            "mask": mask,
            "structure": states[-1],
            "counts": structure["counts"],
        }


def segment_distances(model: Segatron, input_ids: torch.Tensor) -> torch.Tensor:
    """The (sentence, paragraph) counters of a document's first segment (b, t): (b, t, 2)."""
    valid = torch.ones_like(input_ids, dtype=torch.bool)
    memory = model.initial_memory(input_ids.shape[0], input_ids.device)
    return model._structure(input_ids, valid, memory)["segment"]


__all__ = [
    "PARAGRAPH_ENDS",
    "SENTENCE_ENDS",
    "Segatron",
    "boundary_ids",
    "segment_distances",
    "structure_flags",
    "text_positions",
]
