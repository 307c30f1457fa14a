"""Segment-recurrent encoding: the memory modules' base class and the document encoder.

The document encoder carries a module's memory across the segments of a long input.

A *segment encoder* encodes one segment ``(b, t)`` given the memory left by the previous segments
and returns the new memory in `EncoderOutput.memory`. `DocumentEncoder` splits a long input into
segments and runs any segment encoder over them, so every family (Transformer-XL, Compressive,
Memformer, ∞-former, Memoria, Memorizing) plugs into the classification streams the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least
from lifelong.encoders.layers import ModuleConfig, TokenEmbedding, TransformerLayer, segment_mask


@dataclass(frozen=True)
class SegmentWrap:
    """Read every segment as ``[CLS] tokens [SEP]``: how a BERT under a memory sees a segment.

    Bulatov et al. (2023, "Scaling Transformer to 1M tokens and beyond with RMT", §2 and their
    BERT runs) cut the text, not its tokenisation, into segments and give each the BERT's
    special tokens, so the pooled [CLS] of the last segment is a real [CLS] (not, as with raw
    slices of one tokenised input, whatever word piece starts that slice).

    Attributes:
        cls: The [CLS] token id.
        sep: The [SEP] token id.

    """

    cls: int
    sep: int

    def segments(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, length: int
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor, torch.Tensor]:
        """The wrapped segments and where each input position's vector is read from.

        Args:
            input_ids: One tokenised input per row, (b, T), with its own [CLS]/[SEP].
            attention_mask: (b, T), 1 = real token.
            length: Tokens per segment, the two special tokens included.

        Returns:
            The segments as (ids, mask), each (b, length) (a row with no text left in a
            segment has an all-zero mask); and, per input position (b, T), the segment and
            the position in it whose vector stands for it (-1 for padding): text tokens their
            own, the input's [CLS] the first segment's, its [SEP] the last segment's.

        """
        check_at_least(3, segment_length=length)
        b, total = input_ids.shape
        chunk = length - 2
        real = attention_mask.bool()
        text = real & (input_ids != self.cls) & (input_ids != self.sep)
        counts = text.sum(dim=1).tolist()
        n = max(1, max(-(-c // chunk) for c in counts))
        ids = input_ids.new_zeros(n, b, length)
        mask = attention_mask.new_zeros(n, b, length)
        where = torch.full((b, total), -1, dtype=torch.long, device=input_ids.device)
        place = torch.zeros((b, total), dtype=torch.long, device=input_ids.device)
        for r in range(b):
            positions = text[r].nonzero().squeeze(1)  # (c,) the row's text, in order
            last = max(0, -(-counts[r] // chunk) - 1)
            for s in range(last + 1):
                part = positions[s * chunk : (s + 1) * chunk]
                k = len(part)
                ids[s, r, 0], ids[s, r, 1 : k + 1], ids[s, r, k + 1] = (
                    self.cls,
                    input_ids[r, part],
                    self.sep,
                )
                mask[s, r, : k + 2] = 1
                where[r, part], place[r, part] = s, torch.arange(1, k + 1, device=place.device)
            specials = real[r] & ~text[r]
            first = specials & (input_ids[r] == self.cls)
            where[r, first], place[r, first] = 0, 0
            end = specials & (input_ids[r] != self.cls)
            k = counts[r] - last * chunk
            where[r, end], place[r, end] = last, k + 1
        return [(ids[s], mask[s]) for s in range(n)], where, place


def aligned_hidden(
    hidden: list[torch.Tensor], where: torch.Tensor, place: torch.Tensor
) -> torch.Tensor:
    """Wrapped segments' vectors (each (b, L, d)) at the input's positions, (b, T, d)."""
    b, total = where.shape
    out = hidden[0].new_zeros(b, total, hidden[0].shape[-1])
    for s, vectors in enumerate(hidden):
        rows, cols = (where == s).nonzero(as_tuple=True)
        out[rows, cols] = vectors[rows, place[rows, cols]]
    return out


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Masked mean over a segment's real tokens: (b, t, d), (b, t) -> (b, d); zeros if none."""
    weights = attention_mask.to(hidden.dtype)[..., None]  # (b, t, 1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def merge_rows(updated: Any, previous: Any, rows: torch.Tensor) -> Any:
    """Row-wise choice between two memories of the same structure.

    Tensors (batch first) take ``updated`` where ``rows`` is True and ``previous`` elsewhere;
    lists, tuples and dicts are merged element-wise; ``None`` stays ``None``.

    Args:
        updated: The memory after a segment.
        previous: The memory before it.
        rows: (b,) bool, True for rows the segment had real tokens in.

    """
    if updated is None:
        return None
    if previous is None:
        return updated
    if isinstance(updated, torch.Tensor):
        shape = (-1,) + (1,) * (updated.dim() - 1)
        return torch.where(rows.view(shape), updated, previous)
    if isinstance(updated, (list, tuple)):
        merged = [merge_rows(u, p, rows) for u, p in zip(updated, previous, strict=True)]
        return type(updated)(merged) if isinstance(updated, tuple) else merged
    if isinstance(updated, dict):
        return {key: merge_rows(updated[key], previous[key], rows) for key in updated}
    raise TypeError(
        f"cannot merge memories of type {type(updated).__name__}; "
        "the segment encoder must override merge_memory"
    )


