"""Memformer (Wu et al.): a segment encoder with a fixed set of memory slots, used as an encoder.

The memory M (b, k, d) holds ``k`` unit-norm slots per sample. Every encoder layer reads the
memory left by the previous segments (cross-attention from the tokens to the slots, the same
M_{t-1} in every layer); after the last layer a *slot attention* writer lets each slot attend to
itself and to the segment's tokens (never to another slot), and *Biased Memory Normalisation*
pulls the result towards a learnable terminal state and back onto the unit sphere:

    m'_i = A_i[0] * m_i + sum_j A_i[j] * V_x[j]          (per head, on d_h slices)
    m_i  <- (m'_i + v_bias_i) / ||m'_i + v_bias_i||

with ``m_0_i = v_bias_i / ||v_bias_i||``. The paper's decoder is not needed here: as an encoder
the module returns the token states H_t (pooled by a masked mean) and carries M across segments.

`mrbp_backward` implements Memory Replay Back-Propagation (the paper's Algorithm 1): a forward
pass without graphs that keeps only the memories, then a backward sweep that recomputes one
segment at a time with a graph and back-propagates the loss together with the gradient arriving
at its output memory. It gives the same gradients as full back-propagation through time
(`bptt_backward`) while keeping only one segment's activations alive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lifelong.encoders.base import EncoderOutput
from lifelong.encoders.checks import check_at_least, check_positive
from lifelong.encoders.layers import (
    FeedForward,
    ModuleConfig,
    MultiHeadAttention,
    TokenEmbedding,
    attend,
    merge_heads,
    segment_mask,
    split_heads,
)
from lifelong.encoders.segments import SegmentEncoder, mean_pool

Segment = tuple[torch.Tensor, torch.Tensor]
LossFn = Callable[[int, EncoderOutput], torch.Tensor | None]


def write_mask(attention_mask: torch.Tensor, slots: int) -> torch.Tensor:
    """Mask of the slot-attention write: each slot sees itself and the segment's real tokens.

    Args:
        attention_mask: The segment's token mask (b, t), 1 = real token.
        slots: Number of memory slots ``k``.

    Returns:
        Boolean mask (b, 1, k, k + t) over the keys ``[slots; tokens]``, True = may attend.

    """
    b, t = attention_mask.shape
    own = torch.eye(slots, dtype=torch.bool, device=attention_mask.device)  # (k, k)
    tokens = attention_mask.bool()[:, None, :].expand(b, slots, t)  # (b, k, t)
    return torch.cat([own.expand(b, slots, slots), tokens], dim=2)[:, None]  # (b, 1, k, k + t)


class MemoryWriter(nn.Module):
    """Memformer's slot-attention memory update (before the biased normalisation).

    Slot ``i`` queries with ``m_i W_Q`` over the keys ``[m_i W_K; H W_K]`` (its own key and the
    tokens', never another slot's) and takes the values ``[m_i; H W_V]``: its *unprojected* self
    plus the projected tokens. There is no output projection, so a slot that attends only to
    itself is left unchanged. Each head works on its own ``d / heads`` slice; the scores are
    divided by ``sqrt(d_h) * temperature``.

    Args:
        d_model: Width of slots and tokens.
        heads: Number of heads.
        temperature: Softmax temperature τ (> 0); τ < 1 sharpens the write attention.

    Raises:
        ValueError: If ``temperature`` is not positive or ``d_model`` does not divide by ``heads``.

    """

    def __init__(self, d_model: int, heads: int, temperature: float = 0.25) -> None:
        super().__init__()
        check_positive(temperature=temperature)
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        self.heads = heads
        self.temperature = temperature
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)

    def forward(
        self, memory: torch.Tensor, hidden: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Update the slots from the segment's final token states.

        Args:
            memory: The slots M_{t-1} (b, k, d).
            hidden: The last encoder layer's token states (b, t, d).
            attention_mask: (b, t), 1 = real token; padded tokens are never attended to.

        Returns:
            The updated slots m' (b, k, d) and the write attention (b, heads, k, k + t), whose
            first ``k`` columns are slot-to-slot (zero off the diagonal).

        """
        k = memory.shape[1]
        q = split_heads(self.query(memory), self.heads)  # (b, h, k, d_h)
        keys = split_heads(self.key(torch.cat([memory, hidden], dim=1)), self.heads)
        values = torch.cat(
            [split_heads(memory, self.heads), split_heads(self.value(hidden), self.heads)], dim=2
        )  # (b, h, k + t, d_h)
        scale = 1.0 / (math.sqrt(q.shape[-1]) * self.temperature)
        mask = write_mask(attention_mask, k)  # (b, 1, k, k + t)
        out, weights = attend(q, keys, values, mask, scale=scale)  # (b, h, k, d_h)
        return merge_heads(out), weights


