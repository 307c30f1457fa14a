"""Argument checks shared by the memory modules: one message style, the name in every error.

Every module checks its sizes when it is built (before any weight is made), so a bad value
fails with a line naming the argument rather than with a shape error in the first forward pass.
"""

from __future__ import annotations

import torch


def check_at_least(minimum: float, **values: float) -> None:
    """Raise `ValueError` naming the first value below ``minimum``.

    Args:
        minimum: The smallest allowed value (1 for counts and lengths, 0 for optional ones).
        **values: Argument name -> value, checked in order.

    Raises:
        ValueError: ``"<name> must be >= <minimum>, got <value>"``.

    """
    for name, value in values.items():
        if not value >= minimum:  # also refuses NaN
            raise ValueError(f"{name} must be >= {minimum}, got {value}")


def check_positive(**values: float) -> None:
    """Raise `ValueError` naming the first value that is not strictly positive (or is NaN)."""
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def check_segment_inputs(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """Check a segment's ``input_ids`` (b, t) and its ``attention_mask`` of the same shape.

    Raises:
        ValueError: ``input_ids`` is not two-dimensional or the mask's shape differs.

    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(input_ids.shape)}")
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask must match input_ids {tuple(input_ids.shape)}, "
            f"got {tuple(attention_mask.shape)}"
        )


__all__ = ["check_at_least", "check_positive", "check_segment_inputs"]
