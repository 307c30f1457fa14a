"""The Recurrent Memory Transformer (Bulatov et al., NeurIPS 2022; Bulatov et al., 2023).

A plain Transformer reads each segment together with ``m`` memory tokens and hands the memory
tokens' outputs to the next segment, so the memory is the only path between segments and
gradients reach earlier segments through it (back-propagation through time, truncated to a
window of ``bptt`` segments).

Layouts (NeurIPS 2022 paper, section 3, and the memory survey's equation
``H̃⁰_τ = [H_mem_τ ∘ H⁰_τ ∘ H_mem_τ]``):

* causal (decoder-only): ``[mem; segment; mem]`` — the first block is the memory *read* by every
  token (it is visible to all of them under the causal mask), the last block, the same memory
  vectors at the end, *writes*: it attends to the whole segment and its outputs are the next
  segment's memory.
* bidirectional (encoder-only, as RMT on BERT in the 2023 report): ``[mem; segment]``, every
  position sees every other, and the outputs at the memory positions are the next memory.

A document starts from learned memory vectors (`MemoryTokens`; one random vector per slot, as
the Hugging Face reference, yurakuratov/t5-experiments ``modeling_rmt``, where the NeurIPS code
repeats one vector m times). Memory tokens get positions
like any other slot (`embed_with_memory`). The 2023 report trains with a curriculum over the
number of segments (one segment first, more once training has converged): `curriculum_segments`
is that schedule over a fixed number of steps.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least
from lifelong.encoders.layers import (
    ModuleConfig,
    TokenEmbedding,
    TransformerLayer,
    bert_module_config,
)
from lifelong.encoders.memory_tokens import MemoryTokens, embed_with_memory, sequence_mask
from lifelong.encoders.segments import SegmentEncoder, mean_pool


class RecurrentMemoryTransformer(SegmentEncoder):
    """RMT: a Transformer whose memory tokens carry the state from segment to segment.

    The memory is ``{"tokens": (b, m, d), "depth": (b,) long}``: the memory vectors and the
    number of segments their graph spans. With ``bptt = k`` the memory is detached before the
    segment that would make the graph longer than k segments, so gradients cross at most
    ``k - 1`` segment boundaries (truncated BPTT over windows of k segments, as the 2023 report
    trains); ``bptt=None`` never detaches (full BPTT over the document).

    Args:
        config: Module sizes; ``max_positions`` must cover the segment plus its memory blocks
            (`memory_module_config` widens it).
        slots: Memory tokens m (10, the 2023 report's, section 4; the NeurIPS paper's
            WikiText-103 runs sweep 1 to 150, booydar/LM-RMT ``experiment_results``).
        bptt: Segments per back-propagation window, or None for the whole document.

    """

    def __init__(self, config: ModuleConfig, slots: int = 10, bptt: int | None = None) -> None:
        super().__init__(config)
        if bptt is not None and bptt < 1:
            raise ValueError(f"bptt must be >= 1 or None, got {bptt}")
        self.slots = slots
        self.bptt = bptt
        self.memory = MemoryTokens(slots, config.d_model)
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.layers))

    @property
    def write_slots(self) -> int:
        """Memory positions after the segment: m when causal (write block), else 0."""
        return self.slots if self.config.causal else 0

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) with the memory tokens; returns the written memory.

        Returns:
            ``hidden`` (b, t, d) (zero at padding), ``pooled`` (b, d) (masked mean of the
            segment's tokens) and the memory ``{"tokens": (b, m, d), "depth": (b,)}``.

        """
        b, t = input_ids.shape
        tokens, depth = read_memory(memory, self.memory, b, self.bptt)
        m, after = self.slots, self.write_slots
        write = tokens if after else None
        x = embed_with_memory(self.embed, input_ids, tokens, write)  # (b, m + t + after, d)
        mask = sequence_mask(attention_mask, m, after, self.config.causal)
        for layer in self.layers:
            x = layer(x, mask)
        valid = attention_mask[:, :, None].to(x.dtype)  # (b, t, 1)
        hidden = x[:, m : m + t] * valid  # (b, t, d)
        written = x[:, m + t :] if after else x[:, :m]  # (b, m, d)
        return EncoderOutput(
            hidden=hidden,
            pooled=mean_pool(hidden, attention_mask),
            memory={"tokens": written, "depth": depth + 1},
        )


