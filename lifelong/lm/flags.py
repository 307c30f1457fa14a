"""The flags of ``lifelong lm`` and their checks: light (no torch), so ``--help`` is instant."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lifelong.encoders.names import MEMORY_FAMILIES
from lifelong.options import did_you_mean, given_text

FULL_ATTENTION = "full-attention"
"""The memory-less Transformer reading the whole window at once."""

KNN_LM = "knn-lm"
"""The ``transformer`` row's trained model plus a kNN-LM datastore."""

SPALM = "spalm"
"""Transformer-XL plus the gated long-term memory over the ``transformer`` row's datastore."""

LM_MODULES = (*MEMORY_FAMILIES, FULL_ATTENTION, KNN_LM, SPALM)
"""Every name ``--modules`` takes."""

DEFAULT_CORPUS = (
    Path(__file__).resolve().parents[1] / "streams" / "samples" / "tinyshakespeare" / "input.txt"
)
"""Tiny Shakespeare, shipped with the project (its README: ``lifelong/streams/samples/
tinyshakespeare/README.md``)."""


def check_modules(names: Sequence[str]) -> list[str]:
    """The ``--modules`` list, checked before anything loads.

    Raises:
        ValueError: An unknown name (naming it and the known ones), or none at all.

    """
    unknown = [n for n in names if n not in LM_MODULES]
    if unknown:
        raise ValueError(
            f"--modules: unknown module {unknown[0]!r}{did_you_mean(unknown[0], LM_MODULES)}; "
            f"known: {', '.join(LM_MODULES)}"
        )
    if not names:
        raise ValueError("--modules is empty")
    return list(names)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``lifelong lm`` (defaults: nanoGPT's CPU ``shakespeare_char`` recipe)."""
    parser.add_argument(
        "--corpus",
        type=given_text,
        default=str(DEFAULT_CORPUS),
        help="UTF-8 text file; the first 90%% of characters train (default: Tiny Shakespeare)",
    )
    parser.add_argument(
        "--modules",
        type=given_text,
        default=f"transformer,{FULL_ATTENTION},{KNN_LM},transformer-xl,{SPALM}",
        help=f"comma-separated, of: {', '.join(LM_MODULES)}",
    )
    parser.add_argument("--steps", type=int, default=2000, help="training steps per module")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device", type=given_text, default="auto", help="auto, cpu, cuda or cuda:N"
    )
    parser.add_argument("--segments", type=int, default=1, help="segments per window")
    parser.add_argument("--segment-length", type=int, default=64, help="characters per segment")
    parser.add_argument("--batch-size", type=int, default=12, help="windows per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument(
        "--json",
        type=given_text,
        help="also write {'budget': ..., 'modules': {name: row}} here, after every row; "
        "rerun with the same budget to resume (modules already there are skipped)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
