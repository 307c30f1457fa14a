"""Benchmark the [CLS]-only last layer of local adaptation (``pooled_only``) against the full one.

    python experiments/bench/last_layer.py [--neighbours 32] [--steps 10] [--device cpu]
        [--encoder minilm]

A local-adaptation step of the fast path with ``adapt_scope`` top1/top2 runs the adapted top
layers forward and backward over the K neighbours' cached inputs. A classification head reads
[CLS] alone, so the last layer needs its output there only (`HFEncoder.run_stages`'s
``pooled_only``): every token's key and value, but the query, the attention output and the
feed-forward block for one position per row. This times the same steps both ways, side by side
in one process, on MiniLM with K neighbours of 20 to 63 real tokens (the text streams' range at
64 tokens), and prints the ratio; it also checks that the pooled vectors agree.
"""

from __future__ import annotations

import argparse
import time

import torch

from lifelong.encoders.hf import PackedLayout, load_encoder
from lifelong.runtime import resolve_device


def step_seconds(encoder, x, mask, start, layout, pooled_only: bool, steps: int) -> float:
    """Seconds for ``steps`` forward-backward passes from stage ``start`` to the last stage."""
    stop = encoder.num_layers + 1
    began = time.perf_counter()
    for _ in range(steps):
        encoder.zero_grad()
        out = encoder.run_stages(
            x, mask, start, stop, packed=True, layout=layout, pooled_only=pooled_only
        )
        out[:, 0].square().sum().backward()  # (b, d) what a [CLS] head reads
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--neighbours", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--encoder", default="minilm", help="a BERT-style encoder name")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    torch.manual_seed(0)
    encoder = load_encoder(args.encoder).eval().to(device)
    lengths = torch.randint(20, 64, (args.neighbours,))
    mask = (torch.arange(64) < lengths[:, None]).long().to(device)  # (K, 64)
    ids = torch.randint(1000, 20000, (args.neighbours, 64), device=device) * mask
    sizes = f"{args.neighbours} neighbours of 20-63 tokens, {args.steps} steps"
    print(f"{args.encoder}, {sizes}, {device}")
    for top in (1, 2):
        start = encoder.num_layers + 1 - top
        with torch.no_grad():
            x = encoder.run_stages(ids, mask, 0, start, packed=True)  # (K, 64, d)
            layout = PackedLayout.of(mask)
            full = encoder.resume(x, mask, start, packed=True).pooled
            first = encoder.resume(x, mask, start, packed=True, pooled_only=True).pooled
        gap = float((full - first).abs().max())
        seconds = {False: 0.0, True: 0.0}
        for pooled_only in (False, True, False, True):  # interleaved: drift hits both
            seconds[pooled_only] += step_seconds(
                encoder, x, mask, start, layout, pooled_only, args.steps
            )
        ratio = seconds[False] / seconds[True]
        print(f"top{top}: [CLS]-only last layer {ratio:.2f}x the full one (pooled gap {gap:.1e})")


if __name__ == "__main__":
    main()
