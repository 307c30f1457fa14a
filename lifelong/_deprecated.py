"""Deprecated names of the public API: each warns once per call site, naming its replacement."""

from __future__ import annotations

import warnings


def deprecated_alias(old: str, new: str) -> None:
    """Warn that ``old`` is a deprecated name of ``new`` (a `DeprecationWarning`, at the caller)."""
    warnings.warn(f"lifelong: {old} is deprecated; use {new}", DeprecationWarning, stacklevel=3)
