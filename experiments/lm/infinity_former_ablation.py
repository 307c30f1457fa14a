"""What makes the ∞-former's `lifelong lm` row worse than no memory: an ablation.

    python experiments/lm/infinity_former_ablation.py [--steps 300] [--seed 0] [--out FILE.json]
        [--only NAME ...] [--corpus FILE]

Trains, at `lifelong lm`'s budget (width 128, 4 layers, 4 heads, windows of 4 x 32 characters,
batch 12) but for ``--steps`` steps, on the shipped Tiny Shakespeare:

* ``transformer`` and ``transformer-xl``, the references;
* ``infinity-former, distance bias``: the ∞-former as this project built it before 2026-11-27
  (attention over [STM; segment] with a learned per-head scalar per distance, the only
  position signal; the KL summed over heads and tokens, which `OLD_KL_WEIGHT` reproduces
  with today's average; sticky memories);
* the same with the KL regulariser off (``kl_weight=0``);
* the same with linearly spaced instead of sticky samples (``sticky=False``);
* the same with the KL off and the long-term memory never filled, so every read of it is
  exactly zero: what remains is that ∞-former's local model;
* ``infinity-former``: as `lifelong lm` builds it now, on Transformer-XL's relative attention
  as the reference (``positions="relative"``, the KL averaged as the reference's).

``--only`` runs the named variants alone (the written file then holds those).

It prints and writes validation and held-out bits per character per variant.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lifelong.encoders.infinity_former import InfinityFormer
from lifelong.encoders.layers import ModuleConfig
from lifelong.encoders.memory_modules import build_memory_module
from lifelong.files import atomic_write_text
from lifelong.lm.bench import BenchSettings, _trained_row, build_lm
from lifelong.lm.text import CausalLM, TrainSettings, load_corpus

SEGMENT = 32
OLD_KL_WEIGHT = 1e-6 * 4 * SEGMENT
"""λ_KL 1e-6 on a KL summed over 4 heads and 32 tokens = 1.28e-4 on their average (every row's
long-term memory fills at the same segment here, so the two are equal)."""


class _EmptyLongTermMemory(InfinityFormer):
    """An ∞-former whose long-term memory is never filled (its reads are exactly zero)."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, memory: Any = None):  # noqa: D102
        if memory is not None:
            memory = {**memory, "filled": torch.zeros_like(memory["filled"]),
                      "pending_mask": torch.zeros_like(memory["pending_mask"])}  # fmt: skip
        return super().forward(input_ids, attention_mask, memory=memory)


def _infinity(vocab: int, seed: int, empty_ltm: bool = False, **options: Any) -> CausalLM:
    config = ModuleConfig(vocab_size=vocab, d_model=128, heads=4, layers=4, ffn=512,
                          dropout=0.0, max_positions=SEGMENT, causal=True)  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = build_memory_module("infinity-former", config, SEGMENT, **options)
        if empty_ltm:
            module.__class__ = _EmptyLongTermMemory
        return CausalLM(module, SEGMENT)


def _old(vocab: int, seed: int, empty_ltm: bool = False, **options: Any) -> CausalLM:
    """The ∞-former of before 2026-11-27 (distance bias, the KL's old scale), or a variant."""
    options = {"positions": "distance-bias", "kl_weight": OLD_KL_WEIGHT, **options}
    return _infinity(vocab, seed, empty_ltm, **options)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Train every variant (or ``--only`` those), print and write the rows, and return them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--corpus", type=Path, default=None, help="default: Tiny Shakespeare")
    args = parser.parse_args(argv)
    corpus = load_corpus() if args.corpus is None else load_corpus(args.corpus)
    warmup = min(100, max(1, args.steps // 20))
    settings = BenchSettings(segment_length=SEGMENT, segments=4,
                             train=TrainSettings(steps=args.steps, warmup=warmup))  # fmt: skip
    vocab, seed = corpus.vocab.size, args.seed
    variants: dict[str, Callable[[], torch.nn.Module]] = {
        "transformer": lambda: build_lm("transformer", vocab, settings, seed),
        "infinity-former, distance bias": lambda: _old(vocab, seed),
        "infinity-former, distance bias, KL off": lambda: _old(vocab, seed, kl_weight=0.0),
        "infinity-former, distance bias, not sticky": lambda: _old(vocab, seed, sticky=False),
        "infinity-former, distance bias, KL off, LTM empty": lambda: _old(
            vocab, seed, empty_ltm=True, kl_weight=0.0
        ),
        "infinity-former": lambda: _infinity(vocab, seed),
        "transformer-xl": lambda: build_lm("transformer-xl", vocab, settings, seed),
    }
    unknown = sorted(set(args.only or ()) - set(variants))
    if unknown:
        raise SystemExit(f"--only: unknown variants {unknown}; choose from {sorted(variants)}")
    if args.only:
        variants = {name: make for name, make in variants.items() if name in args.only}
    rows = {}
    for name, make in variants.items():
        row = _trained_row(name, make(), corpus, settings, torch.device("cpu"), seed, None)
        rows[name] = {"val_bpc": row.val_bpc, "heldout_bpc": row.heldout_bpc,
                      "final_train_loss": row.final_train_loss, "seconds": row.seconds}  # fmt: skip
        print(f"{name}: val bpc {row.val_bpc:.3f}, held-out {row.heldout_bpc:.3f}", flush=True)
    if args.out is not None:
        atomic_write_text(args.out, json.dumps({"steps": args.steps, "seed": seed,
                                                "rows": rows}, indent=2))  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
