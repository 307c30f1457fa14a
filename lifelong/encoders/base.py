"""The encoder interface every encoder family shares."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class EncoderOutput:
    """What an encoder returns.

    Attributes:
        hidden: Token representations, shape (b, t, d).
        pooled: One vector per input, shape (b, d) (the [CLS] position for BERT-style encoders).
        memory: The encoder's memory after this input (``None`` for memory-less encoders).

    """

    hidden: torch.Tensor
    pooled: torch.Tensor
    memory: Any = None

    def rows(self, index: torch.Tensor | slice) -> EncoderOutput:
        """The outputs of the inputs ``index`` (the memory is not carried over)."""
        return EncoderOutput(self.hidden[index], self.pooled[index])

    def detach(self) -> EncoderOutput:
        """The same outputs without gradient history (the memory is not carried over)."""
        return EncoderOutput(self.hidden.detach(), self.pooled.detach())

    def scaled(self, gate: torch.Tensor) -> EncoderOutput:
        """Every vector multiplied element-wise by a per-input gate (b, d)."""
        return EncoderOutput(self.hidden * gate[:, None, :], self.pooled * gate)


@runtime_checkable
class Encoder(Protocol):
    """``forward(input_ids, attention_mask, *, memory=None) -> EncoderOutput``.

    An encoder with segment embeddings also takes ``token_type_ids`` (b, t) as a third
    positional argument and says so with ``reads_token_types = True`` (see `reads_token_types`).
    """

    hidden_size: int

    def __call__(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None
    ) -> EncoderOutput:
        """Encode a batch of token ids of shape (b, t)."""
        ...


def reads_token_types(encoder: object) -> bool:
    """Whether ``encoder`` takes ``token_type_ids``: BERT's segment embeddings.

    Encoders declare it with a ``reads_token_types`` attribute (`HFEncoder`: a BERT-style model
    with two or more token types); the memory-augmented document encoders declare nothing and
    read token ids and a mask only.
    """
    return bool(getattr(encoder, "reads_token_types", False))


@contextmanager
def attention_implementation(encoder: Any, name: str) -> Iterator[None]:
    """Temporarily switch a Hugging Face encoder's attention kernel (e.g. to ``"eager"``).

    ``torch.func.vmap`` has no batching rule for the backward of the CPU SDPA kernel (it falls
    back to a slow loop), and that kernel has no double backward; the eager kernel has both.
    """
    config = getattr(getattr(encoder, "model", None), "config", None)
    if config is None:  # not a Hugging Face model: our own modules use plain attention
        yield
        return
    previous = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = previous
