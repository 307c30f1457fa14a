"""``lifelong lm``'s training loop against a plain PyTorch loop over the same model and batches.

Both loops train a fresh copy of the same initial ``transformer`` character LM on the same
random windows of Tiny Shakespeare (nanoGPT's CPU recipe unless told otherwise). The plain loop
is what one writes by hand: AdamW, cross-entropy, backward, clip, step, no schedule, no
bookkeeping. Timings on a shared machine are noisy, so the loops alternate in rounds of
``--steps`` steps (plain, ours, plain, ours, ...) and the result is the ratio of their total
tokens/s, measured side by side in one run. The target: ours at >= 0.9x the plain loop.

On CUDA both loops' clocks stop after the device has finished (ours reads each step's loss with
``.item()``, which waits for it; the plain loop synchronises once at its end), so the ratio also
shows what ours pays for checking every loss as it goes.

    python experiments/bench/lm_loop.py [--steps 100] [--rounds 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time

import numpy as np
import torch

from lifelong.lm.bench import BenchSettings, build_lm
from lifelong.lm.text import (
    CausalLM,
    TrainSettings,
    adamw,
    lm_loss,
    load_corpus,
    random_windows,
    train_lm,
)
from lifelong.runtime import resolve_device


def plain_loop(
    model: CausalLM,
    data: np.ndarray,
    settings: TrainSettings,
    seed: int,
    device: torch.device | str = "cpu",
) -> float:
    """The hand-written loop on ``device``; returns the seconds it took."""
    device = torch.device(device)
    model.to(device)
    optimiser = adamw(model, settings.lr)
    generator = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(settings.steps):
        x, y, _ = random_windows(data, settings.batch_size, settings.window, generator)
        x, y = x.to(device), y.to(device)
        loss = lm_loss(model(x), y)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
        optimiser.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100, help="steps per round and loop")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)  # a bad or missing device fails before any work

    corpus = load_corpus()
    settings = BenchSettings(width=args.width, layers=args.layers)
    train = TrainSettings(steps=args.steps, warmup=1)
    initial = build_lm("transformer", corpus.vocab.size, settings, args.seed)
    warm_up = dataclasses.replace(train, steps=2)  # kernels, allocator: untimed, both loops
    plain_loop(copy.deepcopy(initial).train(), corpus.train, warm_up, args.seed, device)
    train_lm(copy.deepcopy(initial), corpus.train, warm_up, seed=args.seed, device=device)
    seconds = {"plain": 0.0, "ours": 0.0}
    for round_ in range(args.rounds):
        seed = args.seed + round_
        plain = copy.deepcopy(initial).train()
        seconds["plain"] += plain_loop(plain, corpus.train, train, seed, device)
        ours = copy.deepcopy(initial)
        seconds["ours"] += train_lm(ours, corpus.train, train, seed=seed, device=device).seconds
    tokens = args.rounds * args.steps * train.batch_size * train.window
    rates = {name: tokens / s for name, s in seconds.items()}
    ratio = rates["ours"] / rates["plain"]
    print("| loop | tokens/s |\n|---|---|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} |")
    print(f"\nours / plain: {ratio:.2f}x ({args.rounds} alternating rounds of {args.steps} steps "
          f"on {device}; target >= 0.9x)")  # fmt: skip
    return {**rates, "ratio": ratio}


if __name__ == "__main__":
    main()
