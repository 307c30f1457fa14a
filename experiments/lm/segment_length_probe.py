"""Why `full-attention` trails the 32-character `transformer` in `lifelong lm`'s module table.

The module table reads 128-character windows: ``transformer`` as four independent 32-character
segments, ``full-attention`` as one 128-character segment. At 1,000 steps the second came out
worse although it sees more context. This trains memory-less causal LMs of `lifelong lm`'s
budget (`lifelong.lm.bench.BenchSettings`) that differ only in the segment length, on the same
random windows, and prints each one's training loss and its validation loss by position in the
segment: positions 0–15 give every model the same context (at most 16 characters), so a gap
there is a difference in how fast the model learns, not in what its context holds.

    python experiments/lm/segment_length_probe.py [--steps 300] [--lengths 32 64 128] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from lifelong.lm.bench import BenchSettings, build_lm
from lifelong.lm.text import Corpus, TrainSettings, load_corpus, random_windows, train_lm

BUCKET = 16
"""Positions per column of the table."""


def position_losses(model: torch.nn.Module, data: np.ndarray, window: int, seed: int) -> np.ndarray:
    """Mean validation loss (nats) at each position of ``window``-long windows: (window,)."""
    x, y, _ = random_windows(data, 256, window, np.random.default_rng(seed))
    model.eval()
    with torch.no_grad():
        logits = model(x)  # (b, T, V)
        losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    return losses.view(x.shape[0], window).mean(0).numpy()


def probe(
    corpus: Corpus, length: int, steps: int, window: int, seed: int
) -> tuple[float, np.ndarray]:
    """Train the memory-less LM reading ``window`` in ``length``-character segments."""
    settings = BenchSettings(
        segment_length=length, segments=window // length, train=TrainSettings(steps=steps)
    )
    model = build_lm("transformer", corpus.vocab.size, settings, seed)
    trained = train_lm(model, corpus.train, settings.train, seed=seed)
    by_position = position_losses(model, corpus.val, window, seed + 1)
    return float(np.mean(trained.losses[-50:])), by_position


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    window = max(args.lengths)
    if any(window % n for n in args.lengths) or window % BUCKET:
        parser.error(f"every length must divide the longest ({window}), itself a multiple of 16")
    buckets = [f"{i}–{i + BUCKET - 1}" for i in range(0, min(args.lengths), BUCKET)]
    lines = [
        f"{args.steps} steps of 12 windows of {window} characters, seed {args.seed}; validation "
        "loss (nats/char) by position in the segment",
        "",
        "| segment | training loss (last 50 steps) | " + " | ".join(buckets) + " | all |",
        "|---|---:|" + "---:|" * (len(buckets) + 1),
    ]
    corpus = load_corpus()  # read once, shared by every length
    for length in args.lengths:
        loss, by_position = probe(corpus, length, args.steps, window, args.seed)
        in_segment = by_position.reshape(-1, length).mean(0)  # (length,) over the segments
        cells = [in_segment[i : i + BUCKET].mean() for i in range(0, min(args.lengths), BUCKET)]
        row = " | ".join(f"{c:.3f}" for c in cells)
        lines.append(f"| {length} | {loss:.3f} | {row} | {by_position.mean():.3f} |")
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print("\n" + table)
    return table


if __name__ == "__main__":
    main()