def read_memory(
    memory: Any, initial: MemoryTokens, batch: int, bptt: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The memory tokens (b, m, d) a segment reads and their graph depth (b,).

    ``memory=None`` starts a document from the learned initial memory. A memory whose graph
    already spans ``bptt`` segments is detached (truncated BPTT).

    Raises:
        ValueError: A memory of another batch size or number of slots.

    """
    if memory is None:
        tokens = initial.expand(batch)
        return tokens, torch.zeros(batch, dtype=torch.long, device=tokens.device)
    tokens, depth = memory["tokens"], memory["depth"]
    if tuple(tokens.shape[:2]) != (batch, initial.slots):
        raise ValueError(
            f"memory tokens have shape {tuple(tokens.shape)}, expected "
            f"({batch}, {initial.slots}, {initial.initial.shape[1]})"
        )
    if bptt is not None and int(depth.max()) >= bptt:
        return tokens.detach(), torch.zeros_like(depth)
    return tokens, depth


class RecurrentMemoryBert(SegmentEncoder):
    """RMT on a pre-trained BERT-style encoder (``rmt-minilm``): it reads long inputs in segments.

    Each segment is read as ``[segment; memory]`` by the unchanged BERT; the memory tokens'
    outputs are the next segment's memory (the encoder-only RMT of the 2023 report, section 2,
    with the memory after the segment rather than after [CLS]: so the segment's tokens keep
    the positions BERT gives them alone, and with the memory masked out the model computes
    exactly what the BERT computes; tested). Memory tokens take the word-embedding slot and the
    last ``m`` learned positions of the BERT (``max_position_embeddings - m`` on), the same in
    every segment. ``pooled`` is the encoder's pooled vector of the segment (`HFEncoder.pool`).

    Args:
        encoder: The pre-trained `HFEncoder` (``load_encoder("minilm")``; ``"tiny"`` in tests).
        slots: Memory tokens m (the 2023 report's BERT: 10).
        bptt: Segments per back-propagation window, or None for the whole document.
        seed: Seed of the initial memory's initialisation.

    """

    def __init__(
        self, encoder: Any, slots: int = 10, bptt: int | None = None, seed: int = 0
    ) -> None:
        bert = encoder.model.config
        config = bert_module_config(encoder, bert.max_position_embeddings - slots)
        super().__init__(config)
        if bptt is not None and bptt < 1:
            raise ValueError(f"bptt must be >= 1 or None, got {bptt}")
        self.encoder = encoder
        self.slots = slots
        self.bptt = bptt
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.memory = MemoryTokens(slots, config.d_model)
            nn.init.normal_(self.memory.initial, std=bert.initializer_range)  # BERT's init

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        memory: Any = None,
        read_memory_tokens: bool = True,
    ) -> EncoderOutput:
        """Encode a segment (b, t) with the memory tokens after it.

        Args:
            input_ids: Token ids (b, t), t at most ``max_position_embeddings - m``.
            attention_mask: (b, t), 1 = real token.
            memory: The previous segment's memory, or None.
            read_memory_tokens: False masks the memory tokens out of every token's attention
                (then ``hidden`` and ``pooled`` are the BERT's on the segment alone).

        """
        b, t = input_ids.shape
        if t > self.config.max_positions:
            raise ValueError(
                f"segment of {t} tokens: the BERT's {self.config.max_positions + self.slots} "
                f"positions leave {self.config.max_positions} beside {self.slots} memory tokens"
            )
        tokens, depth = read_memory(memory, self.memory, b, self.bptt)
        embeddings = self.encoder.model.embeddings
        words = embeddings.word_embeddings(input_ids)  # (b, t, d)
        first = self.config.max_positions  # the memory's positions: the table's last m rows
        positions = torch.cat([torch.arange(t), torch.arange(first, first + self.slots)]).to(
            input_ids.device
        )[None]  # (1, t + m)
        x = embeddings(
            inputs_embeds=torch.cat([words, tokens.to(words.dtype)], dim=1), position_ids=positions
        )  # (b, t + m, d)
        keys = attention_mask.new_ones(b, self.slots) * int(read_memory_tokens)
        mask = torch.cat([attention_mask, keys], dim=1)  # (b, t + m)
        x = self.encoder.run_stages(x, mask, 1, self.encoder.num_layers + 1)  # (b, t + m, d)
        hidden = x[:, :t]
        return EncoderOutput(
            hidden=hidden,
            pooled=self.encoder.pool(hidden),
            memory={"tokens": x[:, t:], "depth": depth + 1},
        )


def memory_module_config(
    config: ModuleConfig, segment_length: int, slots: int, blocks: int = 2
) -> ModuleConfig:
    """``config`` with positions for a segment and its memory blocks (RMT's read and write)."""
    needed = segment_length + blocks * slots
    return replace(config, max_positions=max(config.max_positions, needed))


def curriculum_segments(step: int, steps: int, max_segments: int) -> int:
    """Segments per training sequence at ``step``: 1, 2, …, ``max_segments`` in equal stages.

    The 2023 report (section 3) starts from one segment and adds segments when training on the
    current number has converged; over a fixed budget of ``steps`` we give each number of
    segments an equal share of the steps.
    """
    check_at_least(1, steps=steps, max_segments=max_segments)
    return min(max_segments, 1 + step * max_segments // steps)


__all__ = [
    "RecurrentMemoryBert",
    "RecurrentMemoryTransformer",
    "curriculum_segments",
    "memory_module_config",
    "read_memory",
]