class MemformerLayer(nn.Module):
    """Self-attention -> memory read (cross-attention to the slots) -> FFN, post-LN residuals."""

    def __init__(self, config: ModuleConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(config.d_model, config.heads, config.dropout)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.read = MultiHeadAttention(config.d_model, config.heads, config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config.d_model, config.ffn, config.dropout)
        self.norm3 = nn.LayerNorm(config.d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, memory: torch.Tensor
    ) -> torch.Tensor:
        """Tokens (b, t, d), self-attention mask (b, 1, t, t), slots (b, k, d) -> (b, t, d)."""
        x = self.norm1(x + self.attention(x, mask=mask))
        x = self.norm2(x + self.read(x, memory))  # every slot is visible to every token
        return self.norm3(x + self.ffn(x))


class Memformer(SegmentEncoder):
    """Memformer's encoder with its slot memory, as a segment encoder.

    The memory is a tensor (b, slots, d) of unit vectors; ``memory=None`` starts a document from
    m_0 = v̂_bias. With ``config.causal`` the self-attention is causal inside the segment; the
    memory it reads holds only previous segments, so nothing leaks from future tokens.

    Args:
        config: Module sizes.
        slots: Number of memory slots ``k``.
        temperature: Writer softmax temperature τ (the paper uses 0.25 for images, 0.125 for LM).
        bias_norm: Initial norm of each row of v_bias (random directions). Together with the
            written content it sets how fast a slot forgets: larger norms forget faster.
        summary_tokens: Learned "classification" tokens appended to every segment (the paper's
            c tokens, whose number it does not give); the writer sees them, ``hidden`` and
            ``pooled`` do not include them. Under ``config.causal`` the segment's tokens cannot
            attend to them. 0 (the default) appends none.

    Raises:
        ValueError: For a non-positive ``slots``, ``temperature`` or ``bias_norm``, or a negative
            ``summary_tokens``.

    """

    def __init__(
        self,
        config: ModuleConfig,
        slots: int,
        *,
        temperature: float = 0.25,
        bias_norm: float = 1.0,
        summary_tokens: int = 0,
    ) -> None:
        super().__init__(config)
        if slots < 1:
            raise ValueError(f"slots must be a positive number of memory slots, got {slots}")
        check_positive(bias_norm=bias_norm)
        check_at_least(0, summary_tokens=summary_tokens)
        self.slots = slots
        self.embed = TokenEmbedding(config)
        self.layers = nn.ModuleList(MemformerLayer(config) for _ in range(config.layers))
        self.writer = MemoryWriter(config.d_model, config.heads, temperature)
        bias = F.normalize(torch.randn(slots, config.d_model), dim=-1) * bias_norm
        self.memory_bias = nn.Parameter(bias)  # v_bias (k, d)
        self.summary = (
            nn.Parameter(torch.randn(summary_tokens, config.d_model) * 0.02)
            if summary_tokens
            else None
        )  # (c, d)

    def initial_memory(self, batch_size: int) -> torch.Tensor:
        """m_0 = v_bias / ||v_bias|| for every row: (batch_size, k, d)."""
        start = F.normalize(self.memory_bias, dim=-1)  # (k, d)
        return start.expand(batch_size, *start.shape)

    def normalize_memory(self, updated: torch.Tensor) -> torch.Tensor:
        """Biased Memory Normalisation: (m' + v_bias) / ||m' + v_bias||, (b, k, d) -> (b, k, d)."""
        return F.normalize(updated + self.memory_bias, dim=-1)

    def write(
        self, memory: torch.Tensor, hidden: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """The full memory write: slot attention, then Biased Memory Normalisation.

        Args:
            memory: The slots M_{t-1} (b, k, d).
            hidden: Token states of the segment (b, t, d) (the last encoder layer's output).
            attention_mask: (b, t), 1 = real token.

        Returns:
            M_t (b, k, d), every slot of unit norm.

        """
        updated, _ = self.writer(memory, hidden, attention_mask)  # (b, k, d)
        return self.normalize_memory(updated)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a segment (b, t) reading M_{t-1}; returns H_t, its masked mean and M_t.

        ``memory`` is M_{t-1} (b, k, d), or None to start from m_0.

        Raises:
            ValueError: If ``memory`` is not a (b, slots, d_model) tensor.

        """
        b, t = input_ids.shape
        memory = self.initial_memory(b) if memory is None else self._checked(memory, b)
        x, mask = self._inputs(input_ids, attention_mask)  # (b, t + c, d), (b, t + c)
        self_mask = segment_mask(mask, self.config.causal)  # (b, 1, t + c, t + c)
        for layer in self.layers:
            x = layer(x, self_mask, memory)
        updated = self.write(memory, x, mask)  # (b, k, d)
        hidden = x[:, :t]  # (b, t, d)
        return EncoderOutput(hidden, mean_pool(hidden, attention_mask), updated)

    def _inputs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Embedded tokens plus the summary tokens (real only in rows with a real token)."""
        x = self.embed(input_ids)  # (b, t, d)
        if self.summary is None:
            return x, attention_mask
        b, c = x.shape[0], self.summary.shape[0]
        x = torch.cat([x, self.summary.expand(b, -1, -1)], dim=1)  # (b, t + c, d)
        rows = attention_mask.bool().any(dim=1, keepdim=True)  # (b, 1)
        mask = torch.cat([attention_mask, rows.expand(b, c).to(attention_mask.dtype)], dim=1)
        return x, mask

    def _checked(self, memory: Any, batch_size: int) -> torch.Tensor:
        expected = (batch_size, self.slots, self.config.d_model)
        if not isinstance(memory, torch.Tensor) or tuple(memory.shape) != expected:
            got = tuple(memory.shape) if isinstance(memory, torch.Tensor) else type(memory)
            raise ValueError(f"memory must be a tensor of shape {expected}, got {got}")
        return memory


def _step(
    module: SegmentEncoder, segment: Segment, memory: torch.Tensor | None
) -> tuple[EncoderOutput, torch.Tensor]:
    """One segment; rows without real tokens keep their memory, as in `DocumentEncoder`."""
    out = module.step(*segment, memory)
    if not isinstance(out.memory, torch.Tensor):
        raise ValueError(
            f"memory replay needs a module whose memory is one tensor, got {type(out.memory)}"
        )
    return out, out.memory


def _checked_loss(loss: Any, index: int) -> torch.Tensor | None:
    if loss is not None and (not isinstance(loss, torch.Tensor) or loss.dim() != 0):
        raise ValueError(f"loss_fn must return a scalar tensor or None, got {loss!r} at {index}")
    return loss


def _checked_start(segments: Sequence[Segment], memory: Any) -> torch.Tensor | None:
    if len(segments) == 0:
        raise ValueError("segments must hold at least one (input_ids, attention_mask) pair")
    if memory is not None and not isinstance(memory, torch.Tensor):
        raise ValueError(f"memory must be a tensor or None, got {type(memory).__name__}")
    return None if memory is None else memory.detach()


def _rng_state(device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


@contextmanager
def _replayed_rng(
    state: tuple[torch.Tensor, torch.Tensor | None] | None, device: torch.device
) -> Iterator[None]:
    """Run the body with the random state of the forward pass (so dropout masks repeat)."""
    if state is None:
        yield
        return
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], device)
        yield


def mrbp_backward(
    module: SegmentEncoder,
    segments: Sequence[Segment],
    memory: torch.Tensor | None,
    loss_fn: LossFn,
) -> tuple[float, torch.Tensor]:
    """Memory Replay Back-Propagation over a window of segments (Memformer's Algorithm 1).

    1. Without graphs, run segments ``0..T-2`` from ``memory`` and keep every memory M_τ (and the
       random state, so that dropout is replayed identically).
    2. For τ = T-1 down to 0: recompute segment τ with a graph from ``M_τ.detach()`` (requiring
       grad), then back-propagate ``[loss_τ, M_{τ+1}]`` with grad outputs ``[1, g]`` at once and
       set ``g := grad(M_τ)``. Parameter gradients accumulate in ``.grad``.

    Only one segment's graph is alive at a time; the gradients equal `bptt_backward`'s. When
    ``memory`` is None the first segment builds the initial memory inside its graph, so
    parameters of the initial state (Memformer's v_bias) get their gradient too. The optimiser
    step is left to the caller.

    Args:
        module: A segment encoder whose memory is one batch-first tensor (e.g. `Memformer`).
        segments: The window: ``(input_ids (b, t), attention_mask (b, t))`` per segment. Rows
            without real tokens in a segment keep their memory (as in `DocumentEncoder`).
        memory: The memory entering the window (detached here), or None to start a document.
        loss_fn: ``loss_fn(index, output)`` -> a scalar loss for segment ``index`` or None.

    Returns:
        The summed loss value and the memory after the last segment (detached).

    Raises:
        ValueError: For an empty window, a non-tensor memory or a non-scalar loss.

    """
    start = _checked_start(segments, memory)
    device = next(module.parameters()).device
    buffer: list[torch.Tensor | None] = [start]
    states = []
    with torch.no_grad():
        for segment in segments[:-1]:
            states.append(_rng_state(device))
            buffer.append(_step(module, segment, buffer[-1])[1])
    states.append(None)  # the last segment runs first, on the current random state
    total, grad, final = 0.0, None, None
    for index in reversed(range(len(segments))):
        incoming = buffer[index]
        if incoming is not None:
            incoming = incoming.detach().requires_grad_(True)
        with _replayed_rng(states[index], device):
            out, outgoing = _step(module, segments[index], incoming)
        final = outgoing.detach() if final is None else final
        loss = _checked_loss(loss_fn(index, out), index)
        tensors, grads = [], []
        if loss is not None:
            total += float(loss.detach())
            tensors.append(loss)
            grads.append(None)
        if grad is not None:
            tensors.append(outgoing)
            grads.append(grad)
        if tensors:
            torch.autograd.backward(tensors, grads)
        grad = incoming.grad if incoming is not None else None
    assert final is not None
    return total, final


def bptt_backward(
    module: SegmentEncoder,
    segments: Sequence[Segment],
    memory: torch.Tensor | None,
    loss_fn: LossFn,
) -> tuple[float, torch.Tensor]:
    """Full back-propagation through time over a window: one graph over all segments.

    Same arguments, results and gradients as `mrbp_backward`, with every segment's activations
    alive until the single backward pass (the reference MRBP is checked against); it raises
    `ValueError` where `mrbp_backward` does.
    """
    state = _checked_start(segments, memory)
    total: torch.Tensor | None = None
    for index, segment in enumerate(segments):
        out, state = _step(module, segment, state)
        loss = _checked_loss(loss_fn(index, out), index)
        if loss is not None:
            total = loss if total is None else total + loss
    if total is not None:
        total.backward()
    assert state is not None
    return (0.0 if total is None else float(total.detach())), state.detach()


__all__ = [
    "LossFn",
    "Memformer",
    "MemformerLayer",
    "MemoryWriter",
    "Segment",
    "bptt_backward",
    "mrbp_backward",
    "write_mask",
]