def drain_auxiliary(model: nn.Module) -> torch.Tensor | None:
    """Sum and reset the regularisers the memory modules in ``model`` accumulated.

    The Compressive Transformer's attention-reconstruction loss (Rae et al. 2020, section 3.2)
    and the ∞-former's KL term build up over the segments a forward pass reads, with their
    graph; whoever trains the model adds the sum to its loss once per step, and calls this
    before a forward pass whose regulariser it will not use, so that nothing (and no graph)
    carries over from one step to the next.

    Returns:
        The sum, or ``None`` where no module accumulated one.

    """
    losses = [m.auxiliary_loss() for m in model.modules() if isinstance(m, SegmentEncoder)]
    found = [loss for loss in losses if loss is not None]
    return torch.stack(found).sum() if found else None


class SegmentEncoder(nn.Module):
    """Base class of the memory-augmented encoders: encodes one segment given a memory.

    Subclasses implement `forward(input_ids, attention_mask, *, memory=None)` returning
    `EncoderOutput(hidden (b, t, d), pooled (b, d), memory)`: ``input_ids`` are token ids (b, t),
    ``attention_mask`` (b, t) is 1 at real tokens, and ``memory=None`` means "start a new
    document"; their docstrings describe only their memory. They override `merge_memory` when
    their memory is not a (nest of) batch-first tensors.

    Attributes:
        config: Sizes shared by the family.
        hidden_size: ``config.d_model`` (the `Encoder` protocol's width).

    """

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        self.config = config
        self.hidden_size: int = config.d_model

    def merge_memory(self, updated: Any, previous: Any, rows: torch.Tensor) -> Any:
        """Keep ``updated`` for ``rows`` (b,) True and ``previous`` elsewhere (see `merge_rows`)."""
        return merge_rows(updated, previous, rows)

    def step(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, memory: Any = None
    ) -> EncoderOutput:
        """Encode one segment of a document; rows with no real token in it keep ``memory``.

        The one place the "a row whose input has ended keeps its memory" rule lives: the
        document encoder, the sorting LM and Memformer's replay all step through it.
        """
        out = self(input_ids, attention_mask, memory=memory)
        rows = attention_mask.bool().any(dim=1)  # (b,)
        if memory is not None and not bool(rows.all()):
            out.memory = self.merge_memory(out.memory, memory, rows)
        return out

    def auxiliary_loss(self) -> torch.Tensor | None:
        """A regulariser accumulated by the last forward passes (e.g. ∞-former's KL), or None."""
        return None

    def end_of_pass(self, memory: Any) -> Any:
        """The memory a document's next pass starts from (`DocumentEncoder`'s ``passes``).

        Unchanged by default; ReadTwice marks its summaries complete.
        """
        return memory


