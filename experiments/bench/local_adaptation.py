"""Benchmark MbPA++ local adaptation: the paper's per-example reference path vs the fast path.

One run, one model, one memory, the same test examples for every row. The model is MiniLM
trained (sparse replay) over the bundled sample in order i, with every training example in
episodic memory; the test examples are drawn evenly from the five test sets. Every path adapts
with K = 32 neighbours and L = 30 steps (λ = 1e-3). For each path the script prints
examples/second, the speed-up over the reference, the accuracy, and the compute bound: the
reference's token-layers divided by the path's token-layers.

The bound counts token-layers: one transformer layer applied to one token position, a
training step counting 3 (forward + backward ≈ 3 forwards). The reference pads each test
example's K neighbours to the longest of them, so per test example it computes
L·3·n·K·t_max + n·t_x, with n layers and t_x the test input's length. The fast path with N
adapted layers (n for "all", 0 for "head") runs one example at a time on the real tokens only
(see `HFEncoder.run_stages(packed=True)`): (n − N)·Σ_u t_u once for the U distinct neighbours'
frozen prefixes (cached), plus per test example (n − N)·t_x + L·3·N·Σ_k t_k + N·t_x.

    python experiments/bench/local_adaptation.py [--examples 64] [--k 32] [--steps 30]
        [--scopes all,top1,head]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from lifelong.adaptation import AdaptationOptions, LocalAdapter, parse_scope
from lifelong.experiment.config import RunConfig
from lifelong.experiment.runs import build_model
from lifelong.model import Batch
from lifelong.strategy import StrategyContext
from lifelong.training import seed_everything
from strategies.mbpa_plus_plus import MbPAPlusPlus, MbPAPlusPlusOptions
from streams import batches, text_classification_stream


def train(seed: int) -> tuple[MbPAPlusPlus, object, object]:
    """MiniLM after MbPA++'s sparse-replay pass over the sample (order i); memory holds all.

    MbPA++ (not REPLAY, whose memory stores no keys) so that the memory is keyed for search.
    """
    config = RunConfig(encoder="minilm", lr=1e-4, batch_size=16, seed=seed)
    stream = text_classification_stream("i")
    model, task = build_model(config, stream)
    context = StrategyContext(model, task, lr=config.lr, seed=seed)
    strategy = MbPAPlusPlus(context, MbPAPlusPlusOptions(replay_every=100, replay_ratio=0.3))
    for i, part in enumerate(stream):
        for chunk in batches(part.train, config.batch_size, shuffle=True, seed=seed + i):
            strategy.observe(task(chunk))
    return strategy, stream, task


def test_batch(stream, task, n: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    per_task = -(-n // len(stream))
    picked = [
        e
        for t in stream
        for e in rng.choice(np.array(t.test, dtype=object), per_task, replace=False)
    ]
    return task(list(picked[:n]))


def token_layers(
    scope: str,
    n: int,
    steps: int,
    test_lengths: list[int],
    neighbour_lengths: list[list[int]],
    distinct_lengths: list[int],
) -> float:
    """Token-layers one path computes for the whole run (see the module docstring).

    Args:
        scope: ``"reference"`` or the fast path's adapt_scope.
        n: Encoder layers.
        steps: L.
        test_lengths: Tokens of each test input.
        neighbour_lengths: Tokens of each test input's K neighbours.
        distinct_lengths: Tokens of each distinct retrieved neighbour.

    """
    pairs = list(zip(test_lengths, neighbour_lengths))
    if scope == "reference":
        return sum(steps * 3 * n * len(ks) * max(ks) + n * tx for tx, ks in pairs)
    adapted = {"all": n, "head": 0}[scope] if scope in ("all", "head") else int(scope[3:])
    frozen = n - adapted
    cached = frozen * sum(distinct_lengths)
    return cached + sum(
        frozen * tx + steps * 3 * adapted * sum(ks) + adapted * tx for tx, ks in pairs
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--adapt-lr", type=float, default=1e-3)
    parser.add_argument("--scopes", default="all,top1,head")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    seed_everything(args.seed)
    start = time.perf_counter()
    strategy, stream, task = train(args.seed)
    print(
        f"trained MiniLM on the sample in {time.perf_counter() - start:.0f} s; "
        f"memory holds {len(strategy.replay.memory)} examples",
        flush=True,
    )
    model, writer = strategy.trainer.model, strategy.replay.writer
    batch = test_batch(stream, task, args.examples, args.seed)
    n = model.encoder.num_layers

    def options(scope: str, path: str) -> AdaptationOptions:
        return AdaptationOptions(
            k=args.k, steps=args.steps, adapt_lr=args.adapt_lr, adapt_scope=scope, adapt_path=path
        )

    slots = LocalAdapter(model, writer, options("all", "fast")).neighbours(batch)
    distinct = sorted(set(slots.reshape(-1).tolist()))
    stored = writer.memory.get(np.array(distinct)).examples["tokens"]
    size = {s: len(t) for s, t in zip(distinct, stored)}
    lengths = (
        batch.attention_mask.sum(dim=1).tolist(),
        [[size[s] for s in row] for row in slots.tolist()],
        list(size.values()),
    )
    with torch.no_grad():
        plain = model.eval()(*batch.inputs()).argmax(-1) == batch.labels
    rows = [("no adaptation", None, float(plain.float().mean()) * 100)]

    runs = [("reference", "all")] + [("fast", s) for s in args.scopes.split(",")]
    results = {}
    for path, scope in runs:
        parse_scope(scope, n)  # fail early on a bad scope
        adapter = LocalAdapter(model, writer, options(scope, path))
        t0 = time.perf_counter()
        logits = adapter.logits(batch)
        seconds = time.perf_counter() - t0
        accuracy = float((logits.argmax(-1) == batch.labels).float().mean()) * 100
        results[(path, scope)] = (seconds, accuracy)
        print(
            f"  {path:<9} {scope:<5} {len(batch) / seconds:9.3f} ex/s  acc {accuracy:5.1f}%",
            flush=True,
        )

    ref_seconds = results[("reference", "all")][0]
    ref_work = token_layers("reference", n, args.steps, *lengths)
    print(
        f"\nLocal adaptation on MiniLM ({n} layers), K={args.k}, L={args.steps}, "
        f"{len(batch)} test examples ({len(distinct)} distinct neighbours), "
        f"{torch.get_num_threads()} threads"
    )
    print(f"{'path':<22}{'ex/s':>9}{'speed-up':>10}{'bound':>9}{'accuracy':>10}")
    print(f"{'no adaptation':<22}{'':>9}{'':>10}{'':>9}{rows[0][2]:9.1f}%")
    for (path, scope), (seconds, accuracy) in results.items():
        work = token_layers("reference" if path == "reference" else scope, n, args.steps, *lengths)
        print(
            f"{path + ' ' + scope:<22}{len(batch) / seconds:9.3f}{ref_seconds / seconds:9.1f}x"
            f"{ref_work / work:8.1f}x{accuracy:9.1f}%"
        )


if __name__ == "__main__":
    main()