class Transformer(SegmentEncoder):
    """A plain Transformer with no memory: the baseline.

    Given a whole sequence as one segment it is full attention over that sequence.

    Args:
        config: Module sizes.

    """

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__(config)
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.layers))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t); the memory is ignored and returned as ``None``."""
        x = self.embed(input_ids)  # (b, t, d)
        mask = segment_mask(attention_mask, self.config.causal)  # (b, 1, t, t)
        for layer in self.layers:
            x = layer(x, mask)
        return EncoderOutput(hidden=x, pooled=mean_pool(x, attention_mask), memory=None)


class DocumentEncoder(nn.Module):
    """Encodes long inputs segment by segment, carrying a segment encoder's memory across them.

    ``hidden`` is the concatenation of the segments' token vectors (b, T, d); ``pooled`` is, per
    row, the pooled vector of the last segment that holds any of the row's real tokens (the
    segment that has read the memory of everything before it). A row whose input ended earlier
    keeps its memory unchanged through the remaining segments (`SegmentEncoder.merge_memory`).

    Args:
        module: The segment encoder.
        segment_length: Tokens per segment.
        truncate: Detach the memory between segments (truncated back-propagation); by default
            gradients flow through the memory as far as the module itself lets them.
        passes: Read the document this many times, each pass starting from the memory the
            previous one left; the outputs are the last pass's (2: ERNIE-Doc's retrospective
            feed).
        wrap: Read each segment as ``[CLS] text [SEP]`` (`SegmentWrap`: RMT on a BERT, as
            Bulatov et al.); ``hidden`` still has one vector per input position.

    """

    def __init__(
        self,
        module: SegmentEncoder,
        segment_length: int,
        *,
        truncate: bool = False,
        passes: int = 1,
        wrap: SegmentWrap | None = None,
    ):
        super().__init__()
        self.wrap = wrap
        check_at_least(1, segment_length=segment_length, passes=passes)
        self.module = module
        self.segment_length = segment_length
        self.truncate = truncate
        self.passes = passes
        self.hidden_size: int = module.hidden_size

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode token ids (b, T) in segments of ``segment_length``; returns the final memory."""
        for _ in range(self.passes - 1):
            memory = self.module.end_of_pass(self.read(input_ids, attention_mask, memory).memory)
        return self.read(input_ids, attention_mask, memory)

    def read(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, memory: Any = None
    ) -> EncoderOutput:
        """One pass over the document's segments, starting from ``memory``."""
        hidden, pooled = [], None
        segments, aligned = self._segments(input_ids, attention_mask)
        for ids, mask in segments:  # (b, t) each
            rows = mask.any(dim=1)  # (b,)
            if not bool(rows.any()):
                hidden.append(ids.new_zeros(*ids.shape, self.hidden_size, dtype=torch.float))
                continue
            out = self.module.step(ids, mask, memory)
            hidden.append(out.hidden)
            if pooled is not None:
                pooled = torch.where(rows[:, None], out.pooled, pooled)  # (b, d)
            else:
                pooled = out.pooled
            memory = _detach(out.memory) if self.truncate else out.memory
        if pooled is None:
            raise ValueError("every row of the batch is empty (attention_mask is all zeros)")
        if aligned is not None:  # each input position's vector, from its wrapped segment
            hidden_states = aligned_hidden(hidden, *aligned).to(pooled.dtype)  # (b, T, d)
        else:
            hidden_states = torch.cat(hidden, dim=1).to(pooled.dtype)  # (b, T, d)
        return EncoderOutput(hidden=hidden_states, pooled=pooled, memory=memory)

    def _segments(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], tuple[torch.Tensor, ...] | None]:
        """The segments read in turn, and where the input's positions are in them.

        Slices of the input (their vectors concatenate to the input's positions: None), or
        wrapped segments (`SegmentWrap`) with the segment and position of each input position.
        """
        if self.wrap is not None:
            segments, where, place = self.wrap.segments(
                input_ids, attention_mask, self.segment_length
            )
            return segments, (where, place)
        length = self.segment_length
        slices = [
            (input_ids[:, s : s + length], attention_mask[:, s : s + length])
            for s in range(0, input_ids.shape[1], length)
        ]
        return slices, None

    def auxiliary_loss(self) -> torch.Tensor | None:
        """The wrapped module's regulariser, if it has one."""
        return self.module.auxiliary_loss()

    # -- stages, for head-only local adaptation ------------------------------------------------
    # Local adaptation runs the frozen part of the network once and the adapted part many times
    # (see `HFEncoder.run_stages`). A document encoder has two stages: 0 = token ids and
    # 1 = the final representation, in which position 0 holds the pooled vector (where a
    # BERT-style encoder has [CLS]), so head-only adaptation reads what the head reads.

    num_layers = 0
    """No stage-wise layers: only head-only local adaptation applies (stage 1)."""

    def layer_prefix(self, index: int) -> str:
        """Never asked: without stage-wise layers no scope addresses a layer."""
        raise ValueError(f"{type(self).__name__} has no stage-wise layers (layer {index})")

    def run_stages(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor,
        start: int,
        stop: int,
        *,
        packed: bool = False,
        pooled_only: bool = False,
    ) -> torch.Tensor:
        """Carry token ids (stage 0) to the final representation (stage 1), or stay put.

        ``packed`` and ``pooled_only`` (see `HFEncoder.run_stages`) change nothing here: the
        pooled vector is computed whole, at position 0 of the result.

        Raises:
            ValueError: For any other pair of stages.

        """
        if start == stop:
            return x
        if (start, stop) != (0, 1):
            raise ValueError(
                f"a document encoder has stages 0 (ids) and 1 (final); got {start} -> {stop}"
            )
        out = self(x, attention_mask)
        return torch.cat([out.pooled[:, None], out.hidden[:, 1:]], dim=1)  # (b, t, d)

    def resume(
        self,
        x: torch.Tensor,
        attention_mask: torch.Tensor,
        start: int,
        *,
        packed: bool = False,
        pooled_only: bool = False,
    ) -> EncoderOutput:
        """Finish encoding from stage ``start``: 0 runs the encoder, 1 is already final.

        ``packed`` and ``pooled_only`` (see `HFEncoder.run_stages`) change nothing here.
        """
        if start == 0:
            return self(x, attention_mask)
        x = self.run_stages(x, attention_mask, start, 1)
        return EncoderOutput(hidden=x, pooled=x[:, 0], memory=None)


def _detach(memory: Any) -> Any:
    if isinstance(memory, torch.Tensor):
        return memory.detach()
    if isinstance(memory, (list, tuple)):
        items = [_detach(m) for m in memory]
        return type(memory)(items) if isinstance(memory, tuple) else items
    if isinstance(memory, dict):
        return {key: _detach(value) for key, value in memory.items()}
    return memory
